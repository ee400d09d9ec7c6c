# Validate the config, resolve 'auto' values and expand the matrix once, at parse time.
import json

from workloads import config as cfg, matrix
from workloads.data import check_dataset
import workloads as registry

try:
    R = matrix.resolve(cfg.validate(dict(config)))
    for _name, _path in R.get("datasets", {}).items():  # a user's real dataset: checked before any run
        check_dataset(_path, registry.get(_name).data)
except (cfg.ConfigError, KeyError, FileNotFoundError) as _e:
    raise WorkflowError(f"trainperf: {_e.args[0] if _e.args else _e}")

MACHINE, PRESET = R["machine"], R["preset"]
CELLS = matrix.cells(R)
SPECS = {tuple(c["keys"].values()): c["spec"] for c in CELLS if c["status"] == "run"}
SKIPPED = [c for c in CELLS if c["status"] == "skipped"]
GPU = 1 if R["cuda"] else 0


def run_path(workload, variant, profiler, rep):
    return f"runs/{MACHINE}/{workload}/{variant}/{profiler}/rep{rep}/metrics.json"


def runs_of(rep=None):
    return [run_path(*k) for k in SPECS if rep is None or k[3] == rep]


def run_inputs(wc):
    """A run's dataset (time stamp ignored: it is deterministic) and, from repetition 1 on,
    the previous repetition's completion flag."""
    spec = SPECS[(wc.workload, wc.variant, wc.profiler, int(wc.rep))]
    inputs = {"data": ancient(spec["data"])}
    if int(wc.rep) > 0:
        inputs["previous"] = f"runs/{MACHINE}/rep{int(wc.rep) - 1}.done"
    return inputs


wildcard_constraints:
    workload="[^/]+",
    variant="[^/]+",
    profiler="[^/]+",
    rep=r"\d+",
