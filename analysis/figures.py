"""Figures for the report, drawn from summary.csv alone (seaborn on matplotlib's Agg backend)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402


def speedups(summary: pd.DataFrame, workload: str, path: Path) -> Path | None:
    """Horizontal bars: each variant's throughput over the baseline's, with the min-max spread."""
    rows = summary[(summary.workload == workload) & (summary.metric == "speedup") & (summary.profiler == "timing")]
    if rows.empty:
        return None
    rows = rows.sort_values("median")
    sns.set_theme(style="whitegrid")
    fig, ax = plt.subplots(figsize=(7, 0.32 * len(rows) + 1.2))
    colors = sns.color_palette("crest", len(rows))
    ax.barh(rows.variant, rows["median"], color=colors,
            xerr=[rows["median"] - rows.lo, rows.hi - rows["median"]], capsize=2)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xscale("log")
    for y, value in enumerate(rows["median"]):
        ax.annotate(f"{value:.2g}x", (value, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlabel("speedup over the baseline (x, log scale)")
    ax.set_title(f"{workload}: throughput over the baseline's\n(median; whiskers: min-max over repetitions)",
                 fontsize=10)
    return save(fig, path)


def save(fig, path: Path) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def waterfall(stages: pd.DataFrame, workload: str, unit: str, path: Path) -> Path | None:
    """Throughput after each cumulative fix (columns: stage, median, lo, hi), gains annotated."""
    if len(stages) < 2:
        return None
    sns.set_theme(style="whitegrid")
    fig, ax = plt.subplots(figsize=(8, 4))
    x = range(len(stages))
    ax.bar(x, stages["median"], color=sns.color_palette("crest", len(stages)),
           yerr=[stages["median"] - stages.lo, stages.hi - stages["median"]], capsize=3)
    for i, (prev, cur) in enumerate(zip([None, *stages["median"][:-1]], stages["median"])):
        label = f"{cur:,.0f}" + (f"\n{cur / prev:.2f}x" if prev else "")
        ax.annotate(label, (i, cur), xytext=(0, 4), textcoords="offset points", ha="center", fontsize=8)
    ax.set_xticks(list(x), stages.stage, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel(f"throughput ({unit})")
    ax.set_title(f"{workload}: one fix after another (median; whiskers: min-max over repetitions;\n"
                 "labels: throughput and the gain over the previous stage)", fontsize=10)
    return save(fig, path)


def time_breakdown(shares: pd.DataFrame, workload: str, path: Path) -> Path | None:
    """Stacked bars per variant: % of the profiled steps' time the GPU ran kernels, only copies,
    or nothing; and the % of the loop spent waiting for input (a marker)."""
    if shares.empty:
        return None
    sns.set_theme(style="whitegrid")
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(shares) + 1.5))
    left = pd.Series(0.0, index=shares.index)
    for col, color in zip(("kernels", "copies only", "idle"), sns.color_palette("Set2", 3)):
        ax.barh(shares.label, shares[col], left=left, color=color, label=f"GPU: {col}")
        left += shares[col]
    ax.scatter(shares["input wait"], shares.label, marker="D", color="black", zorder=3, label="loop waiting for input")
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of the profiled steps' time")
    ax.legend(fontsize=7, loc="lower right", framealpha=0.9)
    ax.set_title(f"{workload}: where the time goes (one profiled repetition; profiler in brackets)", fontsize=10)
    return save(fig, path)
