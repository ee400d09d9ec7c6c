"""The 'torch' observer: torch.profiler over the measured steps (a wait/warm-up/active schedule),
the Kineto trace kept beside the run record, its metrics parsed by profiles.kineto; and, on a GPU,
the device time per call of the operators the articles time, from the profiler's own table."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import torch

from profiles import kineto
from workloads.observer import Observer


# metric -> operator: its device time per call (ms) as torch.profiler's table counts it (the kernels
# launched inside the call, children and autocast's casts included)
OPS = {"conv2d_device_time": "aten::conv2d", "linear_device_time": "aten::linear"}


def op_times(averages, attr: str = "device_time_total") -> list[dict]:
    """Per operator of OPS that ran and took time: `attr` (microseconds) per call, in ms."""
    found = {e.key: e for e in averages}
    return [{"metric": m, "value": getattr(e, attr) / e.count / 1e3, "unit": "ms"}
            for m, op in OPS.items() if (e := found.get(op)) and e.count and getattr(e, attr) > 0]


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
        return kineto.metrics(self.trace) + op_times(self.profiler.key_averages())  # a CPU run: no device time, none

    def tables(self) -> dict:
        return {"kernels": kineto.top_kernels(kineto.load(self.trace))}
