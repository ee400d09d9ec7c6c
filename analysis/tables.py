"""Reading summary.csv rows and formatting numbers and Markdown tables for the report."""
from __future__ import annotations

import pandas as pd

from analysis import paired

CI = "95 % CI; from 3 pairs, their range"  # the bootstrap's percentile interval of 3 pairs is their range

PHASES = ("input", "forward", "backward", "optimizer", "sync")  # the loop phases the harness marks, in order


def num(x: float) -> str:
    """1,234 for large values, 3 significant digits below 1,000."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def digits(lo: float, hi: float) -> int | None:
    """The fewest significant digits (3 to 5) that tell an interval's bounds apart; None where 5 do not."""
    return next((d for d in (3, 4, 5) if f"{lo:.{d}g}" != f"{hi:.{d}g}"), None)


def fmt(median, lo, hi) -> str:
    if pd.isna(median):
        return ""
    return num(median) if num(lo) == num(hi) else f"{num(median)} [{num(lo)}, {num(hi)}]"  # no spread at this precision


def spread(r) -> str:
    """A summary row's median with its spread, as fmt() writes it; empty for no row."""
    return "" if r is None else fmt(r["median"], r["lo"], r["hi"])


def text(v) -> str:
    """A table cell: numbers as num() writes them, missing values empty."""
    if isinstance(v, float):
        return "" if pd.isna(v) else num(v)
    return "" if v is None else str(v)


def table(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(df.columns) + " |\n| " + " | ".join("---" for _ in df.columns) + " |\n"
    return head + "".join("| " + " | ".join(map(text, row)) + " |\n" for row in df.itertuples(index=False))


def row(summary: pd.DataFrame, workload: str, variant: str, metric: str, profiler: str = "timing"):
    """The successful summary row of one cell's metric, or None."""
    r = summary[(summary.workload == workload) & (summary.variant == variant) & (summary.profiler == profiler)
                & (summary.metric == metric) & (summary.status == "ok")]
    return r.iloc[0] if len(r) else None


def ratio_row(ratios: pd.DataFrame, workload: str, before: str, after: str, profiler: str = "timing",
              metric: str = "throughput"):
    """The paired ratio after / before of `metric` (ratios.csv), or None."""
    r = ratios[(ratios.workload == workload) & (ratios.before == before) & (ratios.after == after)
               & (ratios.profiler == profiler) & (ratios.metric == metric)]
    return r.iloc[0] if len(r) else None


def ratio_text(r) -> str:
    """'1.23x [1.20, 1.26]' (95 % interval of the paired ratio); what is not established says so."""
    if r is None:
        return ""
    if r["status"] in ("unpaired", "failed"):
        apart = isinstance(r.get("why"), str) and r["why"].startswith(paired.NOT_INTERLEAVED)
        return "unpaired (not interleaved)" if apart else r["status"]
    value = f"{r['median']:.3g}x"
    if r["status"] == "too few pairs":
        return f"{value} (n={int(r['n'])}, no interval)"
    d = digits(r["lo"], r["hi"]) or 5
    while d < 6 and any(f"{x:.{d}g}" == "1" and x != 1 for x in (r["lo"], r["hi"])):
        d += 1  # a bound next to 1.0 shows which side of it it lies
    shown = f"{r['median']:.{d}g}x [{r['lo']:.{d}g}, {r['hi']:.{d}g}]"
    return shown if r["status"] in ("gain", "loss") else f"{shown} not established"
