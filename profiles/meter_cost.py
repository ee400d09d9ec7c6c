"""The 'meter-cost' observer: what the energy meter costs the step alone, measured in one process.

The measured steps run in windows of WINDOW_STEPS; NVML's sampling process samples in every other
pair of windows, in the order off-on, on-off, off-on, ... (so a slow drift weighs on both sides
alike), and sleeps in the others. Each window ends on a synchronize, so its wall time holds its
steps' GPU work. Each pair of neighbouring windows gives one paired ratio, the throughput with
sampling over without (the analysis takes their median and interval): unlike a cell run twice,
with and without the meter, no other process start, host state or placement differs between them.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

import torch

from profiles.step_only import StepOnly

WINDOW_STEPS = 10
PAIRS = 12


def sampling(window: int) -> bool:
    """Does the sampling process sample in window `window` (0-based)? off, on, on, off, off, on, ..."""
    return window % 4 in (1, 2)


class MeterCost(StepOnly):
    name = "meter-cost"
    time_bounded = False  # every window runs its steps
    measured_steps = 2 * PAIRS * WINDOW_STEPS

    @classmethod
    def unavailable(cls, config: dict, cuda: bool) -> str | None:
        return None if cuda else "meter-cost switches NVML's sampling process on and off: it needs an NVIDIA GPU"

    def __init__(self, spec: dict, cuda: bool, out_dir):
        super().__init__(spec, cuda, out_dir)
        self.cuda, self.windows = cuda, []
        self.k, self.t = 0, 0.0

    def _start(self, window: int) -> None:
        """Switch the sampling for window `window`; a sampling process that no longer runs fails the
        cell (its windows would compare nothing)."""
        if not self.meter.switch(sampling(window)):
            raise RuntimeError("NVML's sampling process has ended: there is no sampling to switch on and off")
        self.t = time.perf_counter()

    @contextmanager
    def window(self):
        with super().window():
            self._start(0)
            yield

    def step(self) -> None:
        self.k += 1
        if self.k % WINDOW_STEPS:
            return
        if self.cuda:
            torch.cuda.synchronize()
        i = len(self.windows)
        self.windows.append({"window": i, "sampling": sampling(i), "steps": WINDOW_STEPS,
                             "seconds": time.perf_counter() - self.t})
        self._start(i + 1)

    def metrics(self) -> list[dict]:
        return []  # the record's windows say what sampling cost; the meter's figures cover half the window

    def tables(self) -> dict:
        return {"windows": self.windows, "window_steps": WINDOW_STEPS, "sampler_why": self.meter.why}
