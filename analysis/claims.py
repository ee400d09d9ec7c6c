"""The documented claims (analysis/claims.yaml) against what was measured here.

Each claim names the cells that test it: two cells that differ only by the claimed fix (or the
article's own chain), each with a line on why that pair tests it. A claim is judged on gains, from
the paired ratio of its pair (analysis/paired.py) and that ratio's 95 % interval:
- holds: the interval of the measured gain reaches the documented gain within a factor of
  SIZE_FACTOR either way;
- holds in direction, larger (or smaller) than documented: the gain is established in the
  documented direction, but its interval stays further from (closer to) no change than that band;
- not established: the interval holds no change;
- does not hold (the opposite): the interval lies on the other side of no change;
- no verdict, with why: too few pairs for an interval; not run here (the preset left a cell out);
  not measurable here (a cell failed, or its record does not give the metric).
A share (a value of one cell, e.g. an occupancy) holds where its interval over the runs of one set
overlaps the documented range (or a factor of SIZE_FACTOR around the documented value); like a ratio,
it needs three runs of one set for an interval, and gets no verdict from fewer (its value is shown);
but where its test names a ceiling (a quantity that bounds it from above and does not vary from run
to run, as theoretical occupancy bounds achieved occupancy) below the documented range, it does not
hold from one run.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from analysis import paired
from analysis.aggregate import aliases

REGISTRY = Path(__file__).with_name("claims.yaml")
SIZE_FACTOR = 2.0
RULE = (f"A claim is judged on its gain: the paired ratio after / before of its two cells (one set of runs, "
        f"paired by repetition; median and 95 % bootstrap interval) less one, against the documented gain. "
        f"**holds**: the interval reaches the documented gain within a factor of {SIZE_FACTOR:g} either way; "
        f"**holds in direction, larger / smaller than documented**: an established gain of the documented sign whose "
        f"interval stays further from / closer to no change than that band; "
        f"**not established**: the interval holds no change; **does not hold**: the interval lies on the other side; "
        f"**too few pairs** (fewer than {paired.MIN_PAIRS}), **unpaired** (no set of runs measured both cells), "
        f"**not run here**, **not measurable here** (a cell failed or does not give the metric): no verdict, and why. "
        f"A share (one cell's value) holds where its interval over one set's runs overlaps the documented range, or "
        f"a factor of {SIZE_FACTOR:g} around a documented value; from fewer than {paired.MIN_PAIRS} runs, no verdict "
        f"(**too few runs**), but a share whose ceiling (a bound from above that does not vary from run to run, as "
        f"theoretical occupancy bounds achieved occupancy) sits below the documented range **does not hold** from one run.\n")


def load(path: str | Path = REGISTRY) -> list[dict]:
    return yaml.safe_load(Path(path).read_text())


def measure(test: dict, metrics: pd.DataFrame, cells: pd.DataFrame) -> dict:
    """The test's measured value: {'median', 'lo', 'hi', 'n', 'status', 'run_set', 'why'}."""
    p = test.get("profiler", "timing")
    runs = metrics[(metrics.workload == test["workload"]) & (metrics.metric == test["metric"]) & (metrics.profiler == p)]
    c = cells[(cells.workload == test["workload"]) & (cells.profiler == p)]
    same = aliases(c)
    test = {**test, **{k: same.get((test["workload"], test[k]), test[k]) for k in ("before", "after") if k in test}}
    if test["kind"] == "share":
        m = share(runs, c, test["before"])
    elif test["kind"] == "ratio":
        m = paired.ratio(runs, c, test["before"], test["after"], ends=True)
    else:  # reduction: before / after; difference: before - after (what the fix saves)
        m = paired.ratio(runs, c, test["after"], test["before"], op="difference" if test["kind"] == "difference" else "ratio",
                         ends=True)
    absent = None if "median" in m else next(
        (why for v in (test["before"], test.get("after")) if v and (why := missing(test, runs, c, v))), None)
    if test["kind"] in ("reduction", "difference"):  # measured after -> before: its ends the other way round
        m = {**m, "before_value": m.get("after_value"), "after_value": m.get("before_value")}
    m = {**m, "metric_unit": runs.unit.iloc[0] if len(runs) and "unit" in runs else None}
    return {**m, "why": absent} if absent else m


def missing(test: dict, runs: pd.DataFrame, cells: pd.DataFrame, variant: str) -> str | None:
    """Why a cell gives no value of the test's metric in any run: not run, failed, skipped (with
    its reason), or ran without giving it; None where a run gave one."""
    if (runs.variant == variant).any():
        return None
    c = cells[cells.variant == variant]
    bad = c[c.status != "ok"]
    reason = bad.reason.iloc[0] if "reason" in bad and len(bad) else None
    why = ("not run" if c.empty else f"the cell ran; its record does not give {test['metric']}" if len(bad) < len(c)
           else f"{bad.status.iloc[0]}: {reason}" if isinstance(reason, str) else bad.status.iloc[0])
    return f"{test['metric']} of {test['workload']}/{variant} ({test.get('profiler', 'timing')}): {why}"


def share(runs: pd.DataFrame, cells: pd.DataFrame, variant: str) -> dict:
    """One cell's value over the runs of its largest committed set: median, 95 % interval."""
    v = runs[(runs.variant == variant) & runs.run_set.map(lambda s: isinstance(s, str) and paired.committed(s)).astype(bool)]
    if v.empty:
        why = paired.failed_in(cells, variant, None) or f"{variant} has no committed run that gives it"
        return {"status": "unpaired", "n": 0, "why": why}
    rset = v.run_set.value_counts().index[0]
    x = v[v.run_set == rset].value.to_numpy(dtype=float)
    out = {"median": float(np.median(x)), "n": len(x), "run_set": rset}
    if len(x) < paired.MIN_PAIRS:
        return {**out, "status": "too few runs", "why": f"{len(x)} run(s); an interval needs {paired.MIN_PAIRS}"}
    lo, hi = paired.interval(x)
    return {**out, "lo": lo, "hi": hi, "status": "value", "why": None}


