"""The one training harness: applies a variant's knobs, trains, measures, returns a record.

A run is one process: build the workload, warm up (compile happens there and is reported
apart), then time the measured steps. Per step it records wall time, the time blocked on
input, the GPU time between step ends (CUDA events, no extra sync) and the loss.
"""
from __future__ import annotations

import itertools
import math
import os
import resource
import statistics
import sys
import time
import traceback
from contextlib import ExitStack, nullcontext
from pathlib import Path

import numpy as np
import torch
import torch._dynamo
from torch import nn

import workloads
from profiles import env
from profiles import OBSERVERS
from workloads import compiled, ddp, loaders
from workloads.data import check_dataset

AUTOCAST = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}
SDPA = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION", "math": "MATH"}


def attention_kernels(backend: str):
    """The sdpa_backend knob: scaled_dot_product_attention restricted to one kernel family, or
    PyTorch's own choice ("auto")."""
    if backend == "auto":
        return nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel(getattr(SDPBackend, SDPA[backend]))


LOG_TAIL = 8  # lines of a failed cell's log kept in its record


class NonFiniteLoss(RuntimeError):
    pass


def set_backends(knobs: dict) -> None:
    """Global switches: TF32 for matmul and convolutions, cuDNN autotuning."""
    tf32 = knobs["precision"] == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = knobs["cudnn_benchmark"]


def input_batches(workload, spec: dict, device: torch.device, shard: ddp.Shard = ddp.Shard()):
    """The variant's input pipeline: (its loader, an iterator of (x, y) batches on `device`),
    reading this rank's shard of the data."""
    knobs, p = spec["knobs"], workload.params
    steps = warmup_limit(spec) + spec["measured_steps"] + prefetch_depth(knobs) + 1
    prepare = (lambda x: x.contiguous(memory_format=torch.channels_last)) if knobs["channels_last"] else (lambda x: x)
    if knobs["loader"] == "dali":
        source = batches = loaders.dali_loader(spec["data"], p["batch_size"], p["image_size"], knobs, device,
                                               spec["seed"], shard)
        if device.type == "cuda":
            return source, batches
    else:
        if workload.data == "images":
            from torchvision import datasets
            dataset = datasets.ImageFolder(spec["data"], transform=loaders.image_transform(p["image_size"]),
                                           loader=loaders.load_rgb)
        else:
            dataset = loaders.TokenWindows(spec["data"], p["seq_len"])
        source = loaders.torch_loader(dataset, p["batch_size"], steps, knobs, spec["seed"], shard)
        batches = iter(source)
    if device.type == "cuda" and knobs["copy"] == "async":
        return source, loaders.SideStreamCopy(batches, device, prepare)
    return source, loaders.blocking_copy(batches, device, prepare)


WARMUP_CAP = 4  # a warm-up that keeps compiling stops at this many times warmup_steps


def warmup_limit(spec: dict) -> int:
    return WARMUP_CAP * spec["warmup_steps"]


def prefetch_depth(knobs: dict) -> int:
    """Batches the input pipeline holds ready ahead of the training loop."""
    if knobs["loader"] == "dali":
        return loaders.DALI_QUEUE_DEPTH
    return knobs["num_workers"] * knobs["prefetch_factor"] if knobs["num_workers"] else 0


def data_params(workload_cls, path: str) -> dict:
    """Sizes that come from the dataset: the number of classes, or the vocabulary."""
    check_dataset(path, workload_cls.data)
    if workload_cls.data == "images":
        return {"num_classes": sum(1 for d in Path(path).iterdir() if d.is_dir())}
    return {"vocab": int(np.load(path, mmap_mode="r").max()) + 1}


def workload_of(spec: dict):
    """The cell's workload object, with the sizes its dataset sets (classes, vocabulary)."""
    cls = workloads.get(spec["workload"])
    workload = cls({**spec["params"], **data_params(cls, spec["data"])})
    if cls.data == "tokens":  # the model must cover every token id the data holds
        workload.params["vocab"] = max(spec["params"].get("vocab", 0), workload.params["vocab"])
    return workload


def keep_eager(model: nn.Module, kind: type[nn.Module]) -> int:
    """Leave every `kind` layer out of torch.compile's graphs (a graph break around each: it runs,
    forward and backward, with ATen's kernels); returns how many."""
    layers = [m for m in model.modules() if isinstance(m, kind)]
    for m in layers:
        m.forward = torch.compiler.disable(m.forward)
    return len(layers)


