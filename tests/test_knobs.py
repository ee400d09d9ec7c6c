"""Each knob really changes what runs: memory format, autocast dtype, loader, copy, sync policy."""
import math

import pytest
import torch

import workloads
from tests.conftest import cuda, spec_of
from workloads import harness, trainer
from trainperf.sweep import run_cell


def _with(cfg, workload, variant, **knobs):
    spec = spec_of(cfg, workload, variant)
    spec["knobs"].update(knobs)
    return spec


def test_channels_last_reaches_model_and_input(cpu_config):
    t = harness.Trainer(spec_of(cpu_config, "resnet50", "channels-last"))
    assert t.model.conv1.weight.is_contiguous(memory_format=torch.channels_last)
    x, _ = next(t.batches)
    assert x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()


def test_baseline_is_nchw_fp32_single_process(cpu_config):
    t = harness.Trainer(spec_of(cpu_config, "resnet50", "baseline"))
    assert t.model.conv1.weight.is_contiguous()
    x, _ = next(t.batches)
    assert x.is_contiguous() and x.dtype == torch.float32
    assert t.dtype is None and not t.scaler.is_enabled()
    assert not torch.backends.cudnn.benchmark and not torch.backends.cuda.matmul.allow_tf32


@pytest.mark.parametrize("precision,dtype", [("amp-bf16", torch.bfloat16), ("amp-fp16", torch.float16),
                                             ("fp32", torch.float32)])
def test_autocast_dtype_reaches_the_convolutions(cpu_config, precision, dtype):
    spec = _with(cpu_config, "resnet50", "baseline", precision=precision)
    spec["params"].update(batch_size=2, image_size=32)  # a CPU's fp16 convolutions are slow: a small step
    t = harness.Trainer(spec)
    seen = []
    t.model.conv1.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    x, y = next(t.batches)
    loss = t.step(x, y)
    assert seen == [dtype] and loss.dtype == torch.float32
    assert t.scaler.is_enabled() == (precision == "amp-fp16")  # GradScaler only where fp16 underflows


def test_cpu_preset_skips_amp_with_its_reason(cpu_config):
    from trainperf import matrix
    cell = matrix.cell(cpu_config, "resnet50", "amp")
    assert cell["status"] == "skipped" and "precision is off in the cpu preset" in cell["reason"]


def test_the_lstms_cpu_amp_limit_is_fp16_and_holds(cpu_config):
    """The LSTM skips AMP fp16 on a CPU for what happens there (oneDNN cannot build its fp16 LSTM
    for training) and trains in bf16, which its reason must not skip."""
    lstm = workloads.get("lstm")
    assert "fp16" in lstm.knob_reason("precision", "amp-fp16", cuda=False)
    assert lstm.knob_reason("precision", "amp-bf16", cuda=False) is None
    t = harness.Trainer(_with(cpu_config, "lstm", "baseline", precision="amp-bf16"), torch.device("cpu"))
    x, y = next(t.batches)
    assert math.isfinite(t.step(x, y).item())
    t = harness.Trainer(_with(cpu_config, "lstm", "baseline", precision="amp-fp16"), torch.device("cpu"))
    x, y = next(t.batches)
    with pytest.raises(RuntimeError, match="could not create a primitive descriptor"):
        t.step(x, y)


def test_workers_variant_uses_worker_processes(cpu_config):
    t = harness.Trainer(spec_of(cpu_config, "lstm", "workers"))
    assert t.loader.num_workers == 2 and t.loader.persistent_workers and t.loader.prefetch_factor == 2
    x, y = next(t.batches)
    assert x.shape == y.shape == (t.workload.params["batch_size"], t.workload.params["seq_len"])
    assert torch.equal(x[:, 1:], y[:, :-1])  # targets are the inputs shifted by one token


def test_dali_cpu_pipeline_yields_normalized_batches(cpu_config):
    spec = spec_of(cpu_config, "resnet50", "dali")
    t = harness.Trainer(spec)
    x, y = next(t.batches)
    size, bs = spec["params"]["image_size"], spec["params"]["batch_size"]
    assert x.shape == (bs, 3, size, size) and x.dtype == torch.float32
    assert y.shape == (bs,) and y.dtype == torch.int64 and set(y.tolist()) <= {0, 1}
    assert -3 < x.mean() < 3 and 0.2 < x.std() < 3  # normalized, not raw 0..255 pixels


def test_dali_with_channels_last_hands_over_nhwc_without_a_copy(cpu_config):
    t = harness.Trainer(_with(cpu_config, "resnet50", "dali", channels_last=True))
    x, _ = next(t.batches)
    assert x.shape[1] == 3 and x.is_contiguous(memory_format=torch.channels_last)


