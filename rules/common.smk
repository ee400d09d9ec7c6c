# Validate the config, resolve 'auto' values and expand the matrix once, at parse time.
import json
from pathlib import Path

from trainperf import config as cfg, matrix
from workloads import record as records
from workloads.data import check_dataset
import workloads as registry

try:
    R = matrix.resolve(cfg.validate(dict(config)))
    for _name, _path in R.get("datasets", {}).items():  # a user's real dataset: checked before any run
        check_dataset(_path, registry.get(_name).data)
except (cfg.ConfigError, registry.WorkloadError, KeyError, FileNotFoundError) as _e:
    raise WorkflowError(f"trainperf: {_e.args[0] if _e.args else _e}")

MACHINE, PRESET = R["machine"], R["preset"]
REPS = R["presets"][PRESET]["repetitions"]
CONFIRM = max(REPS, R["presets"][PRESET].get("confirm_repetitions", REPS))  # pairs a ratio not established gets
CELLS = matrix.cells(R)
SKIPPED = [c for c in CELLS if c["status"] == "skipped"]
GPU = 1 if R["cuda"] else 0  # the scheduler's GPU request for the rules that train (per process)

# A sweep: the cells of one workload x profiler x repetition, run by one process (trainperf/sweep.py).
# Data-parallel cells (ddp=N) form sweeps of their own, "<workload>+ddp<N>", which ask for N GPUs.
SWEEPS, GPUS = {}, {}
for _c in CELLS:
    if _c["status"] == "run":
        _k, _n = _c["keys"], matrix.processes(_c["spec"])
        _unit = _k["workload"] if _n == 1 else f"{_k['workload']}+ddp{_n}"
        GPUS[_unit] = GPU * _n
        SWEEPS.setdefault((_unit, _k["profiler"], _k["rep"]), []).append((_c["spec"], matrix.record_path(R, **_k)))


def rotated(jobs, rep):
    """Each repetition starts the sweep at another variant, so that no variant always runs first in its process."""
    n = rep % len(jobs)
    return jobs[n:] + jobs[:n]


SWEEPS = {key: rotated(jobs, key[2]) for key, jobs in SWEEPS.items()}


def sweep_path(workload, profiler, rep, suffix="json"):
    return f"runs/{MACHINE}/sweeps/{workload}.{profiler}.rep{rep}.{suffix}"


def plan_sweeps(sweeps):
    """A sweep's cells go to it as a file (their specs are long); a marker whose records were
    deleted since is stale: the sweep runs again and redoes exactly the cells without a record."""
    for key, jobs in sweeps.items():
        plan = Path(sweep_path(*key, suffix="jobs"))
        if not plan.is_file() or json.loads(plan.read_text()) != jobs:
            records.write_json(plan, jobs)
        if not all(Path(out).is_file() for _, out in jobs):
            Path(sweep_path(*key)).unlink(missing_ok=True)


plan_sweeps(SWEEPS)


def sweep_params(wc):
    """What the dry run shows of a sweep, and what reruns it when it changes: its cells' names and
    a digest of their specs."""
    jobs = SWEEPS[(wc.workload, wc.profiler, int(wc.rep))]
    return {"cells": " ".join(spec["variant"] for spec, _ in jobs), "specs": cfg.digest(jobs)}


# The compile stage: one torch.compile cache folder per combination of traced knobs, each built
# for the first single-process cell that uses it (trainperf/precompile.py); a DDP cell's ranks
# compile their own graphs.
COMPILES = {}
for _c in CELLS:
    if matrix.compile_key(_c):
        COMPILES.setdefault(matrix.compile_key(_c), _c["spec"])


def kept_skipped():
    """The skipped cells of every pipeline run on this machine: this one's decide the cells of its
    matrix, earlier ones' stay for the others (a run of some workloads adds to the rest); a cell
    with a record is not skipped."""
    path, now = Path(f"runs/{MACHINE}/skipped.json"), {json.dumps(c["keys"], sort_keys=True) for c in CELLS}
    earlier = json.loads(path.read_text()) if path.is_file() else []
    kept = [c for c in earlier if json.dumps(c["keys"], sort_keys=True) not in now]
    kept += [{"keys": c["keys"], "reason": c["reason"]} for c in SKIPPED]
    return [c for c in kept if not Path(matrix.record_path(R, **c["keys"])).is_file()]


if records.read(f"runs/{MACHINE}/skipped.json") != (_kept := kept_skipped()):
    records.write_json(f"runs/{MACHINE}/skipped.json", _kept)


def compile_records():
    return [f"runs/{MACHINE}/compiled/{key}.json" for key in COMPILES]


