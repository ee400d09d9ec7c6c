"""How a run is observed: the environment it ran in, and the profilers around its measured steps.

OBSERVERS maps a profiler name (the matrix's `profiler` dimension) to its observer class.
"""
from profiles.input_only import InputOnly
from profiles.meter_cost import MeterCost
from profiles.ncu import Ncu
from profiles.nsys import Nsys
from profiles.step_only import StepBare, StepOnly
from profiles.timing import Bare, Timing
from profiles.torch_profiler import TorchProfiler

OBSERVERS = {"timing": Timing, "bare": Bare, "input": InputOnly, "step": StepOnly, "step-bare": StepBare,
             "meter-cost": MeterCost,
             "torch": TorchProfiler, "nsys": Nsys, "ncu": Ncu}