def build(spec: dict, device: torch.device):
    workload = workload_of(spec)
    torch.manual_seed(spec["seed"])
    model = workload.build_model().to(device)
    if spec["knobs"]["channels_last"]:
        model = model.to(memory_format=torch.channels_last)
    return workload, model


READY_S = 0.1  # a batch already queued arrives within this; one that takes longer was not ready


def drain(batches, depth: int, ready_s: float = READY_S) -> int:
    """Take the batches an input pipeline queued ahead during warm-up (a long compile fills its
    queue), so that the measured steps see the loader's steady state, not a full buffer. At most
    `depth` (the queue's size); the first batch that was not ready shows the queue empty and ends
    it (a short warm-up leaves little queued: waiting for a whole queue's worth of fresh batches
    would cost seconds per cell). Returns the batches taken."""
    for k in range(depth):
        t0 = time.perf_counter()
        next(batches)
        if time.perf_counter() - t0 > ready_s:
            return k + 1
    return depth


class Trainer:
    """One cell's model, optimizer and input pipeline, with the variant's knobs applied."""

    def __init__(self, spec: dict, device: torch.device | None = None, mark=None, trains: bool = True,
                 one_batch: bool = False):
        self.spec, self.knobs, self.trains = spec, spec["knobs"], trains  # trains=False: the loader alone
        self.one_batch = one_batch
        self.mark = mark or (lambda name: nullcontext())  # marks a step's phases for a profiler
        self.shard, rank_device = ddp.init(self.knobs.get("ddp", 0), env.has_cuda())
        self.device = device or rank_device or torch.device("cuda" if env.has_cuda() else "cpu")
        set_backends(self.knobs)
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self.workload, self.model = build(spec, self.device)
        lr = self.workload.params.get("lr", 0.01)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9,
                                         fused=self.knobs.get("fused_optimizer") or None)
        if self.knobs.get("compile_optimizer"):  # GradScaler calls it as before: the update, compiled
            self.optimizer.step = torch.compile(self.optimizer.step)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.knobs["precision"] == "amp-fp16")
        self.dtype = AUTOCAST.get(self.knobs["precision"])
        mode = self.knobs["compile"]
        self.compile_cache = None
        if mode:
            torch._dynamo.reset()
            torch._dynamo.utils.counters.clear()
            self.compile_cache = compiled.use_cache_for(spec)
        if mode and self.knobs.get("eager_pooling"):
            keep_eager(self.model, nn.MaxPool2d)
        replica = ddp.wrap(self.model, self.device) if self.shard.world > 1 else self.model
        self.forward = torch.compile(replica, mode=mode) if mode else replica
        self.loader, self.batches = input_batches(self.workload, spec, self.device, self.shard)
        if one_batch:  # the step alone: one batch of the loader's, fed again every step
            self.batches = itertools.repeat(next(self.batches))
        self.pending: list[torch.Tensor] = []
        self.losses: dict[int, float] = {}

    def precision(self) -> ExitStack:
        """The forward's context: the variant's autocast and attention kernels."""
        stack = ExitStack()
        if self.dtype:
            stack.enter_context(torch.autocast(self.device.type, dtype=self.dtype))
        stack.enter_context(attention_kernels(self.knobs.get("sdpa_backend", "auto")))
        return stack

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """One optimization step under the variant's precision; returns the loss (on the device)."""
        with self.mark("forward"), self.precision():
            out = self.forward(x)
            if self.compile_cache:
                compiled.check_output_dtype(out, self.dtype)
            loss = self.workload.loss(out, y)
        with self.mark("backward"):
            self.optimizer.zero_grad(set_to_none=True)
            self.scaler.scale(loss).backward()
        with self.mark("optimizer"):
            self.scaler.step(self.optimizer)
            self.scaler.update()
        return loss.detach()

    def sync_losses(self, i: int) -> None:
        """Read the pending losses on the host (a GPU sync; with DDP, their mean over the ranks)
        and check they are finite."""
        local = torch.stack(self.pending).float()
        values = ddp.mean(local, self.shard).tolist()
        if self.shard.world > 1:
            self.last_local_loss = float(local[-1])
        first = i - len(values) + 1
        for k, v in enumerate(values):
            if not math.isfinite(v):
                before = [self.losses[j] for j in sorted(self.losses)[-4:]] + values[:k]
                trend = f" (losses before: {', '.join(f'{x:.3g}' for x in before[-4:])})" if before else ""
                raise NonFiniteLoss(f"loss is {v} at step {first + k}{trend}")
        self.losses.update(zip(range(first, i + 1), values))
        self.pending.clear()

    def timed_step(self, i: int, last: bool) -> dict:
        """Step i; the loss is read (a sync) every sync_every steps and at the last step."""
        t0 = time.perf_counter()
        with self.mark("input"):
            x, y = next(self.batches)
        t1 = time.perf_counter()
        if not self.trains:  # the loader alone: the batch has reached the device, nothing more
            self.synchronize()
        else:
            self.pending.append(self.step(x, y))
            if (i + 1) % self.knobs["sync_every"] == 0 or last:
                with self.mark("sync"):
                    self.sync_losses(i)
        return {"step": i, "input_s": t1 - t0, "wall_s": time.perf_counter() - t0}

    def drain(self) -> int:
        return 0 if self.one_batch else drain(self.batches, prefetch_depth(self.knobs))

    def check_compiled(self) -> None:
        """A compile variant whose model ran eager (dynamo captured nothing) must not pass as one."""
        if self.knobs["compile"] and self.trains and not torch._dynamo.utils.counters["stats"]["unique_graphs"]:
            raise RuntimeError("torch.compile captured no graph: the model ran eager")

    def compile_metrics(self) -> list[dict]:
        """What torch.compile made of the model: graphs captured; the compiled graphs inductor
        loaded from its cache and those it compiled (the first step's cost hangs on them); for the
        modes that capture CUDA graphs, the graphs that fell back to plain launches (cudagraph_skips)."""
        if not self.knobs["compile"] or not self.trains:
            return []
        counters = torch._dynamo.utils.counters
        hits, misses = compiled.cache_counts()
        rows = [("compiled_graphs", counters["stats"]["unique_graphs"], "graphs"),
                ("compile_cache_hits", hits, "graphs"), ("compile_cache_misses", misses, "graphs")]
        if self.knobs["compile"] in ("reduce-overhead", "max-autotune"):
            rows.append(("cudagraph_skips", counters["inductor"]["cudagraph_skips"], "graphs"))
        return [{"metric": m, "value": float(v), "unit": u} for m, v, u in rows]

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def ranks(self) -> list[dict]:
        """Each rank's view at the end: its own last loss (its shard of the data) and a checksum
        of its weights (DDP keeps the replicas identical)."""
        with torch.no_grad():
            weights = sum(float(p.double().sum()) for p in self.model.parameters())
        mine = {"rank": self.shard.rank, "pid": os.getpid(), "device": str(self.device),
                "last_local_loss": getattr(self, "last_local_loss", None), "weight_sum": weights}
        return ddp.gather(mine, self.shard)


