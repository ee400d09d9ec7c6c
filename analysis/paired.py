"""Paired ratios: what a change is worth, from runs of one set measured side by side.

A ratio of two cells (after / before) is made only from runs of one set of runs (same GPU, same
commit, same day) that share a repetition, where the set ran them repetition by repetition (no
repetition's runs span another's start, as a stop and a rerun can leave them, and no pair's two
runs under one profiler came from two runs of their sweep), so each pair saw
the same machine at nearly the same time. The ratio reported is the median of the paired ratios,
with a 95 % bootstrap interval of that median; with fewer than MIN_PAIRS pairs there is no
interval, and a ratio whose interval holds 1.0 is not established. A run from a tree with
uncommitted changes, or a cell that failed in any run of the set, gives no ratio.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

MIN_PAIRS = 3
CONFIDENCE = 0.95
FLIP = {"gain": "loss", "loss": "gain"}  # a status read the other way round
NOT_INTERLEAVED = "not interleaved in its set"  # how an unpaired ratio's why begins where its runs overlapped


def run_set(env: dict | None, started: str | None) -> str:
    """The set of runs a record belongs to: its GPU (the physical one where known), its commit,
    its day."""
    env = env or {}
    gpu = env.get("gpu_uuid") or env.get("gpu") or env.get("cpu") or "?"
    return f"{gpu}|{env.get('git_commit', '?')}|{(started or '')[:10]}"


def committed(rset: str) -> bool:
    """Was the run made from a known commit with no uncommitted change?"""
    commit = rset.split("|")[1]
    return not commit.endswith("-dirty") and commit not in ("?", "unknown")


def interval(ratios: np.ndarray) -> tuple[float, float]:
    """95 % percentile bootstrap interval of the median (seeded: the same records, the same table)."""
    if np.ptp(ratios) == 0:
        return float(ratios[0]), float(ratios[0])
    res = stats.bootstrap((ratios,), np.median, confidence_level=CONFIDENCE, method="percentile",
                          n_resamples=4999, random_state=np.random.default_rng(0))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def pairs(runs: pd.DataFrame, before: str, after: str) -> dict[str, pd.DataFrame]:
    """Per committed set of runs, the before and after values that share a repetition."""
    out = {}
    for rset, g in runs[runs.variant.isin([before, after])].groupby("run_set"):
        if not committed(rset):
            continue
        wide = g.pivot_table(index="rep", columns="variant", values="value", aggfunc="first")
        if before in wide and after in wide:
            out[rset] = wide[[before, after]].dropna()
    return {k: v for k, v in out.items() if len(v)}


def out_of_order(cells: pd.DataFrame, rset: str, variants: list[str], reps) -> str | None:
    """Why a set's runs do not interleave two cells: a pair's runs came from two runs of one sweep
    (split_pair), or one repetition's runs span another's start (as a stop and a rerun can leave
    them); None where each repetition ran as a block, or the records do not say."""
    c = cells[(cells.run_set == rset) & cells.variant.isin(variants) & cells.rep.isin(list(reps))]
    split = split_pair(c)
    if split:
        return split
    if "started" not in c or c.started.isna().any() or c.rep.nunique() < 2:
        return None
    when = c.assign(started=pd.to_datetime(c.started, utc=True, format="ISO8601"))
    span = when.groupby("rep").started.agg(["min", "max"]).sort_values("min")
    for (r, a), (q, b) in zip(span.iterrows(), span.iloc[1:].iterrows()):
        if a["max"] > b["min"]:
            return f"{NOT_INTERLEAVED}: repetition {r}'s runs span repetition {q}'s start"
    return None


def split_pair(cells: pd.DataFrame) -> str | None:
    """Why a pair is not interleaved where its two runs came from two runs of one sweep (a stop fell
    between them, minutes or hours); None where the records do not say. A record's sweep reads
    "<sweep>:<run of it>"; runs of different sweeps (another profiler, a data-parallel cell's own) pair."""
    if "sweep" not in cells or cells.sweep.isna().all():
        return None
    c = cells.dropna(subset=["sweep"])
    runs = c.groupby(["rep", c.sweep.str.rsplit(":", n=1).str[0]]).sweep.nunique()
    split = runs[runs > 1]
    return None if split.empty else \
        f"{NOT_INTERLEAVED}: repetition {split.index[0][0]}'s runs came from two runs of its sweep (a stop fell between them)"


def failed_in(cells: pd.DataFrame, variant: str, rset: str | None) -> str | None:
    """'failed in k of N runs' where the cell failed in that set of runs (or in any, with no set)."""
    c = cells[cells.variant == variant]
    c = c if rset is None else c[c.run_set == rset]
    bad = (c.status == "failed").sum()
    return f"{variant} failed in {bad} of {len(c)} runs" if bad else None


def ratio(runs: pd.DataFrame, cells: pd.DataFrame, before: str, after: str, op: str = "ratio",
          ends: bool = False) -> dict:
    """The paired ratio after / before (op "difference": after - before) of one workload x
    profiler x metric (runs: its metric rows with run_set; cells: its cells with status, run_set
    and started): median, lo, hi, n, run_set, status (gain, loss, not established, too few pairs,
    unpaired, failed) and why. Where several sets pair it interleaved: the one with most pairs, then the latest.
    With `ends`, each cell's own median over the pairs too (before_value, after_value)."""
    found = pairs(runs, before, after)
    if not found:
        why = failed_in(cells, before, None) or failed_in(cells, after, None)
        return {"status": "failed" if why else "unpaired", "n": 0,
                "why": why or "no set of runs measured both (same GPU, commit and day)"}
    last = cells.dropna(subset=["started"]).groupby("run_set").started.max() if "started" in cells else {}
    best = lambda kv: (len(kv[1]), str(last.get(kv[0], kv[0].split("|")[2])))  # noqa: E731 - most pairs, then latest
    apart = {k: out_of_order(cells, k, [before, after], v.index) for k, v in found.items()}
    rset, both = max(((k, v) for k, v in found.items() if not apart[k]), key=best, default=max(found.items(), key=best))
    why = failed_in(cells, before, rset) or failed_in(cells, after, rset)
    if why:
        return {"status": "failed", "n": 0, "run_set": rset, "why": why}
    if apart[rset]:  # no set ran them interleaved
        return {"status": "unpaired", "n": 0, "run_set": rset, "why": apart[rset]}
    r = (both[after] / both[before] if op == "ratio" else both[after] - both[before]).to_numpy(dtype=float)
    neutral = 1.0 if op == "ratio" else 0.0
    out = {"median": float(np.median(r)), "n": len(r), "run_set": rset}
    if ends:
        out |= {"before_value": float(np.median(both[before])), "after_value": float(np.median(both[after]))}
    if len(r) < MIN_PAIRS:
        return {**out, "status": "too few pairs", "why": f"{len(r)} pair(s); an interval needs {MIN_PAIRS}"}
    lo, hi = interval(r)
    status = "gain" if lo > neutral else "loss" if hi < neutral else "not established"
    return {**out, "lo": lo, "hi": hi, "status": status, "why": None}


def table(metrics: pd.DataFrame, cells: pd.DataFrame, comparisons: list[tuple[str, str, str]],
          metric: str = "throughput", profiler: str = "timing", aliases: dict | None = None,
          lower_is_better: bool = False) -> pd.DataFrame:
    """One row per (workload, before, after) comparison of `metric` under `profiler`; a variant the
    matrix measured as another (aliases: (workload, variant) -> that one) is read as it. Status
    gain / loss is the better / worse side of 1 (below 1 where lower is better, as for energy)."""
    rows, aliases = [], aliases or {}
    m = metrics[(metrics.metric == metric) & (metrics.profiler == profiler)]
    c = cells[cells.profiler == profiler]
    for workload, before, after in comparisons:
        b, a = (aliases.get((workload, v), v) for v in (before, after))
        r = ratio(m[m.workload == workload], c[c.workload == workload], b, a) if a != b else \
            {"status": "unpaired", "n": 0, "why": f"{after} is {before} here"}
        if lower_is_better:
            r["status"] = FLIP.get(r["status"], r["status"])
        rows.append({"workload": workload, "before": before, "after": after, "profiler": profiler,
                     "metric": metric, **r})
    columns = ["workload", "before", "after", "profiler", "metric", "median", "lo", "hi", "n", "status",
               "run_set", "why"]
    return pd.DataFrame(rows, columns=columns)


CONFIRM_PAIRS = 5  # a ratio undecided after the first repetitions is measured again up to this many pairs


def undecided(ratios: pd.DataFrame, pairs: int = CONFIRM_PAIRS) -> list[dict]:
    """The cells of every ratio (ratios.csv's rows) that is undecided from fewer than `pairs` pairs:
    its interval holds 1.0, or it has too few pairs for one. The protocol runs both cells again,
    interleaved, until the ratio has `pairs`. A profiler `a/b` (the meter's cost) names both cells'."""
    rows = ratios[ratios.status.isin(["not established", "too few pairs"]) & (ratios.n < pairs)]
    cells = {(r.workload, v, p) for r in rows.itertuples() for v in (r.before, r.after) for p in r.profiler.split("/")}
    return [{"workload": w, "variant": v, "profiler": p} for w, v, p in sorted(cells)]