def test_lazy_sync_reads_the_loss_every_n_steps(cpu_config):
    t = harness.Trainer(_with(cpu_config, "lstm", "lazy-sync", sync_every=2))
    for i in range(3):
        t.timed_step(i, last=False)
    assert sorted(t.losses) == [0, 1] and len(t.pending) == 1
    t.timed_step(3, last=True)  # the last step reads every pending loss
    assert sorted(t.losses) == [0, 1, 2, 3] and not t.pending


def test_non_finite_loss_fails_the_cell(cpu_config):
    spec = _with(cpu_config, "lstm", "baseline")
    spec["params"]["lr"] = 1e30  # poisons the weights: the second loss is inf or nan
    record = run_cell(spec)
    assert record["status"] == "failed" and "non-finite loss" in record["reason"]
    # the losses read before it tell a divergence from a sudden overflow
    before = record["reason"].split("losses before: ")[1].rstrip(")").split(", ")
    assert before and all(math.isfinite(float(x)) for x in before)
    assert "NonFiniteLoss" in record["log_tail"][-1]  # the log's last lines travel with the record


@cuda
def test_pinned_async_copies_on_a_side_stream(cpu_config):
    t = harness.Trainer(spec_of(cpu_config, "resnet50", "pinned-async"))
    x, y = next(t.batches)
    assert x.is_cuda and y.is_cuda and t.batches.stream != torch.cuda.current_stream()
    assert t.loader.pin_memory
    hx, _ = next(t.batches.batches)
    assert hx.is_pinned()


def test_drain_empties_the_queue_the_warmup_filled(cpu_config):
    t = harness.Trainer(spec_of(cpu_config, "lstm", "workers"))
    t.timed_step(0, last=5)
    assert t.drain() == 2 * 2  # 2 workers x prefetch_factor 2
    assert harness.prefetch_depth(t.knobs | {"num_workers": 0}) == 0


def test_drain_stops_at_the_first_batch_that_was_not_queued():
    import time

    def pipeline():  # three batches queued, then each takes a while to make
        yield from range(3)
        while True:
            time.sleep(0.3)
            yield -1
    batches = pipeline()
    assert harness.drain(batches, depth=8, ready_s=0.1) == 4  # the fourth had to be waited for
    assert next(batches) == -1  # and the queued ones are gone


def test_a_slow_phase_stops_after_its_time_but_not_before_its_floor():
    import time
    budget = harness.Budget(steps=30, seconds=0.05, floor=3)
    assert [budget.last(k) for k in range(2)] == [False, False]
    time.sleep(0.06)
    assert not budget.last(1) and budget.last(2)  # past the time: stops once the floor is reached
    assert harness.Budget(steps=30, seconds=None, floor=3).last(28) is False
    assert harness.Budget(steps=30, seconds=None, floor=3).last(29) is True


def test_fused_optimizer_steps_with_the_fused_sgd(cpu_config):
    t = harness.Trainer(_with(cpu_config, "lstm", "baseline", fused_optimizer=True))
    assert t.optimizer.defaults["fused"] is True
    before = [p.detach().clone() for p in t.model.parameters()]
    x, y = next(t.batches)
    t.step(x, y)
    assert any(not torch.equal(a, p) for a, p in zip(before, t.model.parameters()))


@pytest.mark.parametrize("variant", ["baseline", "dali"])
def test_the_input_observer_runs_the_loader_alone(cpu_config, variant):
    from trainperf import matrix
    spec = matrix.cell(cpu_config, "resnet50", variant, "input")["spec"]
    record = run_cell(spec)
    assert record["status"] == "ok", record["reason"]
    m = {r["metric"]: r["value"] for r in record["metrics"]}
    assert m["throughput"] > 0 and "final_loss" not in m
    assert m["input_wait_share"] > 90  # the loop does nothing but wait for input
    # the loader's wait and the copy's, apart (on a GPU, DALI's batches arrive there: no copy to time);
    # on a CPU the "copy" to the CPU is no copy, so the wait is the loader's
    assert m["loader_wait_share"] > 10 * m["copy_wait_share"] >= 0
    t = harness.Trainer(spec, trains=False)  # what the observer asks of the trainer
    w0 = [p.detach().clone() for p in t.model.parameters()]
    for i in range(2):
        t.timed_step(i, last=i == 1)
    assert all(torch.equal(a, b) for a, b in zip(w0, t.model.parameters())) and not t.losses
    assert t.optimizer.state_dict()["state"] == {}  # no optimizer step was taken


