# Validate the config, resolve 'auto' values and expand the matrix once, at parse time.
import json

from workloads import compiled, config as cfg, matrix
from workloads.data import check_dataset
import workloads as registry

try:
    R = matrix.resolve(cfg.validate(dict(config)))
    for _name, _path in R.get("datasets", {}).items():  # a user's real dataset: checked before any run
        check_dataset(_path, registry.get(_name).data)
except (cfg.ConfigError, KeyError, FileNotFoundError) as _e:
    raise WorkflowError(f"trainperf: {_e.args[0] if _e.args else _e}")

MACHINE, PRESET = R["machine"], R["preset"]
REPS = R["presets"][PRESET]["repetitions"]
CELLS = matrix.cells(R)
SKIPPED = [c for c in CELLS if c["status"] == "skipped"]
GPU = 1 if R["cuda"] else 0  # the scheduler's GPU request for the rules that train (per process)

# A sweep: the cells of one workload x profiler x repetition, run by one process (workloads/sweep.py).
# Data-parallel cells (ddp=N) form sweeps of their own, "<workload>+ddp<N>", which ask for N GPUs.
SWEEPS, GPUS = {}, {}
for _c in CELLS:
    if _c["status"] == "run":
        _k, _n = _c["keys"], matrix.processes(_c["spec"])
        _unit = _k["workload"] if _n == 1 else f"{_k['workload']}+ddp{_n}"
        GPUS[_unit] = GPU * _n
        SWEEPS.setdefault((_unit, _k["profiler"], _k["rep"]), []).append((_c["spec"], matrix.record_path(R, **_k)))


for (_w, _p, _r), _jobs in SWEEPS.items():  # each repetition starts the sweep at another variant,
    _n = _r % len(_jobs)                    # so that no variant always runs first in its process
    SWEEPS[(_w, _p, _r)] = _jobs[_n:] + _jobs[:_n]


# The compile stage: one torch.compile cache folder per combination of traced knobs, each built
# for the first single-process cell that uses it (workloads/precompile.py); a DDP cell's ranks
# compile their own graphs.
COMPILES = {}
for _c in CELLS:
    if _c["status"] == "run" and _c["spec"]["knobs"].get("compile") and matrix.processes(_c["spec"]) == 1:
        COMPILES.setdefault(compiled.cache_key(_c["spec"]), _c["spec"])


def compile_records():
    return [f"runs/{MACHINE}/compiled/{key}.json" for key in COMPILES]


def sweep_path(workload, profiler, rep):
    return f"runs/{MACHINE}/sweeps/{workload}.{profiler}.rep{rep}.json"


def sweeps_of(profiler=None, rep=None):
    return [sweep_path(*k) for k in SWEEPS if (profiler is None or k[1] == profiler) and (rep is None or k[2] == rep)]


def sweep_inputs(wc):
    """A sweep's dataset (time stamp ignored: it is deterministic) and the compile stage's records
    (ignored too: a cache folder rebuilt does not void the runs); repetition r of the timing
    matrix waits for repetition r-1, the profilers for the whole timing matrix, and ncu for the
    nsys timelines it takes its kernels from."""
    rep = int(wc.rep)
    inputs = {"data": ancient(SWEEPS[(wc.workload, wc.profiler, rep)][0][0]["data"]),
              "compiled": [ancient(p) for p in compile_records()]}  # no sweep runs while the stage compiles
    if wc.profiler == "timing" and rep > 0:
        inputs["previous"] = f"runs/{MACHINE}/rep{rep - 1}.done"
    elif wc.profiler != "timing" and "timing" in R["profilers"]:
        inputs["timing"] = f"runs/{MACHINE}/rep{REPS - 1}.done"
    if wc.profiler == "ncu" and (wc.workload, "nsys", rep) in SWEEPS:
        inputs["nsys"] = sweep_path(wc.workload, "nsys", rep)
    return inputs


def one_spec_per_workload():
    """A single-process cell spec of each workload (for the model FLOPs of limits.json)."""
    specs = {}
    for jobs in SWEEPS.values():
        if matrix.processes(jobs[0][0]) == 1:
            specs.setdefault(jobs[0][0]["workload"], jobs[0][0])
    return specs


wildcard_constraints:
    workload="[^/.]+",
    profiler="[^/.]+",
    rep=r"\d+",
