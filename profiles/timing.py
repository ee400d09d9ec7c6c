"""The 'timing' observer: no profiler, only GPU utilization sampled through NVML while the
measured steps run (the unprofiled reference every other profiler is compared with)."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path

from workloads.observer import Observer


class UtilizationSampler:
    """Samples NVML's GPU utilization (share of time a kernel was running) every `period` s."""

    def __init__(self, device_index: int = 0, period: float = 0.05):
        self.device_index, self.period = device_index, period
        self.samples: list[float] = []
        self._stop = threading.Event()

    def _loop(self, handle, pynvml):
        while not self._stop.is_set():
            self.samples.append(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            time.sleep(self.period)

    @contextmanager
    def running(self):
        try:
            import pynvml
            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(self.device_index)
        except Exception:  # no NVIDIA driver: no samples, the metric is absent
            yield self
            return
        thread = threading.Thread(target=self._loop, args=(handle, pynvml), daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()
            pynvml.nvmlShutdown()

    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None


class Timing(Observer):
    """The unprofiled reference: marks nothing, samples NVML's GPU utilization."""
    name = "timing"

    def __init__(self, spec: dict, cuda: bool, out_dir: Path):
        super().__init__(spec, cuda, out_dir)
        self.sampler = UtilizationSampler() if cuda else None

    @contextmanager
    def window(self):
        if self.sampler is None:
            yield
            return
        with self.sampler.running():
            yield

    def metrics(self) -> list[dict]:
        util = self.sampler.mean() if self.sampler else None
        return [] if util is None else [{"metric": "gpu_util", "value": util, "unit": "%"}]

