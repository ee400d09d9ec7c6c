"""torch.compile, the one knob the cpu preset leaves off (inductor builds C++ for minutes on a
CPU): here it compiles a small ViT for real and trains with it; and a model that dynamo does not
capture is caught rather than reported as compiled."""
import math

import pytest
import torch
import torch._dynamo

from tests.conftest import spec_of
from workloads import harness, matrix


@pytest.fixture()
def compile_config(cpu_config):
    cfg = dict(cpu_config)
    cfg["presets"] = {**cfg["presets"], "cpu": {**cfg["presets"]["cpu"], "disabled": {}}}
    return matrix.resolve(cfg)


@pytest.mark.slow
def test_compile_variant_compiles_and_trains(compile_config):
    spec = spec_of(compile_config, "vit_b_16", "compile")
    spec["params"].update(image_size=32, batch_size=2)
    t = harness.Trainer(spec)
    assert isinstance(t.forward, torch._dynamo.eval_frame.OptimizedModule)
    losses = [t.step(*next(t.batches)).item() for _ in range(2)]
    assert all(math.isfinite(v) for v in losses)
    t.check_compiled()
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1
    metrics = {m["metric"]: m["value"] for m in t.compile_metrics()}
    assert metrics == {"compiled_graphs": torch._dynamo.utils.counters["stats"]["unique_graphs"]}


def test_lstm_compile_is_skipped_because_dynamo_leaves_rnns_eager(compile_config):
    cell = matrix.cell(compile_config, "lstm", "compile")
    assert cell["status"] == "skipped" and "does not trace nn.LSTM" in cell["reason"]


def test_a_compile_that_captured_nothing_fails_the_check(compile_config):
    spec = spec_of(compile_config, "lstm", "baseline")
    spec["knobs"]["compile"] = "default"
    t = harness.Trainer(spec)
    t.step(*next(t.batches))
    with pytest.raises(RuntimeError, match="captured no graph"):
        t.check_compiled()
