"""The documented claims (analysis/claims.yaml) against what was measured here: a value with its
spread, and a verdict: holds / holds in direction, different size / does not hold / not measurable here."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

REGISTRY = Path(__file__).with_name("claims.yaml")
SIZE_FACTOR = 2.0  # a measured effect within this factor of the documented one "holds" in size


def load(path: str | Path = REGISTRY) -> list[dict]:
    return yaml.safe_load(Path(path).read_text())


def _row(summary: pd.DataFrame, test: dict, variant: str):
    rows = summary[(summary.workload == test["workload"]) & (summary.variant == variant)
                   & (summary.profiler == test.get("profiler", "timing"))]
    hit = rows[rows.metric == test["metric"]]
    if len(hit):
        return hit.iloc[0], None
    status = rows[rows.status != "ok"]
    if len(status):
        why = f"{status.status.iloc[0]}: {status.reason.iloc[0]}"
    else:
        why = f"the cell ran; its record does not give {test['metric']}" if len(rows) else "not run"
    return None, f"{test['metric']} of {test['workload']}/{variant} ({test.get('profiler', 'timing')}): {why}"


def measure(test: dict, summary: pd.DataFrame) -> tuple[tuple[float, float, float] | None, str | None]:
    """((value, lo, hi), None) for the claim's test, or (None, why it cannot be measured here)."""
    b, why = _row(summary, test, test["before"])
    if why:
        return None, why
    if test["kind"] == "share":
        return (b["median"], b["lo"], b["hi"]), None
    a, why = _row(summary, test, test["after"])
    if why:
        return None, why
    if test["kind"] == "ratio":
        return (a["median"] / b["median"], a["lo"] / b["hi"], a["hi"] / b["lo"]), None
    if test["kind"] == "reduction":
        return (b["median"] / a["median"], b["lo"] / a["hi"], b["hi"] / a["lo"]), None
    return (b["median"] - a["median"], b["lo"] - a["hi"], b["hi"] - a["lo"]), None


def verdict(kind: str, value: float, lo: float, hi: float, effect: float | None,
            within: list[float] | None = None) -> str:
    if kind == "share":
        if within:  # the article states a range: the measured value must fall in it
            return "holds" if within[0] <= value <= within[1] else "does not hold (outside the documented range)"
        if effect is None:
            return "holds"
        return "holds" if abs(value - effect) <= 0.5 * effect else "does not hold"
    neutral = 0.0 if kind == "difference" else 1.0
    if hi < neutral:
        return "does not hold (the opposite)"
    if lo <= neutral:
        return "does not hold (no change beyond the spread)"
    if effect is None:
        return "holds"
    size = value / effect if kind != "difference" else (value / effect if effect else float("inf"))
    return "holds" if 1 / SIZE_FACTOR <= size <= SIZE_FACTOR else "holds in direction, different size"


def evaluate(summary: pd.DataFrame, claims: list[dict] | None = None) -> pd.DataFrame:
    rows = []
    for c in claims or load():
        t = c["test"]
        measured, why = measure(t, summary)
        row = {"id": c["id"], "source": c["source"], "hardware": c["hardware"], "claim": c["claim"],
               "documented": _documented(c), "test": _describe(t)}
        if measured is None:
            row.update(value=None, lo=None, hi=None, verdict="not measurable here", why=why)
        else:
            row.update(value=measured[0], lo=measured[1], hi=measured[2], why=None,
                       verdict=verdict(t["kind"], *measured, t.get("effect"), t.get("range")))
        rows.append(row)
    return pd.DataFrame(rows)


def _documented(c: dict) -> str:
    d, within = c["documented"], c["test"].get("range")
    if within:
        return f"{within[0]:g}-{within[1]:g} {d['unit']}"
    if "before" in d:
        return f"{d['before']:g} -> {d['after']:g} {d['unit']}"
    return f"{d['value']:g} {d['unit']}" if "value" in d else f"(no number; {d['unit']})"


def _describe(t: dict) -> str:
    pair = t["before"] if t["kind"] == "share" else f"{t['before']} vs {t['after']}"
    return f"{t['kind']} of {t['metric']}, {t['workload']} {pair}"
