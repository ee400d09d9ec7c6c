"""The torch profiler observes a real CPU run end to end: trace written, phases and steps parsed,
its overhead against the unprofiled run derived; a broken trace is an error naming the file."""
import gzip
import json

import pytest

from analysis import aggregate
from profiles import kineto
from tests.conftest import spec_of
from workloads import harness
from trainperf.sweep import run_cell


@pytest.fixture(scope="module")
def profiled(tmp_path_factory, datasets):
    from trainperf import config, matrix
    cfg = config.load(overrides={"preset": "cpu", "data_root": str(datasets), "profilers": ["timing", "torch"]})
    cfg["presets"]["cpu"].update(warmup_steps=1, measured_steps=4)
    cfg = matrix.resolve(cfg)
    out = tmp_path_factory.mktemp("runs")
    records = {}
    for profiler in ("timing", "torch"):
        spec = matrix.cell(cfg, "lstm", "baseline", profiler)["spec"]
        (out / profiler).mkdir()
        records[profiler] = run_cell(spec, out_dir=out / profiler)
        (out / profiler / "metrics.json").write_text(json.dumps(records[profiler], default=str))
    return records, out


def test_profiled_run_writes_a_trace_and_its_metrics(profiled):
    records, out = profiled
    record = records["torch"]
    assert record["status"] == "ok", record["reason"]
    assert (out / "torch" / "trace.json.gz").stat().st_size > 1000
    m = {r["metric"]: r["value"] for r in record["metrics"]}
    assert m["profiled_steps"] == 2  # 4 measured - 1 wait - 1 warm-up
    assert m["phase_forward"] > 0 and m["phase_backward"] > 0 and m["phase_input"] > 0
    assert m["phase_forward"] + m["phase_backward"] + m["phase_optimizer"] + m["phase_input"] <= m["profiled_step_time"] * 1.05
    assert "kernels_per_step" not in m and "linear_device_time" not in m  # no GPU, no kernels: nothing invented


def test_overhead_is_derived_against_the_timing_run(profiled, tmp_path):
    _, out = profiled
    summary = aggregate.main([out / "timing" / "metrics.json", out / "torch" / "metrics.json"], [], tmp_path)
    row = summary[summary.metric == "profiler_overhead"]
    assert row.profiler.tolist() == ["torch"] and row.unit.tolist() == ["%"]


def test_truncated_trace_names_the_file(profiled, tmp_path):
    _, out = profiled
    data = gzip.open(out / "torch" / "trace.json.gz", "rb").read()
    cut = tmp_path / "trace.json"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=f"{cut}: not a readable torch.profiler trace"):
        kineto.metrics(cut)


def test_union_of_overlapping_intervals():
    import pandas as pd
    df = pd.DataFrame({"ts": [0.0, 5.0, 20.0, 21.0], "dur": [10.0, 10.0, 2.0, 0.5]})
    assert kineto.union_us(df) == 15.0 + 2.0


def test_an_operators_time_per_call_matches_its_trace_events(tmp_path):
    """op_times reads torch.profiler's own table; on a CPU its host-time twin must agree with the
    trace's aten::conv2d events (the GPU reading, device time, comes from the same table)."""
    import torch
    import torchvision
    from profiles import torch_profiler
    model, x = torchvision.models.resnet18(num_classes=4), torch.randn(2, 3, 64, 64)
    trace = tmp_path / "trace.json"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        model(x).sum().backward()
    prof.export_chrome_trace(str(trace))
    got = {r["metric"]: r["value"] for r in torch_profiler.op_times(prof.key_averages(), "cpu_time_total")}
    events = kineto.load(trace)
    conv = events[events.name == "aten::conv2d"].dur
    assert len(conv) == 20 and got["conv2d_device_time"] == pytest.approx(conv.mean() / 1e3, rel=1e-3)
    assert set(got) == {"conv2d_device_time", "linear_device_time"}
    assert torch_profiler.op_times(prof.key_averages()) == []  # no GPU, no device time: nothing invented
