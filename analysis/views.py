"""Tidy views of the summary that the report's sections format: a chain's stages, where the time
goes per profiled variant, the loop's phases, a two-knob grid, the model FLOP/s against the peaks, what
the matrix took to run. Each returns data, never Markdown."""
from __future__ import annotations

import re

import pandas as pd

from analysis.tables import PHASES, row as metric


def stage_variants(cells: pd.DataFrame, chain: list[str], workload: str) -> list[tuple[str, str]]:
    """(stage label, the variant that measured it): upto-<fix>, or the variant with the same knobs."""
    out = [("baseline", "baseline")]
    for fix in chain:
        variant = f"upto-{fix}"
        c = cells[(cells.workload == workload) & (cells.variant == variant)]
        same = re.match(r"same knobs as (\S+) here", str(c.reason.iloc[0])) if len(c) else None
        out.append((f"+ {fix}", same.group(1) if same else variant))
    return out


def breakdown(summary: pd.DataFrame, workload: str) -> pd.DataFrame:
    """Per profiled variant (nsys preferred over torch): GPU kernel / copy-only / idle shares,
    input wait share, kernels per step, mean kernel time, sync calls per step, and the training
    thread's time in CUDA calls that wait for the GPU (nsys)."""
    rows = []
    for variant in summary[summary.workload == workload].variant.unique():
        for prof, busy_name in (("nsys", "gpu_busy"), ("torch", "gpu_busy_share")):
            busy = metric(summary, workload, variant, busy_name, prof)
            if busy is None:
                continue
            def get(name):
                r = metric(summary, workload, variant, name, prof)
                return None if r is None else r["median"]
            kern, step, inp = get("gpu_kernel_share"), get("profiled_step_time"), get("phase_input")
            rows.append({"label": f"{variant} [{prof}]", "variant": variant, "profiler": prof,
                         "kernels": kern, "copies only": max(0.0, busy["median"] - kern), "idle": 100 - busy["median"],
                         "input wait": 100 * inp / step if step else 0.0, "busy": busy["median"],
                         "kernels/step": get("kernels_per_step"), "mean kernel (us)": get("kernel_mean_duration"),
                         "sync calls/step": get("sync_calls_per_step"),
                         "host waits (ms/step)": get("gpu_wait_training_thread")})
            break
    return pd.DataFrame(rows)


def phases(summary: pd.DataFrame, workload: str, profiler: str) -> pd.DataFrame:
    """Per variant the profiler observed: ms per step in each loop phase, the rest of the step, the
    total, and the timing run's step beside it (`timed`: no tool's cost; None where not timed)."""
    rows = []
    for variant in sorted(summary[(summary.workload == workload) & (summary.profiler == profiler)].variant.unique()):
        step = metric(summary, workload, variant, "profiled_step_time", profiler)
        got = {p: metric(summary, workload, variant, f"phase_{p}", profiler) for p in PHASES}
        if step is None or any(r is None for r in got.values()):
            continue
        ms = {p: r["median"] for p, r in got.items()}
        timed = metric(summary, workload, variant, "step_time_mean", "timing")  # a mean, as the tool's total is
        rows.append({"variant": variant, **ms, "rest": max(0.0, step["median"] - sum(ms.values())), "total": step["median"],
                     "timed": None if timed is None else timed["median"]})
    return pd.DataFrame(rows)


def grid_values(summary, variants: pd.DataFrame, workload: str, grid: str, metric_name: str,
                profiler: str = "timing") -> pd.DataFrame:
    """A two-knob grid's metric (median over runs) as a table: the first knob down, the second across."""
    g = variants[(variants.workload == workload) & (variants.kind == "grid") & (variants.chain == grid)]
    cells = []
    for v, about in zip(g.variant, g.about):
        point = dict(kv.split("=") for kv in about.split())
        r = metric(summary, workload, v, metric_name, profiler)
        cells.append({**point, "value": None if r is None else r["median"]})
    df = pd.DataFrame(cells)
    if df.empty or df.value.isna().all() or len(df.columns) != 3:
        return pd.DataFrame()
    down, across = df.columns[:2]
    key = lambda s: s.astype(float)  # noqa: E731 - sort the sizes as numbers
    return df.pivot(index=down, columns=across, values="value").sort_index(key=key).sort_index(axis=1, key=key)


def mfu(summary, variants: pd.DataFrame, limits: dict, workload: str, sheet: dict | None = None) -> pd.DataFrame:
    """Per variant with a throughput: achieved model TFLOP/s (median, lo, hi), the matmul peak of
    its precision measured here, MFU against it (none where a run achieved more: `over`, the peak
    was measured low) and against the datasheet's peak (`sheet`)."""
    per_sample = limits.get("flops_per_sample", {}).get(workload)
    if not per_sample or "precision" not in variants:  # no record with knobs: every one set aside
        return pd.DataFrame()
    rows = []
    for v in variants[variants.workload == workload].itertuples():
        if getattr(v, "seq_len", 0) not in (0, None) and not pd.isna(v.seq_len):
            continue  # FLOPs per sample were counted at the workload's own sequence length
        r = metric(summary, workload, v.variant, "throughput")
        peak = limits["peak_tflops"].get(v.precision)
        if r is None or not peak:
            continue
        t = [x * per_sample / 1e12 for x in (r["median"], r["lo"], r["hi"])]
        listed = (sheet or {}).get("peak_tflops", {}).get(v.precision)
        rows.append({"variant": v.variant, "precision": v.precision, "peak": peak, "over": max(t) > peak,
                     **dict(zip(("achieved", "achieved_lo", "achieved_hi"), t)),
                     **dict(zip(("mfu", "mfu_lo", "mfu_hi"), (100 * x / peak for x in t))),
                     **dict(zip(("mfu_sheet", "mfu_sheet_lo", "mfu_sheet_hi"),
                                (100 * x / listed if listed else float("nan") for x in t)))})
    return pd.DataFrame(rows)


def run_cost(cells: pd.DataFrame) -> pd.DataFrame:
    """Per workload x profiler, summed over the runs that ran: runs, repetitions, seconds (and how
    many runs were timed), per repetition where every run was timed, first steps, setup, compiling;
    the last row, `all`, sums them (its per repetition: one repetition of every cell)."""
    ran = cells[~cells.status.isin(["skipped", "set aside"])]
    if "seconds" not in ran or ran.empty or ran[["seconds", "first_step_s"]].isna().all().all():
        return pd.DataFrame()
    rows = []
    for (w, prof), g in ran.groupby(["workload", "profiler"], sort=True):
        timed = g.seconds.notna().sum()
        rows.append({"workload": w, "profiler": prof, "runs": len(g), "repetitions": g.rep.nunique(),
                     "time (s)": g.seconds.sum() if timed else None, "timed": timed,
                     "per repetition (s)": g.seconds.sum() / g.rep.nunique() if timed == len(g) else None,
                     "first steps (s)": g.first_step_s.sum(min_count=1), "setup (s)": g.setup_s.sum(min_count=1),
                     "compiling (s)": g.compile_s.sum(min_count=1)})
    df = pd.DataFrame(rows)
    total = {"workload": "all", "profiler": "", "runs": df.runs.sum(), "repetitions": "", "time (s)": df["time (s)"].sum(),
             "timed": df.timed.sum(), "per repetition (s)": df["per repetition (s)"].sum(min_count=len(df)),
             "first steps (s)": df["first steps (s)"].sum(), "setup (s)": df["setup (s)"].sum(min_count=1),
             "compiling (s)": df["compiling (s)"].sum(min_count=1)}
    return pd.concat([df, pd.DataFrame([total])], ignore_index=True)
