"""Every registered workload runs, in the naive and the optimized variant, for real on the CPU."""
import math

import pytest

import workloads
from workloads import harness
from trainperf.sweep import run_cell
from tests.conftest import spec_of


@pytest.mark.parametrize("workload", workloads.names())
@pytest.mark.parametrize("variant", ["baseline", "optimized"])
def test_workload_trains_two_steps(cpu_config, workload, variant):
    record = run_cell(spec_of(cpu_config, workload, variant))
    assert record["status"] == "ok", record["reason"]
    metrics = {m["metric"]: m for m in record["metrics"]}
    assert metrics["throughput"]["value"] > 0
    assert metrics["throughput"]["unit"] == f"{workloads.get(workload).unit}/s"
    assert len(record["steps"]) == 2
    assert all(math.isfinite(s["loss"]) for s in record["steps"])
    assert 0 <= metrics["input_wait_share"]["value"] <= 100
    assert record["env"]["torch"] and record["env"]["cpu_count"] >= 1


def test_registry_finds_the_reference_workloads():
    assert {"resnet50", "vit_b_16", "lstm"} <= set(workloads.names())


def test_unknown_workload_names_the_known_ones():
    with pytest.raises(KeyError, match="unknown workload 'resnet51'; known: .*resnet50"):
        workloads.get("resnet51")
