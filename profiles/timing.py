"""The 'timing' observer: no profiler; over the measured steps, NVML's GPU utilization, energy,
power, clocks, temperature and throttling (profiles/energy.py), or the host's RAPL energy on a
CPU: the unprofiled reference every other profiler is compared with."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from profiles.energy import GpuSampler, RaplMeter
from workloads.observer import Observer


class Timing(Observer):
    """The unprofiled reference: marks nothing, meters the GPU (or the host) over the window."""
    name = "timing"

    def __init__(self, spec: dict, cuda: bool, out_dir: Path):
        super().__init__(spec, cuda, out_dir)
        self.meter = GpuSampler() if cuda else RaplMeter()

    @contextmanager
    def window(self):
        with self.meter.running():
            yield

    def metrics(self) -> list[dict]:
        return self.meter.metrics()

    def tables(self) -> dict:
        """Why a run has no energy figure, where it has none."""
        return {} if any(m["metric"] == "energy" for m in self.metrics()) else \
            {"energy": {"measurable": False, "why": self.meter.why or "no samples in the window"}}


class Bare(Observer):
    """No meter at all: timing's cell without NVML's sampler, the reference for what metering costs."""
    name = "bare"
