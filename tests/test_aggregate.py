"""Aggregation on real run records made on an H200 (tests/data/h200-timing) and on records of
every status."""
import json
from pathlib import Path

import pandas as pd
import pytest

from analysis import aggregate

H200 = sorted((Path(__file__).parent / "data" / "h200-timing").glob("*.json"))


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    out = tmp_path_factory.mktemp("h200")
    skipped = [{"keys": {"workload": "lstm", "variant": "dali", "profiler": "timing", "rep": 0},
                "reason": "DALI decodes images; lstm reads tokens"}]
    return aggregate.main(H200, skipped, out), out


def test_gpu_records_give_gpu_metrics(h200):
    summary, out = h200
    ok = summary[summary.status == "ok"]
    units = dict(zip(ok.metric, ok.unit))
    assert units["peak_memory"] == "GiB" and units["gpu_util"] == "%" and units["gpu_step_time"] == "ms"
    assert units["token_throughput"] == "tokens/s" and units["throughput"] == "samples/s"
    assert (ok.n == 1).all() and (ok.lo <= ok["median"]).all() and (ok["median"] <= ok.hi).all()
    env = json.loads((out / "env.json").read_text())
    assert {e["gpu"] for e in env} == {"NVIDIA H200"}


def test_skipped_cells_keep_their_reason(h200):
    summary, out = h200
    row = summary[(summary.workload == "lstm") & (summary.variant == "dali")]
    assert row.status.tolist() == ["skipped"] and "DALI decodes images" in row.reason.iloc[0]
    cells = pd.read_csv(out / "cells.csv")
    assert len(cells) == len(H200) + 1 and set(cells.status) == {"ok", "skipped"}


def test_speedup_and_loss_check_against_the_baseline(tmp_path):
    data = Path(__file__).parent / "data" / "h200-timing"
    base = json.loads((data / "lstm--cudnn-benchmark.json").read_text())  # fp32, stands in as baseline
    base["keys"]["variant"] = "baseline"
    fast = json.loads((data / "lstm--amp.json").read_text())
    failed = {"keys": {**fast["keys"], "variant": "tf32"}, "status": "failed", "reason": "out of memory"}
    paths = []
    for i, record in enumerate((base, fast, failed)):
        paths.append(tmp_path / f"{i}.json")
        paths[-1].write_text(json.dumps(record))
    summary = aggregate.main(paths, [], tmp_path / "out")
    value = summary.set_index(["variant", "metric"])["median"]
    assert value["amp", "speedup"] == pytest.approx(value["amp", "throughput"] / value["baseline", "throughput"])
    assert value["amp", "speedup"] > 2 and value["baseline", "speedup"] == 1.0
    assert abs(value["amp", "loss_vs_baseline"]) < aggregate.LOSS_TOLERANCE
    assert summary[summary.variant == "tf32"][["status", "reason"]].values.tolist() == [["failed", "out of memory"]]


def test_unreadable_record_names_the_file(tmp_path):
    bad = tmp_path / "metrics.json"
    bad.write_text('{"keys": ')
    with pytest.raises(ValueError, match=f"unreadable run record {bad}"):
        aggregate.main([bad], [], tmp_path / "out")
