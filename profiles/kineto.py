"""Parse a torch.profiler (Kineto) Chrome trace into tidy metrics.

The trace is read once into a DataFrame of complete events; each analysis is a function of it.
GPU analyses need kernel events (a CUDA run); the phase analysis (input / forward / backward /
optimizer, from the harness's record_function ranges) works on a CPU trace too.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd

from profiles import timeline

PHASES = ("input", "forward", "backward", "optimizer", "sync")
GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


def load(path: str | Path) -> pd.DataFrame:
    """Complete ('X') events: name, cat, ts and dur in microseconds. Names the file when it is not a trace."""
    path = Path(path)
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError, EOFError) as e:
        raise ValueError(f"{path}: not a readable torch.profiler trace ({type(e).__name__}: {e})") from e
    df = pd.DataFrame([e for e in events if e.get("ph") == "X"], columns=["name", "cat", "ts", "dur"])
    return df.astype({"ts": float, "dur": float})


def window(df: pd.DataFrame) -> tuple[float, float, int]:
    """(start, end, steps) of the profiled steps (the ProfilerStep#N ranges)."""
    steps = df[(df.cat == "user_annotation") & df.name.str.startswith("ProfilerStep#")]
    if steps.empty:
        raise ValueError("trace has no ProfilerStep ranges: was the profiler stepped?")
    return steps.ts.min(), (steps.ts + steps.dur).max(), len(steps)


def union_us(intervals: pd.DataFrame) -> float:
    """Total length of the union of [ts, ts + dur) intervals."""
    return timeline.union(intervals.ts, intervals.ts + intervals.dur)


def phase_times(df: pd.DataFrame, steps: int) -> dict[str, float]:
    """Host time per step (ms) in each phase range the harness marks."""
    ann = df[df.cat == "user_annotation"]
    return {p: ann[ann.name == p].dur.sum() / 1e3 / steps for p in PHASES}


def gpu_breakdown(df: pd.DataFrame, start: float, end: float) -> dict[str, float]:
    """Shares (%) of the window with a kernel running, a copy running, and nothing running."""
    inside = df[df.cat.isin(GPU_CATS) & (df.ts >= start) & (df.ts < end)]
    span = end - start
    busy = union_us(inside)
    return {"kernel": 100 * union_us(inside[inside.cat == "kernel"]) / span,
            "copy": 100 * union_us(inside[inside.cat != "kernel"]) / span,
            "busy": 100 * busy / span, "idle": 100 * (span - busy) / span}


def top_kernels(df: pd.DataFrame, n: int = 10) -> list[dict]:
    """The n kernels with the most GPU time over the profiled steps."""
    start, end, steps = window(df)
    k = df[(df.cat == "kernel") & (df.ts >= start) & (df.ts < end)]
    total = float(k.dur.sum()) or 1.0  # share: % of all kernel time
    g = k.groupby("name").dur.agg(total="sum", calls="count").sort_values("total", ascending=False)
    return [{"name": name, "ms_per_step": r.total / 1e3 / steps, "calls_per_step": r.calls / steps,
             "share": 100 * r.total / total} for name, r in g.head(n).iterrows()]


def metrics(path: str | Path) -> list[dict]:
    df = load(path)
    start, end, steps = window(df)
    rows = [("profiled_steps", steps, "steps"), ("profiled_step_time", (end - start) / 1e3 / steps, "ms")]
    rows += [(f"phase_{p}", ms, "ms/step") for p, ms in phase_times(df, steps).items()]
    kernels = df[(df.cat == "kernel") & (df.ts >= start) & (df.ts < end)]
    if not kernels.empty:
        rows += [(f"gpu_{k}_share", v, "%") for k, v in gpu_breakdown(df, start, end).items()]
        rows += [("kernels_per_step", len(kernels) / steps, "kernels"),
                 ("kernel_mean_duration", kernels.dur.mean(), "us")]
    return [{"metric": m, "value": float(v), "unit": u} for m, v, u in rows]
