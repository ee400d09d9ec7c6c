"""Where each workload stands against its target (analysis/targets.yaml), at its own batch size:
the numbers of the report's targets table; analysis/sections.py writes it."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from analysis.tables import PHASES, row as metric

TARGETS = Path(__file__).with_name("targets.yaml")


def batch_scaled(variants: pd.DataFrame | None) -> set[tuple[str, str]]:
    """(workload, variant) of the variants that change the workload's batch (batch_size, batch_scale)."""
    if variants is None or variants.empty:
        return set()
    v = variants.reindex(columns=["workload", "variant", "batch_size", "batch_scale"])
    scaled = (v.batch_size.fillna(0) != 0) | (v.batch_scale.fillna(1) != 1)
    return set(zip(v.workload[scaled], v.variant[scaled]))


def among(rows: pd.DataFrame, cells: set[tuple[str, str]]) -> pd.Series:
    """Which rows are of the (workload, variant) cells named."""
    return pd.Series([c in cells for c in zip(rows.workload, rows.variant)], index=rows.index, dtype=bool)


def target_value(t: dict, limits: dict) -> tuple[float | None, float | None]:
    """A target's value in its metric, and the MFU it implies against the measured matmul peak of
    its precision (bf16 where the target names none); None where limits.json lacks what it needs."""
    per_sample = limits.get("flops_per_sample", {}).get(t["workload"])
    peak = limits.get("peak_tflops", {}).get(t.get("precision", "amp-bf16"))
    if "mfu" in t:
        return (t["mfu"] * peak * 1e12 / per_sample, t["mfu"]) if per_sample and peak else (None, None)
    if t["metric"] != "throughput" or not per_sample or not peak:  # tokens/s: FLOPs are per sample
        return t["value"], None
    return t["value"], t["value"] * per_sample / (peak * 1e12)


def fastest(rows: pd.DataFrame):
    return None if rows.empty else rows.loc[rows["median"].idxmax()]


def against(summary: pd.DataFrame, gpus: set[str], loss_flagged: set[tuple[str, str]], variants=None,
            limits: dict | None = None, path: Path = TARGETS) -> list[dict]:
    """Each target whose GPU ran here: its value and implied MFU; optimized and the fastest
    single-GPU variant at the workload's own batch that trains (summary rows); the fastest variant
    that changes the batch (shown, never counted); the fastest step alone of optimized and its
    levers (profiler `step`: a ceiling no loader can lift); the optimized cell's GPU busy share
    and host phases, longest first (nsys)."""
    out, scaled = [], batch_scaled(variants)
    for t in yaml.safe_load(path.read_text()):
        w, m = t["workload"], t["metric"]
        value, mfu = target_value(t, limits or {})
        if not any(t["gpu"] in g for g in gpus) or value is None:
            continue
        ok = summary[(summary.workload == w) & (summary.metric == m) & (summary.profiler == "timing")
                     & (summary.status == "ok") & ~summary.variant.str.fullmatch(r"ddp\d+")]
        ok = ok[~among(ok, loss_flagged)]
        own = ok[~among(ok, scaled)]
        if own.empty:
            continue
        steps = summary[(summary.workload == w) & (summary.metric == m) & (summary.profiler == "step")
                        & (summary.status == "ok") & summary.variant.str.startswith("optimized")]
        phases = [(p, r) for p in PHASES if (r := metric(summary, w, "optimized", f"phase_{p}", "nsys")) is not None]
        out.append({"workload": w, "value": value, "mfu": mfu, "unit": own.iloc[0]["unit"], "reference": t["reference"],
                    "optimized": metric(summary, w, "optimized", m), "fastest": fastest(own),
                    "larger": fastest(ok[among(ok, scaled)]), "step": fastest(steps[~among(steps, scaled)]),
                    "busy": metric(summary, w, "optimized", "gpu_busy", "nsys"),
                    "phases": sorted(phases, key=lambda pr: -pr[1]["median"])})
    return out
