"""The 'timing' observer: no profiler, only GPU utilization sampled through NVML while the
measured steps run (the unprofiled reference every other profiler is compared with)."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path


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


class Timing:
    """Observer interface: `window()` wraps the measured steps, `step()` marks each step's end,
    `phase(name)` marks a part of a step (input, forward, backward, optimizer, sync), `metrics()` reads
    what was observed. Timing marks nothing: it is the unprofiled reference."""
    name = "timing"
    wraps_process = False
    trains = True  # False: the input pipeline alone (profiles/input_only.py)
    one_batch = False  # True: one batch fed again every step, the step alone (profiles/step_only.py)
    time_bounded = True  # a slow cell may stop measuring early (see harness.Budget)

    @classmethod
    def unavailable(cls, config: dict, cuda: bool) -> str | None:
        return None

    def __init__(self, spec: dict, cuda: bool, out_dir: Path):
        self.sampler = UtilizationSampler() if cuda else None

    def phase(self, name: str):
        return nullcontext()

    @contextmanager
    def window(self):
        if self.sampler is None:
            yield
            return
        with self.sampler.running():
            yield

    def step(self) -> None:
        pass

    def metrics(self) -> list[dict]:
        util = self.sampler.mean() if self.sampler else None
        return [] if util is None else [{"metric": "gpu_util", "value": util, "unit": "%"}]

