"""How long a preset's matrix would take on a machine, from what the same cells took there before:
a results folder's cells.csv (each run's own clock, its first step and setup included) and
compiles.csv (the compile stage's folders). Before a run, not instead of one: a cell never run on
that machine is timed by its workload's runs under the same profiler, or not at all, and says so."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from trainperf import matrix


def past_seconds(cells: pd.DataFrame, by: list[str]) -> pd.Series:
    """Each group's median run time, as it would be after the compile stage: a run that compiled
    its graphs in its first step (compile_s) counts without that step where no run of the group
    loaded them from the cache instead; the stage's time is estimated apart."""
    ok = cells[cells.status == "ok"]
    loaded = ok[ok.compile_s.isna()].groupby(by).seconds.median()
    built = (ok.seconds - ok.compile_s.fillna(0)).groupby([ok[k] for k in by]).median()
    return loaded.combine_first(built)


def basis(own: pd.Series, group: pd.Series, keys: dict) -> tuple[float, str]:
    """A run's seconds: its cell's runs, else its workload's under the same profiler, else none."""
    cell, wp = (keys["workload"], keys["variant"], keys["profiler"]), (keys["workload"], keys["profiler"])
    if cell in own.index:
        return own[cell], "the cell's runs"
    return (group[wp], "its workload's runs") if wp in group.index else (float("nan"), "no run")


def cell_times(config: dict, cells: pd.DataFrame) -> pd.DataFrame:
    """Each run the matrix would make, with the seconds it took before and that basis."""
    own = past_seconds(cells, ["workload", "variant", "profiler"])
    group = past_seconds(cells, ["workload", "profiler"])
    rows = [{**c["keys"], **dict(zip(("seconds", "basis"), basis(own, group, c["keys"]))),
             "compile_key": matrix.compile_key(c)} for c in matrix.cells(config) if c["status"] == "run"]
    return pd.DataFrame(rows, columns=["workload", "variant", "profiler", "rep", "seconds", "basis", "compile_key"])


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
    if runs.empty:
        return {"table": pd.DataFrame(columns=["workload", "profiler", "runs", "seconds", "unknown"]), "compile_s": 0.0,
                "compile_unknown": 0, "total_s": 0.0, "unknown": 0}
    compiles = pd.read_csv(folder / "compiles.csv") if (folder / "compiles.csv").is_file() else pd.DataFrame(
        columns=["key", "workload", "status", "seconds"])
    stage, unbuilt = compile_stage_s(set(runs.compile_key.dropna()), compiles, config.get("compile_jobs", 1))
    by = runs.groupby(["workload", "profiler"], sort=False).agg(
        runs=("seconds", "size"), seconds=("seconds", "sum"), unknown=("basis", lambda b: int((b == "no run").sum())))
    return {"table": by.reset_index(), "compile_s": stage, "compile_unknown": unbuilt,
            "total_s": float(by.seconds.sum()) + stage, "unknown": int(by.unknown.sum())}
