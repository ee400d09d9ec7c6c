"""The measurement protocol: set a cell up, warm it up until torch.compile stops building graphs,
drain the batches queued meanwhile, then time the measured steps within a budget."""
from __future__ import annotations

import resource
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from workloads import compiled, env
from workloads.observer import Observer
from workloads.trainer import Trainer, warmup_limit


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
    passed, so a slow, input-bound cell measures seconds, not minutes. None: no time limit."""

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
    have passed; never ending on a step in which torch.compile built or loaded a graph or GradScaler
    skipped the update (its compiles are still to come), up to warmup_limit steps."""
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


def measure(t: Trainer, observer: Observer, spec: dict, first: int, bounded: bool, cuda: bool, log,
            bs: int) -> tuple[list[dict], list, float]:
    """The measured steps, in the observer's window: (their timings, a CUDA event at each step's
    end, the window's seconds)."""
    steps, events, measured = [], [], spec["measured_steps"]
    with observer.window():
        budget = Budget(measured, spec.get("max_measure_s") if observer.time_bounded and bounded else None, 3)
        t0 = budget.t0
        for k in range(measured):
            last = budget.last(k)
            with observer.phase("step"):
                steps.append(t.timed_step(first + k, last))
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
    return steps, events, elapsed


@dataclass
class Measured:
    """A cell's run, before the harness summarizes it into a record."""
    trainer: Trainer
    observer: Observer
    steps: list[dict]
    warm: list[dict]
    elapsed: float
    warmup_s: float
    setup_s: float
    bs: int  # samples per step over all ranks


def train(spec: dict, observe: type[Observer], log, out_dir: Path) -> Measured:
    cuda = env.has_cuda()
    env.quiet_kineto(cuda)  # no GPU: torch.profiler's trace asks CUDA for one and logs an error
    observer = observe(spec, cuda, out_dir)
    host_peak_reset()
    t_setup = time.perf_counter()
    t = Trainer(spec, mark=observer.phase, trains=observer.trains, one_batch=observer.one_batch)
    setup_s = time.perf_counter() - t_setup  # model, optimizer, loader (workers, a DALI pipeline)
    bs = t.workload.params["batch_size"] * t.shard.world
    bounded = t.shard.world == 1  # the ranks of a DDP cell must all take the same steps
    t_start = time.perf_counter()
    warm = warm_up(t, spec, bounded)
    t.check_compiled()
    t.synchronize()
    warmup_s = time.perf_counter() - t_start
    drained = t.drain()
    log(f"warm-up: {len(warm)} steps in {warmup_s:.1f} s (first step {warm[0]['wall_s']:.2f} s); "
        f"{drained} queued batches drained")
    steps, events, elapsed = measure(t, observer, spec, len(warm), bounded, cuda, log, bs)
    for s in steps + warm:
        s["loss"] = t.losses.get(s["step"])
    for s, a, b in zip(steps[1:], events, events[1:]):
        s["gpu_s"] = a.elapsed_time(b) / 1e3
    return Measured(t, observer, steps, warm, elapsed, warmup_s, setup_s, bs)
