"""The 'input' observer: the cell's input pipeline alone. Its loader (workers, pinning, copy or
DALI, exactly as the variant sets them) delivers batches to the device and nothing trains, so the
throughput it measures is the ceiling that loader puts on the cell: training at that rate means
the cell is input-bound; far below it, the step is what holds it."""
from __future__ import annotations

from pathlib import Path

from profiles.timing import Timing


class InputOnly(Timing):
    name = "input"
    trains = False

    def __init__(self, spec: dict, cuda: bool, out_dir: Path):
        super().__init__(spec, False, out_dir)  # no GPU work to sample

    def metrics(self) -> list[dict]:
        return []
