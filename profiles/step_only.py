"""The 'step' observer: the cell's training step alone. The step runs exactly as the variant sets
it (precision, layout, compile, sync policy, optimizer) on one batch its loader delivered, held on
the device and fed again every step, so no input cost remains: the throughput it measures is the
ceiling the step puts on the cell. With the loader alone (profiles/input_only.py) it brackets the
cell: training near the lower of the two ceilings is bound by that side; well below both, the two
compete (for the host's cores, or for the GPU: DALI decodes on it)."""
from __future__ import annotations

from profiles.timing import Bare, Timing


class StepOnly(Timing):
    name = "step"
    one_batch = True


class StepBare(Bare):
    """The step alone without the meter: what metering costs a step no input side varies."""
    name = "step-bare"
    one_batch = True