def sweeps_of(profiler=None, rep=None):
    return [sweep_path(*k) for k in SWEEPS if (profiler is None or k[1] == profiler) and (rep is None or k[2] == rep)]


def confirming(wildcards=None):
    """The confirming repetitions REPS..CONFIRM-1: the cells of every ratio not established after
    REPS pairs (the `undecided` checkpoint lists them), run again in sweeps of their own."""
    if CONFIRM == REPS:
        return []
    chosen = json.loads(Path(checkpoints.undecided.get().output[0]).read_text())
    extra = {}
    for c in chosen:
        for r in range(REPS, CONFIRM):
            cell = matrix.cell(R, c["workload"], c["variant"], c["profiler"], r)
            if cell["status"] == "run" and matrix.processes(cell["spec"]) == 1:
                extra.setdefault((c["workload"], c["profiler"], r), []).append((cell["spec"], matrix.record_path(R, **cell["keys"])))
    extra = {key: rotated(jobs, key[2]) for key, jobs in extra.items()}
    if any(SWEEPS.get(k) != jobs for k, jobs in extra.items()):
        plan_sweeps(extra)
        SWEEPS.update(extra)
    return [sweep_path(*k) for k in extra]


def sweep_inputs(wc):
    """A sweep's dataset (time stamp ignored: it is deterministic) and the compile stage's records
    (ignored too: a cache folder rebuilt does not void the runs); a workload's timing repetition r
    waits for its repetition r-1 under timing and under each profiler that runs every repetition,
    those for timing's repetition r (interleaved: pairs minutes apart, not a whole matrix apart) but
    `bare`, which in odd repetitions runs first and timing waits for it (the meter's cost, timing over
    bare, then sees each order as often; so do step and step-bare), the other profilers for its last
    timing repetition (a repetition with no timing sweep, such as a confirming one of the step alone,
    waits for the repetition before under those that run every repetition), and ncu for the nsys
    timelines it takes its kernels from (in order only: a sweep redone does not void the sweeps
    after it). Each waits on sweeps of its own workload only: what another workload's run made
    never changes what this one waits for."""
    rep, w = int(wc.rep), wc.workload
    inputs = {"data": ancient(SWEEPS[(w, wc.profiler, rep)][0][0]["data"]),
              "compiled": [ancient(p) for p in compile_records()]}  # no sweep runs while the stage compiles
    if rep >= REPS:  # a confirming repetition runs once the first ones are decided
        inputs["undecided"] = ancient(checkpoints.undecided.get().output[0])
    timing = [r for r in range(REPS if rep < REPS else CONFIRM) if (w, "timing", r) in SWEEPS]
    paired = sorted({p for (x, p, r) in SWEEPS if x == w and r > 0 and p != "timing"})  # run every repetition
    bare_first = rep % 2 == 1 and (w, "bare", rep) in SWEEPS and rep in timing
    if wc.profiler == "timing" or (wc.profiler == "bare" and bare_first):  # the repetition's first sweep
        if rep - 1 in timing:
            inputs["previous"] = [ancient(sweep_path(w, p, rep - 1)) for p in ["timing", *paired] if (w, p, rep - 1) in SWEEPS]
        if wc.profiler == "timing" and bare_first:
            inputs["bare"] = ancient(sweep_path(w, "bare", rep))
    elif wc.profiler in paired and rep in timing:  # beside the timing repetition it is paired with
        inputs["timing"] = ancient(sweep_path(w, "timing", rep))
        inputs["first"] = step_meter_first(w, wc.profiler, rep)
    elif wc.profiler in paired:  # no timing sweep paces this repetition: it follows repetition r-1
        inputs["previous"] = [ancient(sweep_path(w, p, rep - 1)) for p in paired if (w, p, rep - 1) in SWEEPS]
        inputs["first"] = step_meter_first(w, wc.profiler, rep)
    elif wc.profiler != "timing" and timing:
        inputs["timing"] = ancient(sweep_path(wc.workload, "timing", timing[-1]))
    if wc.profiler == "ncu" and (wc.workload, "nsys", rep) in SWEEPS:
        inputs["nsys"] = ancient(sweep_path(wc.workload, "nsys", rep))
    return inputs


def step_meter_first(w, profiler, rep):
    """The step's meter cost (step over step-bare) sees each order as often: step-bare runs first in
    odd repetitions, step in even ones, and the other waits for it ([]: nothing to wait for)."""
    if (w, "step", rep) not in SWEEPS or (w, "step-bare", rep) not in SWEEPS:
        return []
    first, then = ("step-bare", "step") if rep % 2 else ("step", "step-bare")
    return [ancient(sweep_path(w, first, rep))] if profiler == then else []


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