@pytest.mark.parametrize("variant", ["workers", "dali"])
def test_the_step_observer_trains_on_one_batch_of_the_loaders(cpu_config, variant):
    from trainperf import matrix
    spec = {**matrix.cell(cpu_config, "resnet50", variant, "step")["spec"]}
    record = run_cell(spec)
    assert record["status"] == "ok", record["reason"]
    m = {r["metric"]: r["value"] for r in record["metrics"]}
    assert m["throughput"] > 0 and math.isfinite(m["final_loss"])
    t = harness.Trainer(spec, one_batch=True)  # what the observer asks of the trainer
    batches = [next(t.batches) for _ in range(3)]
    assert all(x is batches[0][0] and y is batches[0][1] for x, y in batches)  # the same tensors again
    w0 = [p.detach().clone() for p in t.model.parameters()]
    for i in range(2):
        t.timed_step(i, last=i == 1)
    assert not all(torch.equal(a, b) for a, b in zip(w0, t.model.parameters())) and len(t.losses) == 2
    assert t.drain() == 0


@pytest.mark.parametrize("backend,kernel", [("flash", "aten::_scaled_dot_product_flash_attention_for_cpu"),
                                            ("math", "aten::_scaled_dot_product_attention_math")])
def test_sdpa_backend_picks_the_attention_kernel(cpu_config, backend, kernel):
    spec = _with(cpu_config, "vit_b_16", "baseline", sdpa_backend=backend)
    t = harness.Trainer(spec)
    x, y = next(t.batches)
    with torch.profiler.profile() as prof:
        t.step(x, y)
    ops = {e.name for e in prof.events()}
    assert kernel in ops and not {o for o in ops if "_scaled_dot_product" in o and "backward" not in o} - {kernel}


def test_the_warm_up_does_not_end_on_a_step_gradscaler_skipped(cpu_config):
    """AMP fp16 with a scale so large that the scaled fp16 gradients overflow: GradScaler skips the
    update and halves its scale until they fit. Those steps ran no update (nor any compile of it),
    so the warm-up, bounded to 2 steps here, goes on until one update has run."""
    spec = _with(cpu_config, "transformer_lm", "baseline", precision="amp-fp16")
    spec = {**spec, "warmup_steps": 2, "max_warmup_s": 0}
    t = harness.Trainer(spec)
    t.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**22)  # its fp16 gradients overflow at first
    warm = harness.warm_up(t, spec, bounded=True)
    skips = round(math.log2(2.0**22 / t.scaler.get_scale()))  # each skip halves the scale
    assert skips >= 2  # the 2-step bound alone would have ended the warm-up on skipped steps
    assert skips < len(warm) < harness.warmup_limit(spec)  # it ended on a step whose update ran


def test_a_dali_cell_where_dali_is_missing_is_planned_and_fails_where_it_runs_saying_why(cpu_config, monkeypatch, tmp_path):
    """Whether DALI is installed is decided where the cell runs (a cluster's login node may lack it,
    its GPU nodes not): the matrix plans the cell, and the run records the missing package."""
    import sys
    from trainperf import sweep
    spec = spec_of(cpu_config, "resnet50", "dali")  # planned here, with DALI or without
    monkeypatch.setitem(sys.modules, "nvidia.dali", None)  # an import of it now fails, as where it is missing
    result = sweep.run_cell(spec, tmp_path)
    assert result["status"] == "failed"
    assert "DALI is not installed where this cell ran (pip install -e '.[dali]')" in result["reason"]


def _overflow_step(fused) -> torch.optim.SGD:
    """One fp16-style step whose gradients overflowed, through a GradScaler, on a fresh SGD."""
    w = torch.nn.Parameter(torch.ones(4))
    optimizer = trainer.sgd([w], lr=0.1, fused=fused)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    (scaler.scale(w.sum()) * float("inf")).backward()
    scaler.step(optimizer)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 15  # the scaler saw the overflow and backs off
    return optimizer


def test_a_guarded_fused_sgd_leaves_an_overflow_step_to_the_scaler():
    """The scaler skips the whole update: no momentum is started from the overflowed gradient, the
    weights stay; the fused kernel left to itself starts one (torch 2.11), as the unfused SGD does not."""
    for fused, started in ((False, False), ("guarded", False), (True, True)):
        optimizer = _overflow_step(fused)
        (w,) = optimizer.param_groups[0]["params"]
        assert ("momentum_buffer" in optimizer.state[w]) is started, fused
        if not started:
            assert torch.equal(w.detach(), torch.ones(4)), fused


@pytest.mark.parametrize("knobs,why", [({"precision": "amp-fp16"}, "GradScaler"), ({"compile": "reduce-overhead"}, "graphs of its own"),
                                       ({"ddp": 2}, "DistributedDataParallel"), ({}, None)])
def test_the_whole_step_graph_says_which_knobs_it_cannot_hold(knobs, why):
    from workloads import graphed
    from workloads.knobs import defaults
    reason = graphed.unsupported({**defaults(), "precision": "amp-bf16", **knobs}, torch.device("cuda"))
    assert reason is None if why is None else why in reason
    assert "needs a CUDA GPU" in graphed.unsupported(defaults(), torch.device("cpu"))
