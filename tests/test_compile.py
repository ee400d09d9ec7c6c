"""torch.compile, the one knob the cpu preset leaves off (inductor builds C++ for minutes on a
CPU): here it compiles a small ViT for real and trains with it; and a model that dynamo does not
capture is caught rather than reported as compiled."""
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch._dynamo

from analysis import aggregate, sections
from tests.conftest import spec_of
from trainperf import matrix, precompile
from workloads import compiled, harness
from trainperf.sweep import run_cell


@pytest.fixture()
def compile_config(cpu_config):
    cfg = dict(cpu_config)
    cfg["presets"] = {**cfg["presets"], "cpu": {**cfg["presets"]["cpu"], "disabled": {}}}
    return matrix.resolve(cfg)


def compiled_cell(spec: dict) -> dict:
    """Build the cell, train two steps; its compile metrics."""
    t = harness.Trainer(spec)
    assert isinstance(t.forward, torch._dynamo.eval_frame.OptimizedModule)
    losses = [t.step(*next(t.batches)).item() for _ in range(2)]
    assert all(math.isfinite(v) for v in losses)
    t.check_compiled()
    return {m["metric"]: m["value"] for m in t.compile_metrics()}


@pytest.mark.slow
def test_compile_variant_compiles_and_trains_then_loads_from_the_cache(compile_config, tmp_path, monkeypatch):
    monkeypatch.setenv(compiled.CACHE_ENV, str(tmp_path / "inductor"))  # an empty cache
    spec = spec_of(compile_config, "vit_b_16", "compile")
    spec["params"].update(image_size=32, batch_size=2)
    first = compiled_cell(spec)
    assert first["compiled_graphs"] == torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1
    assert first["compile_cache_misses"] >= 1 and first["compile_cache_hits"] == 0
    # the same cell again (a later repetition; the Trainer resets dynamo): inductor loads what it compiled
    again = compiled_cell(spec)
    assert again["compile_cache_hits"] >= 1 and again["compile_cache_misses"] == 0
    # a compiled cell that fails says where its graphs came from
    reason = harness.failure_reason(harness.NonFiniteLoss("loss is nan at step 2"), spec)
    assert reason.endswith(f"[torch.compile: {int(again['compile_cache_hits'])} graphs from the cache, 0 compiled]")


@pytest.mark.slow
def test_the_compile_stage_builds_folders_at_once_and_the_cells_then_compile_nothing(compile_config, tmp_path,
                                                                                      monkeypatch):
    """The compile stage on three cache folders at once, each by its own process: a small ViT under
    fp32 and under AMP bf16 are built (their records say how many graphs they compiled); one whose
    images the ViT cannot cut into patches fails with that reason. The fp32 cell then loads every
    graph and compiles none."""
    monkeypatch.setenv(compiled.CACHE_ENV, str(tmp_path / "inductor"))
    spec = spec_of(compile_config, "vit_b_16", "compile")
    spec["params"].update(image_size=32, batch_size=2)
    bf16 = {**spec, "knobs": {**spec["knobs"], "precision": "amp-bf16"}}
    bad = {**spec, "params": {**spec["params"], "image_size": 40}}
    jobs = [(s, tmp_path / "compiled" / f"{compiled.cache_key(s)}.json") for s in (spec, bf16, bad)]
    records = precompile.stage(jobs, parallel=3, cores=2)
    for r, (s, out) in zip(records, jobs):
        assert r == json.loads(out.read_text()) and r["key"] == out.stem == compiled.cache_key(s)
        assert out.with_suffix(".log").stat().st_size > 0 and r["seconds"] > 0
    assert [r["status"] for r in records] == ["ok", "ok", "failed"]
    assert len({r["stage_ts"] for r in records}) == 1 and records[0]["stage_s"] >= max(r["seconds"] for r in records)
    assert all(r["graphs_compiled"] >= 1 and r["graphs_loaded"] == 0 for r in records[:2])
    assert "indivisible by patch size" in records[2]["reason"]
    assert {r["key"] for r in records[:2]} <= {p.name for p in (tmp_path / "inductor").iterdir()}
    record = run_cell(spec, out_dir=tmp_path / "cell")
    got = {m["metric"]: m["value"] for m in record["metrics"]}
    assert record["status"] == "ok" and got["compile_cache_misses"] == 0 and got["compile_cache_hits"] >= 1
    # the report's line on the stage, from its records
    line = sections.compile_stage(aggregate.compile_table([out for _, out in jobs]))
    assert re.search(r"vit_b_16\) built 2 of 3 torch.compile cache folders before the first sweep, up to [23] at once", line)
    assert f"- `{records[2]['key']}` (vit_b_16/compile) failed: AssertionError: Input shape indivisible" in line


