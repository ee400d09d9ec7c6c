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
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
