"""Two results folders side by side (two machines, or two commits on one): per cell the ratio of
B's throughput to A's, paired by repetition where both hold runs of one GPU on one day, else
"not paired" (the ratio of medians, its interval from resampling each side's runs apart); a cell
whose interval lies beyond the threshold is a regression or a gain."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from analysis import paired

KEYS = ["workload", "variant", "profiler"]


def runs(folder: str | Path, metric: str = "throughput") -> pd.DataFrame:
    """The folder's committed runs of `metric`, each with its GPU-and-day (a run set less its commit),
    from the largest committed set of each cell; cells that failed in any run of that set are left out."""
    m = pd.read_csv(Path(folder) / "metrics.csv")
    cells = pd.read_csv(Path(folder) / "cells.csv")
    m = m[(m.metric == metric) & m.run_set.map(lambda s: isinstance(s, str) and paired.committed(s))]
    bad = set(map(tuple, cells[cells.status == "failed"][[*KEYS, "run_set"]].values))
    m = m[[(*k, s) not in bad for k, s in zip(m[KEYS].itertuples(index=False), m.run_set)]]
    largest = m.groupby([*KEYS, "run_set"]).size().reset_index(name="n").sort_values("n").drop_duplicates(KEYS, keep="last")
    m = m.merge(largest[[*KEYS, "run_set"]], on=[*KEYS, "run_set"])
    return m.assign(machine_day=m.run_set.str.split("|").str[0] + "|" + m.run_set.str.split("|").str[2])


def unpaired_interval(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """95 % percentile bootstrap interval of median(b) / median(a), each side resampled apart."""
    if len(a) < paired.MIN_PAIRS or len(b) < paired.MIN_PAIRS:
        return np.nan, np.nan
    res = stats.bootstrap((a, b), lambda x, y, axis=-1: np.median(y, axis=axis) / np.median(x, axis=axis),
                          confidence_level=paired.CONFIDENCE, method="percentile", n_resamples=4999,
                          random_state=np.random.default_rng(0), vectorized=True)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def cell(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """One cell's B / A: paired where both ran on one GPU on one day, else the ratio of medians."""
    shared = a.merge(b, on=["machine_day", "rep"], suffixes=("_a", "_b"))
    if len(shared) >= paired.MIN_PAIRS:
        r = (shared.value_b / shared.value_a).to_numpy(dtype=float)
        lo, hi = paired.interval(r)
        return {"ratio": float(np.median(r)), "lo": lo, "hi": hi, "n": len(r), "paired": True}
    x, y = a.value.to_numpy(dtype=float), b.value.to_numpy(dtype=float)
    lo, hi = unpaired_interval(x, y)
    return {"ratio": float(np.median(y) / np.median(x)), "lo": lo, "hi": hi, "n": min(len(x), len(y)), "paired": False}


def compare(folder_a: str | Path, folder_b: str | Path, threshold: float = 0.05) -> pd.DataFrame:
    """One row per cell both folders measured: A's and B's median, B / A with its interval, and a
    verdict: regression (the interval below 1 - threshold), gain (above 1 + threshold), within
    noise (it holds 1), changed (beyond the noise, within the threshold) or no interval."""
    a, b = runs(folder_a), runs(folder_b)
    rows = []
    for key, ga in a.groupby(KEYS):
        gb = b[(b[KEYS] == pd.Series(dict(zip(KEYS, key)))).all(axis=1)]
        if gb.empty:
            continue
        r = cell(ga, gb)
        verdict = ("no interval" if np.isnan(r["lo"]) else "regression" if r["hi"] < 1 - threshold
                   else "gain" if r["lo"] > 1 + threshold else "within noise" if r["lo"] <= 1 <= r["hi"] else "changed")
        rows.append({**dict(zip(KEYS, key)), "a": float(ga.value.median()), "b": float(gb.value.median()), **r,
                     "verdict": verdict})
    return pd.DataFrame(rows, columns=[*KEYS, "a", "b", "ratio", "lo", "hi", "n", "paired", "verdict"])