def host_peak_reset() -> None:
    """Restart the kernel's peak-RSS count for this process (several cells share a process)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def host_peak_gib() -> float:
    """Peak resident memory of this process since host_peak_reset(), in GiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


class Budget:
    """How many steps a phase runs: `steps`, or fewer (at least `floor`) once `seconds` have
    passed. A slow, input-bound cell thus measures a few seconds instead of minutes; a fast
    cell runs all its steps. A profiler that traces a fixed schedule takes no time limit."""

    def __init__(self, steps: int, seconds: float | None, floor: int):
        self.steps, self.seconds, self.floor = steps, seconds, min(floor, steps)
        self.t0 = time.perf_counter()

    def last(self, k: int) -> bool:
        """Is step k (0-based) the last one?"""
        if k + 1 >= self.steps:
            return True
        late = self.seconds is not None and time.perf_counter() - self.t0 >= self.seconds
        return late and k + 1 >= self.floor


def warm_up(t: Trainer, spec: dict, bounded: bool) -> list[dict]:
    """Steps until the cell runs steadily: `warmup_steps`, or fewer (at least 2) once `max_warmup_s`
    have passed; but never ending on a step in which torch.compile built or loaded a graph (a
    compiled optimizer compiles on its first update and again on the next, once the momentum
    exists) or in which GradScaler skipped the update (the update, and its compiles, are still to
    come), up to warmup_limit steps."""
    budget = Budget(spec["warmup_steps"], spec.get("max_warmup_s") if bounded else None, 2)
    warm, built = [], compiled.graphs_built()
    while True:
        last = budget.last(len(warm))
        scale = t.scaler.get_scale() if last and t.scaler.is_enabled() else None  # a host read: last steps only
        warm.append(t.timed_step(len(warm), last))
        before, built = built, compiled.graphs_built()
        skipped = scale is not None and t.scaler.get_scale() < scale  # GradScaler lowers its scale on a skip
        if last and ((built == before and not skipped) or len(warm) >= warmup_limit(spec)):
            return warm


