"""Figures for the report, drawn from summary.csv alone (seaborn on matplotlib's Agg backend)."""
from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.patches
import matplotlib.ticker
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402


STATUS_COLORS = {"gain": "#2a9d8f", "loss": "#e76f51", "not established": "#adb5bd", "too few pairs": "#ced4da"}
KIND_COLORS = {"fix": "#2a9d8f", "extra": "#8ab17d", "optimized": "#264653", "ablation": "#e9c46a", "lever": "#f4a261",
               "stage": "#6d597a", "grid": "#b56576", "ddp": "#457b9d", "article": "#9c6644", "other": "#adb5bd"}
# a kind's name in a legend, where its own says too little
KIND_NAMES = {"extra": "measured beside (not in optimized)", "article": "the article's chain of fixes"}
# a loop phase's name in a legend: where the host blocks, what it waits for
PHASE_NAMES = {"input": "input (loader, copy)", "sync": "sync (host waits for the GPU)", "rest": "rest of the step"}
# what a ratio's status does to its bar: established ones solid, the rest pale and hatched
STATUS_STYLE = {"gain": {}, "loss": {}, "not established": {"alpha": 0.45, "hatch": "//"},
                "too few pairs": {"alpha": 0.45, "hatch": ".."}}


def speedups(ratios: pd.DataFrame, workload: str, path: Path, names: list[str],
             kinds: dict[str, str] | None = None) -> Path | None:
    """Horizontal bars: each of `names`' paired throughput ratio to the baseline, coloured by the
    variant's kind (`kinds`), whiskers its 95 % interval; a ratio that is not established is pale
    and hatched, one with too few pairs for an interval is dotted, has no whiskers and says n."""
    rows = speedup_rows(ratios, workload, names)
    rows = rows[rows.status.isin(list(STATUS_STYLE))].sort_values("median")
    if rows.empty:
        return None
    kinds = kinds or {}
    sns.set_theme(style="whitegrid")
    height = 0.32 * len(rows) + 1.9
    fig, ax = plt.subplots(figsize=(7.5, height))
    for i, r in enumerate(rows.itertuples()):  # each bar drawn from 1x, leftward for a loss
        ax.barh(i, r.median - 1.0, left=1.0, color=KIND_COLORS.get(kinds.get(r.after, "other"), KIND_COLORS["other"]),
                edgecolor="white", **STATUS_STYLE[r.status])
    has = rows.lo.notna()
    y = range(len(rows))
    ax.errorbar(rows["median"][has], [i for i, h in zip(y, has) if h], fmt="none", ecolor="black", capsize=2, lw=0.8,
                xerr=[rows["median"][has] - rows.lo[has], rows.hi[has] - rows["median"][has]])
    ax.set_yticks(list(y), rows.after)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xscale("log")
    edges = rows.hi.fillna(rows["median"]).clip(lower=1.0)
    labels = [f"{value:.3g}x" + (f" (n={int(n)}, no interval)" if s == "too few pairs" else
                                 " (not established)" if s == "not established" else "")
              for value, n, s in zip(rows["median"], rows.n, rows.status)]
    for i, (label, edge) in enumerate(zip(labels, edges)):
        ax.annotate(label, (edge, i), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    left = min(0.8, rows.lo.fillna(rows["median"]).min() / 1.25)
    ax.set_xlim(left, label_room(edges, labels, left, ax.get_window_extent().width * 72 / fig.dpi))
    ax.set_xlabel("throughput over the baseline's (paired ratio, x, log scale)")
    ticks = [t for t in (0.5, 1, 2, 3, 5, 10, 20, 50, 100) if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # an axis short of a decade labels its minor ticks
    ranges = has.any() and (rows.n[has] <= 3).any()  # a bootstrap over 3 pairs spans their range
    whiskers = ("; whiskers: 95 % interval" + (", from 3 pairs their range" if ranges else "") if has.any()
                else "; no interval: too few pairs")
    ax.set_title(f"{workload}: speedup over the baseline\n(median of paired ratios{whiskers})", fontsize=10)
    shown = dict.fromkeys(kinds.get(v, "other") for v in rows.after)
    handles = [matplotlib.patches.Patch(color=KIND_COLORS.get(k, KIND_COLORS["other"]), label=KIND_NAMES.get(k, k))
               for k in shown]
    handles += [matplotlib.patches.Patch(facecolor="white", edgecolor="grey", label=s, hatch=STATUS_STYLE[s]["hatch"])
                for s in ("not established", "too few pairs") if s in set(rows.status)]
    fig.legend(handles=handles, fontsize=7, loc="lower center", ncol=len(handles), frameon=False)  # below: no bar hides it
    fig.tight_layout(rect=(0, 0.3 / height, 1, 1))
    return save(fig, path, tight=False)


def label_room(edges, labels, left: float, width_pt: float, char_pt: float = 4.8) -> float:
    """The right end of a log axis from `left` at which each label, drawn after its bar's end,
    still fits inside the frame (8-point text, about `char_pt` a character)."""
    need = []
    for edge, label in zip(edges, labels):
        f = min(0.8, (8 + char_pt * len(label)) / width_pt)  # the label's share of the axis' width
        need.append((np.log10(edge) - f * np.log10(left)) / (1 - f))
    return 10 ** (max(need) + 0.02)


def speedup_rows(ratios: pd.DataFrame, workload: str, names: list[str]) -> pd.DataFrame:
    """The paired throughput ratios to the baseline (timing runs) of `names`, whatever their status."""
    return ratios[(ratios.workload == workload) & (ratios.before == "baseline") & (ratios.profiler == "timing")
                  & (ratios.metric == "throughput") & ratios.after.isin(names)]


def save(fig, path: Path, tight: bool = True) -> Path:
    if tight:
        fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def waterfall(stages: pd.DataFrame, workload: str, unit: str, path: Path) -> Path | None:
    """Throughput after each cumulative fix (columns: stage, median, lo, hi; the ceilings `loader`
    and `step alone` marked where measured); the paired gains between stages are in the table beside it."""
    if len(stages) < 2:
        return None
    sns.set_theme(style="whitegrid")
    fig, ax = plt.subplots(figsize=(8, 4))
    x = range(len(stages))
    ax.bar(x, stages["median"], color=sns.color_palette("crest", len(stages)),
           yerr=[stages["median"] - stages.lo, stages.hi - stages["median"]], capsize=3)
    for i, (cur, top) in enumerate(zip(stages["median"], stages.hi)):
        ax.annotate(f"{cur:,.0f}", (i, top), xytext=(0, 4), textcoords="offset points", ha="center", fontsize=8)
    for col, style in (("loader", {"color": "black", "label": "the loader alone (input ceiling)"}),
                       ("step alone", {"color": "#e76f51", "label": "the step alone (step ceiling)"})):
        if col in stages and stages[col].notna().any():
            has = stages[col].notna()
            ax.scatter([i for i, h in zip(x, has) if h], stages[col][has], marker="_", s=900, linewidths=2.5,
                       zorder=3, **style)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", markerscale=0.35)
    ax.set_xticks(list(x), stages.stage, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel(f"throughput ({unit})")
    ax.set_title(f"{workload}: one fix after another\n(median throughput; whiskers: min-max over repetitions)",
                 fontsize=10)
    return save(fig, path)


def time_per_step(phases: pd.DataFrame, workload: str, profiler: str, path: Path) -> Path | None:
    """Stacked bars per variant: the host's time per step (ms) in each phase of the loop (NVTX
    ranges: input, forward, backward, optimizer, sync) and the rest of the step; the total beside.
    Steps five times shorter than the slowest get a panel and a scale of their own."""
    if phases.empty:
        return None
    phases = phases.sort_values("total", ascending=False).reset_index(drop=True)
    slow = phases.total > phases.total.max() / 5
    groups = [g for g in (phases[slow], phases[~slow]) if not g.empty]
    cols = [c for c in phases.columns if c not in ("variant", "total", "timed")]
    colors = dict(zip(cols, sns.color_palette("Set2", len(cols))))
    sns.set_theme(style="whitegrid")
    height = 0.42 * len(phases) + 2.05 + 0.5 * len(groups)
    fig, axes = plt.subplots(len(groups), 1, figsize=(8, height), squeeze=False,
                             gridspec_kw={"height_ratios": [len(g) + 0.6 for g in groups]})
    for ax, g in zip(axes[:, 0], groups):
        stacked(ax, g, cols, colors)
        ax.set_xlabel("host time per step (ms)", fontsize=9)
    seen = {PHASE_NAMES.get(c, c) for c in cols if (phases[c].fillna(0) > 0.002 * phases.total).any()}  # a phase no bar shows: no legend entry
    handles = [(h, c) for h, c in zip(*axes[0, 0].get_legend_handles_labels()) if c in seen]
    fig.legend(*zip(*handles), fontsize=8, loc="lower center", ncol=3, frameon=False)
    scales = "\n(the lower panel on a scale of its own: steps under a fifth of the slowest)" if len(groups) > 1 else ""
    fig.suptitle(f"{workload}: host time per step by phase under {profiler}\n(timed: the mean step of its timing "
                 f"runs, no tool, as the tables show){scales}", fontsize=10)
    fig.tight_layout(rect=(0, (0.1 + 0.22 * -(-len(handles) // 3)) / height, 1, 1))  # room for the legend's rows
    return save(fig, path, tight=False)


def stacked(ax, phases: pd.DataFrame, cols: list[str], colors: dict) -> None:
    """One panel of time_per_step: the slowest variant on top, each bar's total beside it."""
    left = pd.Series(0.0, index=phases.index)
    for col in cols:
        ax.barh(phases.variant, phases[col], left=left, color=colors[col], label=PHASE_NAMES.get(col, col))
        left += phases[col]
    ms = lambda x: f"{x:,.0f} ms" if x >= 1000 else f"{x:.3g} ms"  # noqa: E731
    timed = phases.timed if "timed" in phases else pd.Series(None, index=phases.index)
    for i, (total, t) in enumerate(zip(phases.total, timed)):
        ax.annotate(ms(total) + ("" if t is None or pd.isna(t) else f" (timed: {ms(t)})"), (total, i), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ax.set_xlim(0, phases.total.max() * 1.45)
    ax.invert_yaxis()