@pytest.mark.slow
def test_cells_that_trace_differently_never_share_compiled_graphs(compile_config, tmp_path, monkeypatch):
    """A small ViT compiled under AMP bf16, then under AMP fp16 (PyTorch 2.11's cache served one
    for the other): the fp16 cell compiles its own graph and computes in fp16; a cell that differs
    from it only in its input pipeline and syncing loads that graph."""
    monkeypatch.setenv(compiled.CACHE_ENV, str(tmp_path / "inductor"))
    spec = spec_of(compile_config, "vit_b_16", "compile")
    spec["params"].update(image_size=32, batch_size=2)

    def cell(**knobs):
        s = {**spec, "knobs": {**spec["knobs"], **knobs}}
        t = harness.Trainer(s)
        x, y = next(t.batches)
        with torch.autocast("cpu", dtype=t.dtype):
            out = t.forward(x)
        t.step(x, y)
        return t.compile_cache, out.dtype, {m["metric"]: m["value"] for m in t.compile_metrics()}

    bf16_key, bf16_out, _ = cell(precision="amp-bf16")
    fp16_key, fp16_out, fp16 = cell(precision="amp-fp16")
    assert (bf16_out, fp16_out) == (torch.bfloat16, torch.float16)
    assert fp16_key != bf16_key and fp16["compile_cache_hits"] == 0 and fp16["compile_cache_misses"] >= 1
    same_key, _, same = cell(precision="amp-fp16", num_workers=1, sync_every=10)
    assert same_key == fp16_key and same["compile_cache_hits"] >= 1 and same["compile_cache_misses"] == 0
    assert sorted(p.name for p in (tmp_path / "inductor").iterdir()) == sorted({bf16_key, fp16_key})


def test_the_cache_key_follows_the_traced_knobs_only(compile_config):
    spec = spec_of(compile_config, "vit_b_16", "compile")
    key = compiled.cache_key(spec)
    for runtime in ({"loader": "dali"}, {"num_workers": 8}, {"sync_every": 10}, {"dali_jpeg_buffers": True}):
        assert compiled.cache_key({**spec, "knobs": {**spec["knobs"], **runtime}}) == key
    for traced in ({"precision": "amp-bf16"}, {"sdpa_backend": "flash"}, {"compile": "reduce-overhead"},
                   {"batch_scale": 2}, {"channels_last": True}):
        assert compiled.cache_key({**spec, "knobs": {**spec["knobs"], **traced}}) != key
    assert key.startswith("vit_b_16-")


def test_an_output_in_the_other_16_bit_type_fails_the_dtype_check():
    compiled.check_output_dtype(torch.ones(2, dtype=torch.float16), torch.float16)
    compiled.check_output_dtype(torch.ones(2), torch.float16)  # ops autocast keeps in float32
    compiled.check_output_dtype(torch.ones(2, dtype=torch.bfloat16), None)  # no autocast: no claim
    with pytest.raises(RuntimeError, match="computed in torch.bfloat16 under autocast to torch.float16"):
        compiled.check_output_dtype(torch.ones(2, dtype=torch.bfloat16), torch.float16)


@pytest.mark.slow
def test_a_compiled_optimizer_step_updates_the_weights_as_the_eager_one(compile_config):
    """compile_optimizer: the LSTM stays eager (dynamo does not trace it), its SGD update is compiled;
    two steps (the second uses the momentum) leave the same weights as the eager optimizer's."""
    spec = spec_of(compile_config, "lstm", "baseline")
    trainers = [harness.Trainer({**spec, "knobs": {**spec["knobs"], "compile_optimizer": on}}) for on in (False, True)]
    torch._dynamo.utils.counters.clear()
    for t in trainers:  # the same seed: the same weights and batches
        for _ in range(2):
            t.step(*next(t.batches))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # the compiled trainer's step
    for eager, compiled in zip(*(t.model.parameters() for t in trainers)):
        torch.testing.assert_close(compiled, eager)
    assert not torch.equal(next(trainers[1].model.parameters()), next(harness.Trainer(spec).model.parameters()))


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


