"""How long a preset's matrix would take on a machine, from what the same cells took there before:
a results folder's cells.csv (each run's own clock, its first step and setup included) and
compiles.csv (the compile stage's folders). Before a run, not instead of one: a cell never run on
that machine is timed by its workload's runs under the same profiler, or not at all, and says so."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from trainperf import matrix
from workloads import compiled


def cell_times(config: dict, cells: pd.DataFrame) -> pd.DataFrame:
    """Each run the matrix would make, with the seconds it took before (median of that cell's ok
    runs, else of its workload's under the same profiler) and that basis."""
    ok = cells[cells.status == "ok"]
    own = ok.groupby(["workload", "variant", "profiler"]).seconds.median()
    group = ok.groupby(["workload", "profiler"]).seconds.median()
    rows = []
    for c in matrix.cells(config):
        if c["status"] != "run":
            continue
        k = c["keys"]
        cell, wp = (k["workload"], k["variant"], k["profiler"]), (k["workload"], k["profiler"])
        s, basis = ((own[cell], "the cell's runs") if cell in own.index else (group[wp], "its workload's runs")
                    if wp in group.index else (float("nan"), "no run"))
        rows.append({**k, "seconds": s, "basis": basis, "compile_key": compiled.cache_key(c["spec"])
                     if c["spec"]["knobs"].get("compile") and matrix.processes(c["spec"]) == 1 else None})
    return pd.DataFrame(rows)


def compile_stage_s(keys: set[str], compiles: pd.DataFrame, parallel: int) -> tuple[float, int]:
    """The compile stage on a cold cache: each folder's build time before (its workload's median
    where the folder was never built there), `parallel` at a time; and how many folders had none."""
    built = compiles[compiles.status == "ok"]
    own, group = built.groupby("key").seconds.median(), built.groupby("workload").seconds.median()
    times, unknown = [], 0
    for key in keys:
        workload = key.rsplit("-", 1)[0]
        t = own.get(key, group.get(workload))
        unknown += t is None
        times.append(t or 0.0)
    return (max(max(times, default=0.0), sum(times) / max(1, parallel)), unknown)


def estimate(config: dict, folder: Path) -> dict:
    """The matrix's runs per workload and profiler with their seconds, the compile stage's, the
    total, and what had no basis."""
    past = pd.read_csv(folder / "cells.csv")
    runs = cell_times(config, past)
    compiles = pd.read_csv(folder / "compiles.csv") if (folder / "compiles.csv").is_file() else pd.DataFrame(
        columns=["key", "workload", "status", "seconds"])
    stage, unbuilt = compile_stage_s(set(runs.compile_key.dropna()), compiles, config.get("compile_jobs", 1))
    by = runs.groupby(["workload", "profiler"], sort=False).agg(
        runs=("seconds", "size"), seconds=("seconds", "sum"), unknown=("basis", lambda b: int((b == "no run").sum())))
    return {"table": by.reset_index(), "compile_s": stage, "compile_unknown": unbuilt,
            "total_s": float(by.seconds.sum()) + stage, "unknown": int(by.unknown.sum())}