def train(spec: dict, log, out_dir: Path) -> dict:
    cuda = env.has_cuda()
    env.quiet_kineto(cuda)  # no GPU: torch.profiler's trace asks CUDA for one and logs an error
    observer = OBSERVERS[spec["profiler"]](spec, cuda, out_dir)
    host_peak_reset()
    t_setup = time.perf_counter()
    t = Trainer(spec, mark=observer.phase, trains=observer.trains, one_batch=observer.one_batch)
    setup_s = time.perf_counter() - t_setup  # model, optimizer, loader (workers, a DALI pipeline)
    bs = t.workload.params["batch_size"] * t.shard.world  # samples per step over all ranks
    bounded = t.shard.world == 1  # the ranks of a DDP cell must all take the same steps
    t_start = time.perf_counter()
    warm = warm_up(t, spec, bounded)
    i = len(warm)
    t.check_compiled()
    t.synchronize()
    warmup_s = time.perf_counter() - t_start
    drained = t.drain()
    log(f"warm-up: {len(warm)} steps in {warmup_s:.1f} s (first step {warm[0]['wall_s']:.2f} s); "
        f"{drained} queued batches drained")
    steps, events, measured = [], [], spec["measured_steps"]
    with observer.window():
        budget = Budget(measured, spec.get("max_measure_s") if observer.time_bounded and bounded else None, 3)
        t0 = budget.t0
        for k in range(measured):
            last = budget.last(k)
            with observer.phase("step"):
                steps.append(t.timed_step(i + k, last))
            if cuda:
                events.append(torch.cuda.Event(enable_timing=True))
                events[-1].record()
            observer.step()
            if (k + 1) % max(1, measured // 5) == 0 or last:
                log(f"step {k + 1}/{measured}: {(k + 1) * bs / (time.perf_counter() - t0):.1f} {t.workload.unit}/s")
            if last:
                break
        t.synchronize()
        elapsed = time.perf_counter() - t0
    for s in steps + warm:
        s["loss"] = t.losses.get(s["step"])
    for s, a, b in zip(steps[1:], events, events[1:]):
        s["gpu_s"] = a.elapsed_time(b) / 1e3
    record = summarize(t.workload, spec, steps, warm, elapsed, warmup_s, observer, t.device, bs)
    record["metrics"] += [{"metric": "setup_time", "value": setup_s, "unit": "s"}, *t.compile_metrics()]
    if t.compile_cache:
        record["compile_cache"] = t.compile_cache  # the cache folder of this cell's traced knobs
    return {**record, "ranks": t.ranks()} if t.shard.world > 1 else record


def compile_only(spec: dict) -> dict:
    """Fill a compiled cell's torch.compile cache (the folder of its traced knobs) and time nothing:
    build the cell, warm it up until no step builds a graph. Several run at once before the matrix
    (workloads/precompile.py), so the GPU is shared: inductor's Triton autotuning is not kept, and
    each cell that loads the graphs autotunes them in its own first step, on a GPU it has alone."""
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
    tables = {observer.name: observer.tables()} if hasattr(observer, "tables") else {}
    return {"metrics": rows, "steps": steps, "warmup_steps": warm, "params": workload.params, **tables}


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


def run(spec: dict, log=None, out_dir: str | Path | None = None) -> dict:
    """Run one cell; never raises for a failure of the cell itself: it is recorded. A profiler
    writes its raw output (a trace) into out_dir, beside the record."""
    tag = f"[{spec['workload']}/{spec['variant']}/{spec['profiler']} rep{spec['rep']}]"
    log = log or (lambda msg: print(f"{tag} {msg}", file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    record = {"keys": {k: spec[k] for k in ("workload", "variant", "profiler", "rep")},
              "spec": spec, "env": env.fingerprint(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "pid": os.getpid()}
    try:
        out = Path(out_dir) if out_dir else Path.cwd() / "runs" / "adhoc" / spec["workload"] / spec["variant"]
        record.update(status="ok", reason=None, **train(spec, log, out))
    except Exception as e:  # the cell failed; the matrix goes on
        traceback.print_exc()
        record.update(status="failed", reason=failure_reason(e, spec),
                      log_tail=traceback.format_exc().strip().splitlines()[-LOG_TAIL:])
    record["duration_s"] = time.perf_counter() - t0  # what the cell cost the matrix, failed or not
    log(f"{record['status']}" + (f": {record['reason']}" if record["reason"] else ""))
    return record