def test_eager_pooling_leaves_resnets_max_pool_out_of_the_compiled_graphs(compile_config):
    """The eager-pool lever on the real ResNet-50: dynamo (traced here with its eager backend, no
    inductor) breaks its graph at the stem's max-pool, which then runs, forward and backward, with
    ATen's kernels; without the knob the whole model is one graph."""
    t = harness.Trainer(spec_of(compile_config, "resnet50", "baseline"))
    x, _ = next(t.batches)
    whole = torch._dynamo.explain(t.model)(x)
    assert harness.keep_eager(t.model, torch.nn.MaxPool2d) == 1
    torch._dynamo.reset()
    split = torch._dynamo.explain(t.model)(x)
    assert (whole.graph_count, whole.graph_break_count) == (1, 0)
    assert split.graph_count == 2 and split.graph_break_count >= 1
    assert not any("max_pool2d" in str(g.graph) for g in split.graphs)
    assert any("max_pool2d" in str(g.graph) for g in whole.graphs)


@pytest.mark.slow
def test_a_compiled_fp16_transformer_trains_the_same_from_the_cache(compile_config, tmp_path, monkeypatch):
    """transformer_lm under AMP fp16 (GradScaler) and torch.compile: the cell that loads its graphs
    from the cache takes the same steps, to the bit, as the one that compiled them. (On one H200 with
    torch 2.11 such cells went NaN in most runs, loaded or compiled; here both train alike.)"""
    monkeypatch.setenv(compiled.CACHE_ENV, str(tmp_path / "inductor"))
    spec = spec_of(compile_config, "transformer_lm", "compile")
    spec = {**spec, "knobs": {**spec["knobs"], "precision": "amp-fp16"}}

    def losses() -> tuple[list[float], dict]:
        t = harness.Trainer(spec)
        batch = next(t.batches)
        return [t.step(*batch).item() for _ in range(4)], {m["metric"]: m["value"] for m in t.compile_metrics()}

    fresh, compiled_ = losses()
    loaded, cached = losses()
    assert compiled_["compile_cache_misses"] >= 1 and cached["compile_cache_hits"] >= 1
    assert cached["compile_cache_misses"] == 0
    assert all(math.isfinite(v) for v in fresh) and loaded == fresh


@pytest.mark.slow
def test_the_warm_up_lasts_until_torch_compile_stops_building_graphs(compile_config, tmp_path):
    """compile_optimizer compiles the SGD update on the first step and again on the second (the
    momentum now exists). The cpu preset warms up one step, so the first measured step would time
    the second compile; the warm-up goes on until a step builds no graph."""
    spec = spec_of(compile_config, "lstm", "baseline")
    spec = {**spec, "knobs": {**spec["knobs"], "compile_optimizer": True}}
    assert spec["warmup_steps"] == 1
    record = run_cell(spec, out_dir=tmp_path)
    assert record["status"] == "ok", record.get("reason")
    assert 3 <= len(record["warmup_steps"]) <= harness.warmup_limit(spec)


@pytest.mark.slow
def test_a_compile_stage_stopped_by_a_signal_records_no_failure(compile_config, tmp_path):
    """A time limit's SIGINT to the stage and its children (one process group, as `timeout` and
    snakemake send it) mid-compile: the stage exits with an error and writes no record, so its
    folders are not taken for compile faults and are built again."""
    spec = spec_of(compile_config, "vit_b_16", "compile")
    spec["params"].update(image_size=32, batch_size=2)
    bf16 = {**spec, "knobs": {**spec["knobs"], "precision": "amp-bf16"}}
    jobs = [[s, str(tmp_path / f"{compiled.cache_key(s)}.json")] for s in (spec, bf16)]
    jobs.append([spec, str(tmp_path / "queued.json")])  # waits for a free slot: never starts
    env = {**os.environ, compiled.CACHE_ENV: str(tmp_path / "inductor")}
    proc = subprocess.Popen([sys.executable, "-m", "trainperf.cli", "compile", "--jobs", json.dumps(jobs),
                             "--parallel", "2"], env=env, start_new_session=True)
    logs = [Path(out).with_suffix(".log") for _, out in jobs[:2]]
    folders = [tmp_path / "inductor" / compiled.cache_key(s) for s in (spec, bf16)]
    deadline = time.monotonic() + 600
    # the event: inductor has written into each child's cache folder (its first generated C++, seconds
    # into the child), so both are mid-compile; their logs are no sign (they may hold nothing till the end)
    while not all(f.is_dir() and any(p.is_file() for p in f.rglob("*")) for f in folders):
        assert proc.poll() is None, f"the stage ended (status {proc.returncode}) before its children compiled"
        assert time.monotonic() < deadline, "the stage's children never started compiling"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) != 0
    assert all(p.exists() for p in logs) and not list(tmp_path.glob("*.json"))
    assert not Path(jobs[2][1]).with_suffix(".log").exists()  # the queued folder was never started
