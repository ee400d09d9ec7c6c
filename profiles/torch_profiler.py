"""The 'torch' observer: torch.profiler over the measured steps (a wait/warm-up/active schedule),
the Kineto trace kept beside the run record, its metrics parsed by profiles.kineto."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import torch

from profiles import kineto
from workloads.observer import Observer


class TorchProfiler(Observer):
    name = "torch"
    time_bounded = False  # the schedule traces every measured step
    WAIT, WARMUP = 1, 1  # profiler schedule: steps skipped, then traced but dropped, then recorded

    def __init__(self, spec: dict, cuda: bool, out_dir: Path):
        super().__init__(spec, cuda, out_dir)
        self.trace = Path(out_dir) / "trace.json.gz"
        active = spec["measured_steps"] - self.WAIT - self.WARMUP
        if active < 1:
            raise ValueError(f"the torch profiler needs measured_steps >= {self.WAIT + self.WARMUP + 1}")
        activities = [torch.profiler.ProfilerActivity.CPU]
        if cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.profiler = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(wait=self.WAIT, warmup=self.WARMUP, active=active, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(str(self.trace)))

    def phase(self, name: str):
        return torch.profiler.record_function(name)

    @contextmanager
    def window(self):
        self.trace.parent.mkdir(parents=True, exist_ok=True)
        with self.profiler:
            yield

    def step(self) -> None:
        self.profiler.step()

    def metrics(self) -> list[dict]:
        return kineto.metrics(self.trace)

    def tables(self) -> dict:
        return {"kernels": kineto.top_kernels(kineto.load(self.trace))}
