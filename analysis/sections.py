"""The report's sections built from the profiles: the stage-by-stage case, where the time goes,
kernels (with ncu), the achieved FLOP/s against the measured peak, the profilers' cost. Each
returns Markdown (tables, figure links) from the tidy tables; nothing is typed by hand."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import aggregate, diagnosis, figures, targets
from analysis.summary import throughput_metric
from analysis.tables import CI, fmt, num, ratio_row, ratio_text, row as metric, spread, table
from analysis.views import breakdown, grid_values, mfu, phases, run_cost, stage_variants


def chain_section(summary, ratios, variants: pd.DataFrame, cells: pd.DataFrame, workload: str, chains) -> str:
    """One chain's table (`chains` a name), or several chains' in one with a column naming each."""
    chains = [chains] if isinstance(chains, str) else list(chains)
    rows = [{**({"chain": c} if len(chains) > 1 else {}), **r}
            for c in chains for r in chain_rows(summary, ratios, variants, cells, workload, c, start=len(chains) == 1)]
    return table(pd.DataFrame(rows)) if rows else ""


def chain_rows(summary, ratios, variants: pd.DataFrame, cells: pd.DataFrame, workload: str, chain: str,
               start: bool = False) -> list[dict]:
    """A chain's stages that were measured (variants.csv), each with its throughput (a stage the matrix
    measured as another variant shows that one's; one after stages not measured names their fixes
    too), its paired gain over the stage shown before it and over the baseline (the profiler its
    chain runs under); with `start`, the baseline it starts from first."""
    same = aggregate.aliases(cells)
    if "chain" not in variants:
        return []
    stages = variants[(variants.workload == workload) & (variants.chain == chain)].sort_values("order")
    r = ratios[(ratios.workload == workload) & ratios.after.isin(stages.variant) & (ratios.metric == "throughput")]
    if stages.empty or r.empty:
        return []
    profiler = r.profiler.iloc[0]
    rows, before, prev = [], "baseline", "baseline"  # prev: the stage before in ratios.csv, shown or not
    if start and (b := metric(summary, workload, "baseline", "throughput", profiler)) is not None:
        rows.append({"stage": "baseline", "variant": "baseline", f"throughput ({profiler})": spread(b),
                     "over the stage before (paired)": "", f"over the baseline's {profiler} run (paired)": ""})
    unmeasured = []  # the fixes of stages not measured since the last one shown: the next adds them too
    for v, step in zip(stages.variant, stages.about):
        measured = same.get((workload, v), v)  # the variant with this stage's knobs that ran
        t = metric(summary, workload, measured, "throughput", profiler)
        if t is None:
            unmeasured.append(step)
            continue
        if measured == same.get((workload, before), before):
            prev = v  # a stage that changes nothing here: not shown, its successor's ratio is over it
            continue
        added, unmeasured = ", ".join([*unmeasured, step]), []
        rows.append({"stage": f"+ {added}", "variant": v if measured == v else f"{v} (= {measured})",
                     f"throughput ({profiler})": spread(t),
                     "over the stage before (paired)": "" if before == "baseline" and not rows else
                     ratio_text(ratio_row(ratios, workload, prev, v, profiler)),
                     f"over the baseline's {profiler} run (paired)": ratio_text(ratio_row(ratios, workload, "baseline", v, profiler))})
        before = prev = v
    return rows


def stages_section(summary, ratios, cells, chain, workload, out: Path) -> str:
    """The `stages` chain: each stage's throughput and its paired gain over the stage before it
    and over the baseline (ratios.csv, by the stage's own name), with its two ceilings where they
    were measured (the loader alone, the step alone); the waterfall of medians, ceilings marked."""
    rows, before = [], None
    for (label, variant), stage in zip(stage_variants(cells, chain, workload), ["baseline", *(f"upto-{f}" for f in chain)]):
        r = metric(summary, workload, variant, "throughput")
        if r is None:
            continue
        loader, step = (metric(summary, workload, variant, "throughput", p) for p in ("input", "step"))
        rows.append({"stage": label, "variant": variant, "median": r["median"], "lo": r["lo"], "hi": r["hi"], "unit": r["unit"],
                     "loader": None if loader is None else loader["median"], "step alone": None if step is None else step["median"],
                     "step": "" if before is None else ratio_text(ratio_row(ratios, workload, before, stage)),
                     "total": "" if before is None else ratio_text(ratio_row(ratios, workload, "baseline", stage))})
        before = stage
    if len(rows) < 2:
        return ""
    df = pd.DataFrame(rows)
    shown = pd.DataFrame({"stage": df.stage, "variant": df.variant,
                          f"throughput ({df.unit[0]})": [fmt(m, lo, hi) for m, lo, hi in zip(df["median"], df.lo, df.hi)],
                          "gain over the stage before (paired)": df.step, "over the baseline (paired)": df.total,
                          "loader alone": df.loader.map(lambda x: "" if pd.isna(x) else num(x)),
                          "step alone": df["step alone"].map(lambda x: "" if pd.isna(x) else num(x))})
    fig = figures.waterfall(df, workload, df.unit[0], out / "figures" / f"stages-{workload}.png")
    return table(shown) + (f"\n![{workload} stage by stage](figures/{fig.name})\n" if fig else "")


BUSY, WAITS = 80, 30  # %: a GPU this busy while the host waits this long for input: the wait is a copy behind the GPU


def time_section(summary, workload, out: Path | None, names: list[str] | None = None) -> str:
    """Where the time goes, for the profiled variants among `names` (all where None), with the
    time-per-step figures where `out` is given."""
    only = (lambda f: f) if names is None else (lambda f: f if f.empty else f[f.variant.isin(names)])  # noqa: E731
    df = breakdown(summary, workload)
    if names is not None and not df.empty:  # in the order of `names`
        df = only(df).sort_values("variant", key=lambda v: v.map(names.index), kind="stable")
    if df.empty:
        return ""
    shown = df[["variant", "profiler", "busy", "kernels", "copies only", "idle", "input wait", "kernels/step",
                "mean kernel (us)", "sync calls/step", "host waits (ms/step)"]].dropna(axis=1, how="all").rename(columns={
                    "busy": "GPU busy (%)", "kernels": "kernels (%)", "copies only": "copies only (%)",
                    "idle": "idle (%)", "input wait": "host waits for input (%)"})
    shown = shown.map(lambda v: "" if v is None or (isinstance(v, float) and pd.isna(v)) else
                      (num(v) if isinstance(v, float) else v))
    behind = df[(df.busy >= BUSY) & (df["input wait"] >= WAITS)].variant.tolist()
    text = table(shown) + (f"\nIn {', '.join(behind)} the GPU is busy {BUSY:g} % of the window or more while the host "
                           f"waits for input {WAITS:g} % or more: the host runs ahead, and its blocking copy of the next "
                           "batch waits behind the GPU's queued work, so that wait is GPU time, not the loader's.\n" if behind else "")
    if out is None:
        return text
    by_nsys = only(phases(summary, workload, "nsys"))
    by_torch = only(phases(summary, workload, "torch"))  # torch's chart: only the variants nsys did not trace
    by_torch = by_torch if by_torch.empty or by_nsys.empty else by_torch[~by_torch.variant.isin(by_nsys.variant)]
    figs = {p: figures.time_per_step(d, workload, p, out / "figures" / f"time-{workload}-{p}.png")
            for p, d in (("nsys", by_nsys), ("torch", by_torch))}
    return text + "".join(f"\n![{workload} time per step ({p})]({f.parent.name}/{f.name})\n"
                                  for p, f in figs.items() if f)


TIME_NOTE = ("**Where the time goes**: the bars are the training thread's time in each phase (its NVTX ranges), "
             "not the GPU's: the host runs ahead of the GPU and a phase is long where the host blocks, on the loader (input), on the "
             "GPU's unfinished work (sync, or any phase that reads a result: under AMP fp16 the GradScaler reads its "
             "overflow flag in the optimizer phase, so that phase holds the wait); the table's GPU busy and idle "
             "shares say what the GPU did. Each profiler's run is its own: its step differs from the timing run's by "
             "the tool's cost and, where the loop waits on its loader, by the loader's pace from run to run (the "
             "appendix's profiler cost), so the totals differ.\n")


def host_calls_section(calls: pd.DataFrame, workload: str, top: int = 5) -> str:
    """The CUDA API calls that took the host the most time per step, per variant: each call's median
    over the variant's nsys runs (a call a run did not list counts in the runs that did)."""
    c = calls[calls.workload == workload]
    if not len(c):
        return ""
    c = c.assign(call=c.name.str.replace(r"_v\d+$", "", regex=True)).groupby(
        ["variant", "call", "thread", "waits"], as_index=False).agg(
        per_step=("per_step", "median"), ms_per_step=("ms_per_step", "median"), runs=("rep", "size"))
    c = c.sort_values(["variant", "ms_per_step"], ascending=[True, False]).groupby("variant", sort=False).head(top)
    shown = pd.DataFrame({"variant": c.variant, "call": c.call, "thread": c.thread,
                          "waits for the GPU": c.waits.map({True: "yes", False: ""}), "calls/step": c.per_step.map(num),
                          "host ms/step": c.ms_per_step.map(num), "nsys runs": c.runs})
    return (f"Top {top} CUDA API calls per variant by host time (nsys, median over its runs; thread `training` runs the loop, the "
            "others by their names, `pt_autograd_0` being autograd's backward thread (`other`: a thread of a "
            "record made before names were read); a call marked as waiting for the GPU is a synchronize or a "
            "device-to-host copy; a copy to the GPU from pageable memory (no pin_memory) can wait for the work queued "
            "before it too (the driver may sync the stream to stage it), but is not marked, since its host time holds "
            "the copy itself as well; calls on different threads overlap):\n\n" + table(shown))


NCU_NOTE = ("sm_pct is ncu's SM throughput, the busiest of the SM's units, so on a matrix product whose busiest "
            "unit is the tensor pipe it equals tensor_pct")
KERNELS_NOTE = ("**Kernels of the baseline and optimized**: the top kernels of each by nsys (share: % of all kernel "
                "time; mean duration) with Nsight Compute's measurements of each (one step; % of peak; occupancy in % "
                f"of the maximum warps; {NCU_NOTE}), blank where ncu did not measure the kernel.\n")


def kernels_section(kernels: pd.DataFrame, workload: str, top: int = 5, variants=None, merged: bool = False) -> str:
    """The top kernels per profiled variant (nsys, else torch.profiler) and ncu's measurements of
    them; `variants`: only these (None: every profiled variant); `merged`: one table, ncu's columns
    beside the timeline's rows they measured."""
    k = kernels[(kernels.workload == workload) & (kernels.variant.isin(variants) if variants else True)]
    k = k.sort_values("rep", kind="stable").drop_duplicates(["variant", "profiler", "rank"])  # a cell's first run
    prof = next((p for p in ("nsys", "torch") if ((k.profiler == p) & (k["rank"] <= top)).any()), None)
    sub = k[(k.profiler == prof) & (k["rank"] <= top)].assign(kernel=lambda d: told_apart(d.name.str.slice(0, 70), d.variant))
    n = k[k.profiler == "ncu"]
    shown = lambda df: table(df.map(lambda v: "" if pd.isna(v) else num(v) if isinstance(v, float) else v))  # no ncu: blank
    if merged and len(n) and prof == "nsys":
        ncu = n.drop_duplicates(["variant", "mangled"])[["variant", "mangled", "sm_pct", "tensor_pct", "memory_pct",
                                                         "achieved_occupancy", "theoretical_occupancy", "bound"]]
        timeline = sub[["variant", "rank", "kernel", "mangled", "share", "mean_us"]]
        both = timeline.merge(ncu, on=["variant", "mangled"], how="left")  # the kernel ncu measured, from any run
        return shown(both[["variant", "rank", "kernel", "share", "mean_us", "sm_pct", "tensor_pct", "memory_pct",
                           "achieved_occupancy", "theoretical_occupancy", "bound"]])
    parts = [] if prof is None else [f"Top {top} kernels per profiled variant ({prof}, its first run; share: % of all kernel time):\n\n"
                                     + shown(sub[["variant", "rank", "kernel", "share", "ms_per_step", "calls_per_step", "mean_us"]])]
    if len(n):
        cols = ["variant", "name", "share", "duration_us", "sm_pct", "memory_pct", "dram_pct", "achieved_occupancy",
                "theoretical_occupancy", "registers", "tensor_pct", "bound"]
        n = n.assign(name=n.name.str.slice(0, 60))[[c for c in cols if c in n]]
        parts.append("Nsight Compute on the top kernels (one measured step; % of peak; occupancy in % of the "
                     f"maximum warps; {NCU_NOTE}):\n\n" + shown(n))
    return "\n".join(parts)


def told_apart(names: pd.Series, variants: pd.Series) -> pd.Series:
    """Kernel names as shown, a second kernel of one variant under the same shown name numbered
    (cuDNN's `Kernel2` templates differ only in their mangled names)."""
    if names.empty:  # no kernels: an empty column reads as object, which some pandas' strings do not add to
        return names
    nth = names.groupby([variants, names]).cumcount()
    return names.where(nth == 0, names + " (" + (nth + 1).astype(str) + ")")


def over_optimized(summary, ratios, workload: str, names: list[str], extra) -> list[dict]:
    """Rows for variants measured against `optimized`: throughput, the paired ratio to optimized's
    with its 95 % interval (ratios.csv), and what `extra(variant, row, ref)` adds (ref: optimized's
    row, None where optimized did not train: its ratios then say failed)."""
    unit = throughput_metric(summary, workload)  # tokens/s where the workload counts them
    ref = metric(summary, workload, "optimized", unit)
    rows = []
    for v in ["optimized", *names]:
        r = metric(summary, workload, v, unit)
        if r is None:
            continue
        rows.append({"variant": v, f"throughput ({r['unit']})": spread(r),
                     f"vs optimized (paired, {CI})": "" if v == "optimized" else
                     ratio_text(ratio_row(ratios, workload, "optimized", v)), **extra(v, r, ref)})
    return rows if len(rows) > (ref is not None) else []


def loss_notes(summary, workload: str):
    """variant -> its timing runs' loss against the baseline's, marked **check** where it is worse
    by more than the tolerance and with how often it failed where some runs did not train."""
    flags = set(aggregate.loss_flags(summary[summary.workload == workload]).variant)
    shaky = aggregate.unreliable(summary[(summary.workload == workload) & (summary.profiler == "timing")])
    failed = {v: f" **{how}**" for v, how in zip(shaky.variant, shaky.how_often)}
    return lambda v: (spread(metric(summary, workload, v, "loss_vs_baseline")) + (" **check**" if v in flags else "")
                      + failed.get(v, ""))


def tuning_section(summary, ratios, workload: str, names: list[str], predicts: dict[str, str] | None = None) -> str:
    """The levers past the articles' fixes (optimized+<lever>), each against optimized; with
    `predicts` (variant -> the gain it predicts), the prediction and whether its paired ratio bore it out."""
    note = loss_notes(summary, workload)

    def said(v: str) -> dict:
        if not predicts or v == "optimized":
            return {}
        return {"predicts": predicts.get(v, "(none stated)"), "as predicted": outcome(ratio_row(ratios, workload, "optimized", v))}
    rows = over_optimized(summary, ratios, workload, names,
                          lambda v, r, ref: {**said(v), "loss vs baseline (%)": note(v)})
    if not rows:
        return ""
    df = pd.DataFrame(rows).fillna("")
    if "predicts" in df:  # the prediction first, its outcome beside the ratio that decides it
        cols = [c for c in df.columns if c not in ("predicts", "as predicted")]
        df = df[["variant", "predicts", *cols[1:3], "as predicted", *cols[3:]]]
    return table(df)


def outcome(r) -> str:
    """A lever's paired ratio against its prediction of a gain: yes (an established gain), no (an
    established loss), or why neither."""
    if r is None:
        return "not measured"
    return {"gain": "yes", "loss": "no: slower"}.get(r["status"], r["status"])


def ceilings_section(summary, workload: str, names: list[str]) -> str:
    """Each variant's two ceilings against its training throughput: the loader alone (profiler
    `input`) and the step alone (profiler `step`), with the share of each the training reaches
    (near 100% of one: bound by that side)."""
    rows = []
    for v in names:
        loader, step = (metric(summary, workload, v, "throughput", p) for p in ("input", "step"))
        if loader is None and step is None:
            continue
        unit = (loader if loader is not None else step)["unit"]
        rows.append({"variant": v, f"loader alone ({unit})": spread(loader), f"step alone ({unit})": spread(step),
                     f"training ({unit})": spread(metric(summary, workload, v, "throughput")),
                     "% of the loader's": spread(metric(summary, workload, v, "input_ceiling_used", "input")),
                     "% of the step's": step_share(metric(summary, workload, v, "step_ceiling_used", "step"))})
    return table(pd.DataFrame(rows)) if rows else ""


INCONSISTENT = 103.0  # % of its own step alone above which a training run cannot be right (noise allows ~1-2 %)


def step_share(r) -> str:
    """The share of its step alone a training run reaches; above INCONSISTENT it is flagged: the
    loop cannot train faster than its own step on a batch already on the GPU, so one of the two
    measurements is wrong (the step alone timed under other clocks, contention or a cache state)."""
    if r is None or r["median"] <= INCONSISTENT:
        return spread(r)
    return f"{spread(r)} **inconsistent: faster than its step alone**"


def targets_section(summary, gpus: set[str], loss_flagged: set[tuple[str, str]], variants: pd.DataFrame | None = None,
                    limits: dict | None = None, path: Path = targets.TARGETS) -> str:
    """The targets table (analysis/targets.py computes it): each as % of the target."""
    rows = []
    for t in targets.against(summary, gpus, loss_flagged, variants, limits, path):
        def of_target(r) -> str:
            return f"{spread(r)} ({100 * r['median'] / t['value']:.0f}%)"
        def named(r) -> str:
            return "" if r is None else f"{r.variant}: {of_target(r)}"
        host = ", ".join(f"{p} {num(r['median'])}" for p, r in t["phases"])
        rows.append({"workload": t["workload"], "target": f"{num(t['value'])} {t['unit']}", "reference": t["reference"],
                     "MFU it implies (measured peak)": "" if t["mfu"] is None else f"{100 * t['mfu']:.0f}%",
                     "optimized": of_target(t["optimized"]) if t["optimized"] is not None else "",
                     "fastest that trains": named(t["fastest"]),
                     "what holds the fastest": diagnosis.holding(summary, t["workload"], t["fastest"].variant),
                     "fastest step alone (no input)": named(t["step"]),
                     "larger batch (not counted)": named(t["larger"]),
                     "optimized: GPU busy (%, nsys)": num(t["busy"]["median"]) if t["busy"] is not None else "",
                     "optimized: host ms/step by phase (nsys)": host})
    return table(pd.DataFrame(rows)) if rows else ""


def scaling_section(summary, ratios, workload: str, names: list[str]) -> str:
    """Data-parallel scaling: optimized on 1 GPU and ddp<N> on N, with the efficiency
    (throughput / (N x one GPU's)) and the time in NCCL's all-reduce (nsys, rank 0)."""
    def scale(v, r, ref):
        n = int(v[3:]) if v.startswith("ddp") else 1
        ar = metric(summary, workload, v, "allreduce_time", "nsys")
        share = metric(summary, workload, v, "allreduce_share", "nsys")
        return {"GPUs": n, "scaling efficiency (%)": "" if ref is None else f"{100 * r['median'] / (n * ref['median']):.0f}",
                "all-reduce (ms/step, nsys)": num(ar["median"]) if ar is not None else "",
                "all-reduce (% of kernel time)": num(share["median"]) if share is not None else ""}
    rows = over_optimized(summary, ratios, workload, names, scale)
    return table(pd.DataFrame(rows)) if rows else ""


def peak_note(limits: dict) -> str:
    """How the peaks were measured, where limits.json says (older ones do not)."""
    peak = limits.get("peak")
    if not peak:
        return "measured on this machine"
    repeats = max(len(r) for r in peak["repeats"].values())
    return f"measured on this machine once for this set of runs ({peak['measured']}), the best of {repeats} repeats"


DATASHEETS = Path(__file__).with_name("datasheets.yaml")


def datasheet(gpus: set[str], path: Path = DATASHEETS) -> dict | None:
    """The datasheet entry of the GPU these runs used (one model per results folder), or None."""
    import yaml
    return next((d for d in yaml.safe_load(path.read_text()) if any(d["gpu"] in g for g in gpus)), None)


def limits_section(summary, variants: pd.DataFrame, limits: dict, workload: str, sheet: dict | None = None) -> str:
    """Achieved model FLOP/s per variant against the matmul peak of its precision measured on this
    machine, and against the datasheet's peak of the GPU (`sheet`, where the GPU has an entry)."""
    df = mfu(summary, variants, limits, workload, sheet)
    if df.empty:
        return ""
    trio = lambda c: [fmt(*x) if not pd.isna(x[0]) else "" for x in zip(df[c], df[c + "_lo"], df[c + "_hi"])]  # noqa: E731
    shown = pd.DataFrame({"variant": df.variant, "precision": df.precision, "achieved (TFLOP/s)": trio("achieved"),
                          "measured peak (TFLOP/s)": df.peak.map(num),
                          "MFU vs measured peak (%)": ["**peak inconsistent**" if o else m
                                                       for o, m in zip(df.over, trio("mfu"))],
                          "MFU vs datasheet (%)": trio("mfu_sheet")})
    per_sample = limits["flops_per_sample"][workload]
    head = (f"Model FLOPs (forward + backward, torch.utils.flop_counter): {per_sample / 1e9:,.1f} GFLOP per sample, "
            "counted at the workload's own sizes (a variant of another sequence length has no row). "
            f"Measured peak: a large matmul in the variant's precision, {peak_note(limits)}. "
            + (f"Datasheet: {sheet['source']}.\n\n" if sheet else "Datasheet: none listed for this GPU.\n\n"))
    over = df[df.over]
    tail = (f"\n**Peak inconsistent** ({', '.join(dict.fromkeys(over.precision))}): {', '.join(over.variant)} "
            "achieved more model FLOP/s than the matmul peak measured for their precision, so that peak was measured "
            "low (other work on the machine while it was measured) and gives no MFU.\n" if len(over) else "")
    return head + table(shown) + tail


OVERHEAD_HEAD = ("Slowdown under the tool: the throughput of the timing run of the same set and repetition over the "
                 "profiled run's, less one, in % (0: no cost; 100: half the throughput; negative: the profiled run was "
                 "the faster, as happens where a cell waits on its loader, whose pace varies from run to run by more "
                 "than nsys costs). ncu replays each kernel it profiles dozens of times, so its cells run many times "
                 "slower by design.\n\n")


def overhead_section(summary: pd.DataFrame) -> str:
    o = summary[summary.metric == "profiler_overhead"]
    if o.empty:
        return ""
    cost = summary[summary.metric == "profiled_cell_time"].set_index(["workload", "variant", "profiler"])["median"]
    rows = [{"workload": r.workload, "variant": r.variant, "profiler": r.profiler,
             "slowdown under the tool (%)": num(r["median"]),
             "cell's wall time under the tool (s)": num(cost.get((r.workload, r.variant, r.profiler), float("nan")))
             if (r.workload, r.variant, r.profiler) in cost.index else ""} for _, r in o.iterrows()]
    return OVERHEAD_HEAD + table(pd.DataFrame(rows))


METER_HEAD = ("Every timing run meters the GPU: NVML's energy counter read at the measured window's ends, and power, "
              "clocks, temperature and clock-event reasons sampled every 50 ms (profiles/energy.py says how). "
              "What it costs: cells run again without the meter (profiler `bare`; `step-bare` for the step alone, "
              "where no input side varies), paired by repetition; and, in one process with nothing else changed, the "
              "step alone with the sampling switched on and off in alternate windows of steps (profiler `meter-cost`, "
              "each neighbouring pair of windows a pair). The throughput with the meter over without (1: no "
              "cost). How far the two energy figures agree: the power samples "
              "integrated over the window against the counter's energy (the tables use the counter), in %. The samples "
              "read NVML's instantaneous power where the driver gives it; its default reading averages over the last "
              "second (Ampere and newer, but GA100), which lags a measured window of a second or two.\n\n")


MEASURED = {"timing": "end to end", "step": "the step alone",  # a meter-cost ratio's metered profiler
            aggregate.IN_RUN: "the step alone, sampling on and off in one run"}


def meter_section(metrics: pd.DataFrame, ratios: pd.DataFrame) -> str:
    """What the energy meter costs the cells run without it too, and how the sampled power agrees
    with the energy counter, per workload and power reading over its timing runs."""
    cost, agree = ratios[ratios.profiler.isin(aggregate.METER)], agreement(metrics)
    rows = [{"workload": r.workload, "cell": r.before, "measured": MEASURED[r.profiler.split("/")[0]],
             "throughput with the meter / without (paired)": ratio_text(r)} for _, r in cost.iterrows()]
    per = [{"workload": w, "power samples": how, "cells": g.variant.nunique(), "runs": len(g),
            "median of the cells' medians (%)": num(g.groupby("variant").value.median().median()),
            "range over every run (%)": f"{num(g.value.min())} .. {num(g.value.max())}"}
           for (w, how), g in agree.groupby(["workload", "how"])]
    if not rows and not per:
        return ""
    by = agreement_by_window(agree).rename(columns={
        "how": "power samples", "window": "measured window", "median": "median absolute difference (%)",
        "largest": "largest absolute difference (%)"})
    return (METER_HEAD + (table(pd.DataFrame(rows)) + "\n" if rows else "")
            + ("Sampled power against the counter (sampled over counter, less one):\n\n" + table(pd.DataFrame(per))
               + "\nThe same by the length of the measured window, every workload's runs:\n\n"
               + table(by.map(lambda v: num(v) if isinstance(v, float) else v)) if per else ""))


RUN = ["workload", "variant", "profiler", "rep", "run_set"]


def agreement(metrics: pd.DataFrame) -> pd.DataFrame:
    """Each timing run's sampled-over-counter energy (%), with the power reading its samples used
    (profiles/energy.py records it per run; runs made before it sampled NVML's 1 s average) and its
    measured window (s: the counter's energy over the mean power)."""
    timed = metrics[metrics.profiler == "timing"]
    wide = timed.pivot_table(index=RUN, columns="metric", values="value", aggfunc="first")
    out = wide.reindex(columns=["energy_sampled_vs_counter", "power_instant", "energy", "mean_power"])
    out = out.dropna(subset=["energy_sampled_vs_counter"]).reset_index()
    return out.assign(value=out.energy_sampled_vs_counter, window=out.energy / out.mean_power,
                      how=out.power_instant.map(lambda x: "instantaneous" if x == 1 else "NVML's 1 s average"))


WINDOWS = [0, 0.5, 2, float("inf")]  # s: the measured windows the agreement is shown by


def agreement_by_window(agree: pd.DataFrame) -> pd.DataFrame:
    """How far sampled and counter energy differ (|%|) by the measured window's length, per reading:
    the samples (every 50 ms) resolve a short window coarsely."""
    bins = pd.cut(agree.window, WINDOWS, right=False, labels=["under 0.5 s", "0.5 to 2 s", "2 s or more"])
    g = agree.assign(dev=agree.value.abs(), window=bins).groupby(["how", "window"], observed=True).dev
    return g.agg(runs="count", median="median", largest="max").reset_index()


def run_sets_section(cells: pd.DataFrame) -> str:
    """Each set of runs the tables rest on (GPU, commit, day: a property of its records), numbered in
    the order they began, what it holds, and the command that makes such a set again at that commit."""
    ran = cells[cells.status.isin(["ok", "failed"]) & cells.run_set.notna()]
    if ran.empty:
        return ""
    rows = []
    first = lambda kv: str(kv[1].started.min()) if "started" in kv[1] and kv[1].started.notna().any() \
        else kv[0].split("|")[2]  # noqa: E731 - the set's first start, else its day
    for n, (rset, g) in enumerate(sorted(ran.groupby("run_set"), key=first), 1):
        gpu, commit, day = rset.split("|")
        presets = sorted(g.preset.dropna().unique()) if "preset" in g else []
        workloads = sorted(g.workload.unique())
        command = "; ".join(remake(presets[0], w, g[g.workload == w]) for w in workloads) if len(presets) == 1 else ""
        rows.append({"set": n, "day": day, "commit": commit[:12], "GPU": gpu[:12], "preset": ", ".join(presets),
                     "workloads": ", ".join(workloads), "variants": g.variant.nunique(),
                     "runs (failed)": f"{len(g)} ({(g.status == 'failed').sum()})", "made again by": command})
    return ("A set of runs is its records' GPU (its UUID), commit and day; a ratio pairs runs of one set only. "
            "The commands, one per workload, make such a set again from a checkout of its commit: the set's own "
            "variants under its own profilers (a profiler observes the cells its preset names, so a command may "
            "run a few cells more than the set holds).\n\n" + table(pd.DataFrame(rows)))


def remake(preset: str, workload: str, runs: pd.DataFrame) -> str:
    """The command that runs one workload's cells of a set again: its variants under its profilers."""
    variants = ",".join(sorted(runs.variant.unique()))
    profilers = ",".join(sorted(runs.profiler.unique()))
    return (f"`snakemake --cores 1 --config preset={preset} \"workloads=[{workload}]\" \"variants=[{variants}]\" "
            f"\"profilers=[{profilers}]\"`")


COST_HEAD = ("Each run's own clock: from the cell's start to its record (under nsys or ncu, the whole process "
             "under the tool), of which its first step (compilation, autotuning, the loader's first batch) and "
             "its setup (model, optimizer, loader); `compiling`, of the first steps, those in which torch.compile built "
             "graphs rather than loading them. A sweep also pays once for starting its process. Runs "
             "recorded before the pipeline timed them count in `runs` and their first steps alone. The last row's "
             "`per repetition` is one repetition of every cell, one after another.\n\n")


def steps_alone(ran: pd.DataFrame, cells: pd.DataFrame) -> str:
    """What the timing runs spent in their steps alone (warm-up and measured steps: their time less
    the first step and the setup), which no cache or stage can shorten; and what the matrix's timing
    runs (every repetition of every cell this machine runs) need at that average, on one GPU."""
    t = ran[(ran.profiler == "timing") & ran[["seconds", "first_step_s", "setup_s"]].notna().all(axis=1)]
    if t.empty:
        return ""
    steps = t.seconds - t.first_step_s - t.setup_s
    n = ((cells.profiler == "timing") & (cells.status != "skipped")).sum()
    return (f"\nThe timing runs' steps alone (warm-up and measured steps: each run's time less its first step "
            f"and its setup): {num(steps.sum())} s over {len(t)} runs, {num(steps.mean())} s a run on average. "
            f"The matrix holds {n} timing runs on this machine (its cells times their repetitions, less those "
            f"it skips here): at that average their steps alone take {num(n * steps.mean())} s one after another "
            f"on one GPU, before any setup, first step, compile stage or profiled cell.\n")


def compile_stage(compiles: pd.DataFrame) -> str:
    """The compile stage (trainperf/precompile.py), per run of it (its records' `stage_ts`; the git
    commit for records without one): the cache folders it built, for which workloads, at most how
    many at once, its wall time, the processes' time summed; the folders that failed and why."""
    if compiles.empty:
        return ""
    lines = []
    run = compiles.stage_ts.fillna(compiles.git_commit).fillna("unknown")
    for _, g in compiles.groupby(run, sort=False):
        ends = g.start_ts + g.seconds
        at_once = max(((g.start_ts <= t) & (ends > t)).sum() for t in g.start_ts)
        wall = g.stage_s.max() if g.stage_s.notna().any() else ends.max() - g.start_ts.min()
        failed = g[g.status != "ok"]
        lines.append(f"\nThe compile stage (commit `{g.git_commit.dropna().iloc[0] if g.git_commit.notna().any() else 'unknown'}`, "
                     f"{', '.join(sorted(g.workload.unique()))}) built {len(g) - len(failed)} of {len(g)} torch.compile "
                     f"cache folders before the first sweep, up to {at_once} at once: {num(wall)} s of wall time, "
                     f"{num(g.seconds.sum())} s of its processes' time summed; "
                     f"per folder {num(g.seconds.median())} s [{num(g.seconds.min())}, {num(g.seconds.max())}].\n")
        lines += [f"- `{r.key}` ({r.workload}/{r.variant}) failed: {r.reason}; its cells compile in their first step\n"
                  for r in failed.itertuples()]
    return "".join(lines)


def cost_section(cells: pd.DataFrame, compiles: pd.DataFrame | None = None) -> str:
    """What running the matrix took, per workload x profiler (the last row: one repetition of everything)."""
    ran = cells[~cells.status.isin(["skipped", "set aside"])]
    df = run_cost(cells)
    if df.empty:
        return ""
    df["time (s)"] = [("" if not t else num(x) + ("" if t == n else f" ({t} runs)"))
                      for x, t, n in zip(df["time (s)"], df.timed, df.runs)]
    stage = compile_stage(compiles) if compiles is not None else ""
    return COST_HEAD + table(df.drop(columns="timed")) + steps_alone(ran, cells) + compile_floor(ran) + stage


def compile_floor(ran: pd.DataFrame) -> str:
    """What torch.compile's cold compiles cost: each set of traced knobs (one cache folder) compiles
    once on a machine and the runs after it load its graphs, so their sum is what a fresh machine
    pays at least."""
    cold = ran[ran.compile_s.notna()]
    if cold.empty:
        return ""
    per_set = cold.groupby("compile_key").compile_s.median()  # a set compiled on several machines: its median
    return (f"\n`compiling`: the first steps of the {len(cold)} runs that compiled graphs (rather than loading "
            f"them from the cache), over {len(per_set)} distinct sets of traced knobs (torch.compile cache folders). "
            f"A fresh machine compiles each set once, before any cell with it measures a step: "
            f"{num(per_set.median())} s [{num(per_set.min())}, {num(per_set.max())}] per set here, "
            f"{num(per_set.sum())} s for the {len(per_set)}.\n")


def grid_section(summary, variants: pd.DataFrame, workload: str, grid: str) -> str:
    """The grid's throughput at each point, with ncu's SM throughput and achieved occupancy beside
    it where ncu ran, in one table."""
    tokens = metric(summary, workload, "optimized", "token_throughput") is not None
    rate = grid_values(summary, variants, workload, grid, "token_throughput" if tokens else "throughput", "timing")
    if rate.empty:
        return ""
    def ncu(name):  # blank at every point ncu did not measure
        g = grid_values(summary, variants, workload, grid, name, "ncu")
        return rate * float("nan") if g.empty else g.reindex_like(rate)
    sm, occ = ncu("sm_throughput"), ncu("achieved_occupancy")
    shown = rate.map(lambda v: "" if pd.isna(v) else num(v)).astype(object)
    for i in rate.index:
        for j in rate.columns:
            if not pd.isna(sm.at[i, j]):
                shown.at[i, j] += f" (SM {num(sm.at[i, j])} %, occupancy {num(occ.at[i, j])} %)"
    down, across = rate.index.name, rate.columns.name
    shown = shown.reset_index().rename(columns={down: f"{down} \\ {across}"})
    shown.columns = [str(c) for c in shown.columns]
    return (f"{'tokens/s' if tokens else 'samples/s'} at each point; in brackets, where Nsight Compute ran, its SM "
            "throughput (% of peak) and achieved occupancy, weighted by the time of the kernels it profiled:\n\n" + table(shown)
            + "\nEach point is a variant of its own, the grid's knobs set on its base variant; the median over every "
            "run of the point, whichever set of runs (a claim's ratio pairs one set's runs, so it can differ from the "
            "ratio of two medians here).\n")