def verdict(kind: str, m: dict, effect: float | None, within: list[float] | None = None, expect: str = "higher",
            ceiling: float | None = None) -> str:
    """The verdict of one test from its measurement (see the module's rules); `ceiling`: the value
    of the test's ceiling metric, where it names one."""
    if kind == "share" and within and ceiling is not None and not pd.isna(ceiling) and ceiling < within[0]:
        return "does not hold (its ceiling is below the documented range)"
    if kind == "share":
        if m["status"] != "value":
            return undecided(m)
        band = within or [effect / SIZE_FACTOR, effect * SIZE_FACTOR]
        said = "the documented range" if within else f"a factor of {SIZE_FACTOR:g} of the documented value"
        return "holds" if m["lo"] <= band[1] and m["hi"] >= band[0] else f"does not hold (outside {said})"
    if m["status"] not in ("gain", "loss", "not established"):
        return undecided(m)
    neutral = 0.0 if kind == "difference" else 1.0
    lo, hi = m["lo"] - neutral, m["hi"] - neutral
    if lo <= 0 <= hi:
        return "not established"
    documented = None if effect is None else effect - neutral
    if documented is not None and (documented > 0) != (lo > 0):
        return "does not hold (the opposite)"
    if documented is None:
        said = lo > 0 if expect == "higher" else hi < 0
        return "holds (direction only; no size documented)" if said else "does not hold (the opposite)"
    small, large = sorted([documented / SIZE_FACTOR, documented * SIZE_FACTOR])
    if lo <= large and hi >= small:
        return "holds"
    larger = lo > large if documented > 0 else hi < small  # the gain's size, whatever its sign
    return f"holds in direction, {'larger' if larger else 'smaller'} than documented"


def undecided(m: dict) -> str:
    """Why a test has no verdict, in a few words (its `why` says the rest)."""
    if m.get("status") in ("too few pairs", "too few runs"):
        return m["status"]
    why = str(m.get("why") or "")
    if why.endswith(": not run"):
        return "not run here"
    paired_apart = m.get("status") == "unpaired" and (not why or why.startswith(("no set of runs", paired.NOT_INTERLEAVED)))
    return "unpaired" if paired_apart else "not measurable here"


def evaluate(metrics: pd.DataFrame, cells: pd.DataFrame, claims: list[dict] | None = None) -> pd.DataFrame:
    """One row per claim x test: the pair, why it tests the claim, the measurement, the verdict."""
    rows = []
    for c in claims or load():
        for t in c["tests"]:
            m, at = measure(t, metrics, cells), beside_cell(t)
            beside = measure({**t, "kind": "share", "metric": t["beside"], "before": at}, metrics, cells) \
                if "beside" in t else {}
            bound = beside.get("median") if t.get("ceiling") else None
            said = verdict(t["kind"], m, t.get("effect"), t.get("range"), t.get("expect", "higher"), bound)
            why = f"{t['beside']} {bound:.3g} bounds it from above in every run" if "its ceiling" in said else m.get("why")
            rows.append({"id": c["id"], "source": c["source"], "hardware": c["hardware"], "claim": c["claim"],
                         "documented": documented(c, t), "pair": describe(t), "metric": t["metric"], "unit": unit(c, t),
                         "before": t["before"], "after": t.get("after"), "why this pair": t.get("why", ""),
                         "value": m.get("median"), "lo": m.get("lo"), "hi": m.get("hi"), "n": m.get("n"),
                         "run_set": m.get("run_set"), "verdict": said, "why": why, "beside": t.get("beside"), "beside_cell": at,
                         "beside_value": beside.get("median"), "before_value": m.get("before_value"),
                         "after_value": m.get("after_value"), "metric_unit": m.get("metric_unit")})
    return pd.DataFrame(rows)


def beside_cell(t: dict) -> str:
    """The cell a test's `beside` metric is read on: its after cell (what the fix brings), else its one cell."""
    return t.get("after") or t["before"]


def documented(c: dict, t: dict) -> str:
    """The source's figure this test checks: the test's own where it names one, else the claim's."""
    d, within = c["documented"], t.get("range")
    if t.get("documented"):
        return t["documented"]
    if within:
        return f"{within[0]:g}-{within[1]:g} {d['unit']}"
    if "before" in d:
        gain = f" ({t['effect']:g}x)" if t.get("effect") and t["kind"] in ("ratio", "reduction") else ""
        return f"{d['before']:g} -> {d['after']:g} {d['unit']}{gain}"
    return f"{d['value']:g} {d['unit']}" if "value" in d else f"(no number; {d['unit']})"


def unit(c: dict, t: dict) -> str:
    """The unit of a test's measured value: x for a ratio or reduction, % for a share (every share
    metric is a percentage), else the claim's own unit's first word."""
    return {"ratio": "x", "reduction": "x", "share": "%"}.get(t["kind"], c["documented"]["unit"].split()[0])


def describe(t: dict) -> str:
    where = f"{t['workload']}, {t.get('profiler', 'timing')}"
    if t["kind"] == "share":
        return f"{t['metric']} of {t['before']} ({where})"
    return f"{t['metric']}: {t['before']} -> {t['after']} ({t['kind']}; {where})"
