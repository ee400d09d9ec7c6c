"""The harness's front door: run one cell and return its record (keys, spec, environment, status,
metric rows), or fill a compiled cell's cache; one line for why a cell failed.

A run is one process: trainer.py applies the cell's knobs, protocol.py warms up (compile is
reported apart) and times the measured steps; per step, wall time, input wait, GPU time and loss.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

from workloads import compiled, env
from workloads.observer import Observer
from workloads.protocol import Budget, Measured, host_peak_gib, train, warm_up
from workloads.trainer import NonFiniteLoss, Trainer, drain, keep_eager, prefetch_depth, warmup_limit, workload_of

__all__ = ["run", "compile_only", "summarize", "failure_reason", "SWEEP_ENV",  # and, re-exported for callers and tests:
           "Budget", "NonFiniteLoss", "Trainer", "drain", "keep_eager", "prefetch_depth", "warm_up",
           "warmup_limit", "workload_of"]

LOG_TAIL = 8  # lines of a failed cell's log kept in its record
SWEEP_ENV = "TRAINPERF_SWEEP"  # the run of the sweep that runs this cell, where one does


def run(spec: dict, observe: type[Observer] = Observer, log=None, out_dir: str | Path | None = None) -> dict:
    """Run one cell under an observer; never raises for a failure of the cell itself: it is
    recorded. A profiler writes its raw output (a trace) into out_dir, beside the record."""
    tag = f"[{spec['workload']}/{spec['variant']}/{spec['profiler']} rep{spec['rep']}]"
    log = log or (lambda msg: print(f"{tag} {msg}", file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    record = {"keys": {k: spec[k] for k in ("workload", "variant", "profiler", "rep")},
              "spec": spec, "env": env.fingerprint(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "pid": os.getpid(), "sweep": os.environ.get(SWEEP_ENV)}
    try:
        out = Path(out_dir) if out_dir else Path.cwd() / "runs" / "adhoc" / spec["workload"] / spec["variant"]
        record.update(status="ok", reason=None, **measured_record(train(spec, observe, log, out), spec))
    except Exception as e:  # the cell failed; the matrix goes on
        traceback.print_exc()
        record.update(status="failed", reason=failure_reason(e, spec),
                      log_tail=traceback.format_exc().strip().splitlines()[-LOG_TAIL:])
    record["duration_s"] = time.perf_counter() - t0  # what the cell cost the matrix, failed or not
    log(f"{record['status']}" + (f": {record['reason']}" if record["reason"] else ""))
    return record


def measured_record(m: Measured, spec: dict) -> dict:
    """A measured cell's part of its record: metric rows, steps, and with DDP each rank's view."""
    t = m.trainer
    record = summarize(t.workload, spec, m.steps, m.warm, m.elapsed, m.warmup_s, m.observer, t.device, m.bs)
    record["metrics"] += [{"metric": "setup_time", "value": m.setup_s, "unit": "s"}, *t.compile_metrics()]
    if t.compile_cache:
        record["compile_cache"] = t.compile_cache  # the cache folder of this cell's traced knobs
    return {**record, "ranks": t.ranks()} if t.shard.world > 1 else record


def summarize(workload, spec, steps, warm, elapsed, warmup_s, observer, device, bs) -> dict:
    """The record of a measured cell; `bs`: samples per step (over all ranks)."""
    n = len(steps)
    wall = [s["wall_s"] for s in steps]
    input_s = sum(s["input_s"] for s in steps)
    last = [s["loss"] for s in steps[-max(1, n // 4):] if s["loss"] is not None]
    metrics = [
        ("throughput", n * bs / elapsed, f"{workload.unit}/s"),
        ("step_time", statistics.median(wall) * 1e3, "ms"),
        ("step_time_p90", float(np.percentile(wall, 90)) * 1e3, "ms"),
        ("input_wait", input_s / n * 1e3, "ms/step"),
        ("input_wait_share", 100 * input_s / elapsed, "%"),
        ("warmup_time", warmup_s, "s"),
        ("first_step_time", warm[0]["wall_s"], "s"),
    ] + ([("final_loss", statistics.mean(last), "nats")] if last else [])
    if all("loader_s" in s for s in steps):  # input = the loader's wait + the copy to the device
        loader_s = sum(s["loader_s"] for s in steps)
        metrics += [("loader_wait_share", 100 * loader_s / elapsed, "%"),
                    ("copy_wait_share", 100 * (input_s - loader_s) / elapsed, "%")]
    if workload.units_per_sample() > 1:
        metrics.append(("token_throughput", n * bs * workload.units_per_sample() / elapsed, "tokens/s"))
    if device.type == "cuda":
        metrics.append(("peak_memory", torch.cuda.max_memory_allocated(device) / 2**30, "GiB"))
        gpu = [s["gpu_s"] for s in steps if "gpu_s" in s]
        if gpu:
            metrics.append(("gpu_step_time", statistics.median(gpu) * 1e3, "ms"))
    else:
        metrics.append(("peak_host_memory", host_peak_gib(), "GiB"))
    rows = [{"metric": m, "value": float(v), "unit": u} for m, v, u in metrics] + observer.metrics()
    tables = {observer.name: observer.tables()} if observer.tables() else {}
    return {"metrics": rows, "steps": steps, "warmup_steps": warm, "params": workload.params, **tables}


def compile_only(spec: dict) -> dict:
    """Fill a compiled cell's torch.compile cache and time nothing: warm it up until no step builds a
    graph. Cells run this several at once (trainperf/precompile.py), sharing the GPU, so inductor's
    Triton autotuning is not kept: each cell autotunes in its own first step, on a GPU it has alone."""
    import torch._inductor.config
    torch._inductor.config.autotune_local_cache = False
    t0 = time.time()
    record = {"key": compiled.cache_key(spec), "cell": {k: spec[k] for k in ("workload", "variant", "profiler", "rep")},
              "env": env.fingerprint(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "start_ts": t0}
    try:
        t = Trainer(spec)
        warm = warm_up(t, spec, bounded=False)
        t.check_compiled()
        t.synchronize()
        loaded, built = compiled.cache_counts()
        record.update(status="ok", reason=None, steps=len(warm), first_step_s=warm[0]["wall_s"],
                      graphs_compiled=built, graphs_loaded=loaded)
    except Exception as e:  # recorded: the cells of this key then compile in their own first step
        traceback.print_exc()
        record.update(status="failed", reason=failure_reason(e, spec))
    record["seconds"] = time.time() - t0
    return record


def compile_note(spec: dict) -> str:
    """Where a compiled cell's graphs came from: its own compile, or inductor's cache (a failure
    that follows one and not the other is the cache's, not the knobs')."""
    if not spec["knobs"].get("compile"):
        return ""
    hits, misses = compiled.cache_counts()
    return f" [torch.compile: {hits} graphs from the cache, {misses} compiled]"


def failure_reason(e: Exception, spec: dict) -> str:
    """One line saying why a cell failed: out of memory (GPU or host) with the batch size, a
    non-finite loss, or the error's own last line (a DataLoader worker's error is wrapped:
    its last line is the original one)."""
    text = str(e)
    if isinstance(e, torch.cuda.OutOfMemoryError) or "can't allocate memory" in text:
        return f"out of memory (batch_size={spec['params']['batch_size']})"
    if isinstance(e, NonFiniteLoss):
        return f"non-finite loss: {e}{compile_note(spec)}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines and "DataLoader worker" in lines[0] else (lines[0] if lines else "")
    return f"{type(e).__name__}: {last}"[:300]
