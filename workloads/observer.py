"""The observer contract: what the training harness calls around a run, and nothing more.

The harness is handed an Observer class for a cell (the matrix's `profiler`); it builds it with
(spec, cuda, out_dir), wraps the measured steps in `window()`, each part of a step in `phase(name)`,
marks each step's end with `step()`, and adds `metrics()` and `tables()` to the record. The
observers themselves (timing, ceilings, torch.profiler, nsys, ncu) live in `profiles/`.
"""
from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path


class Observer:
    """Observes nothing: the base of every observer, and the unprofiled run."""
    name = "timing"
    wraps_process = False  # True: the cell runs as its own process under a tool (nsys, ncu)
    trains = True          # False: the input pipeline alone, nothing trains
    one_batch = False      # True: one batch fed again every step (the step alone)
    time_bounded = True    # a slow cell may stop measuring early (protocol.Budget)
    measured_steps: int | None = None  # the observer's own number of measured steps (None: the preset's)

    @classmethod
    def unavailable(cls, config: dict, cuda: bool) -> str | None:
        """Why this observer cannot run on this machine, or None."""
        return None

    def __init__(self, spec: dict, cuda: bool, out_dir: Path):
        self.spec = spec

    def phase(self, name: str):
        """A part of a step: input, forward, backward, optimizer, sync."""
        return nullcontext()

    def window(self):
        """The measured steps."""
        return nullcontext()

    def step(self) -> None:
        pass

    def metrics(self) -> list[dict]:
        return []

    def tables(self) -> dict:
        return {}
