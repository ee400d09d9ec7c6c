"""Diagnose -> prescribe -> verify, generated: for each workload's baseline, a bottleneck class drawn
from its profiles by fixed rules, the variant that targets it, and that variant's measured effect.

The rules, first match wins (thresholds below):
1. input-bound   the loop waits for input for INPUT_SHARE % of the time or more, the loader's part
                 the larger -> workers (dali); copy-bound: the copy to the GPU's part -> pinned-async
2. sync-bound    the GPU is idle for IDLE_SHARE % or more while the host syncs every step -> lazy-sync
3. launch-bound  the GPU is idle for IDLE_SHARE % or more and kernels are short (mean below
                 SHORT_KERNEL_US) -> compile (fewer, fused kernels)
4. memory-bound / compute-bound / latency-bound kernels: the GPU is busy (on a timeline, or without
                 one by NVML's utilization, which says that it is busy but not why it idles); ncu's class of the top
                 kernels, weighted by their share of kernel time -> amp (tensor cores, half the bytes);
                 without ncu data: GPU-bound (kernel class not measured) -> amp
The verdict: "confirmed" when the prescribed variant's paired speedup is above CONFIRM even at the low end
of its spread, "not confirmed" otherwise.
"""
from __future__ import annotations

import pandas as pd

from analysis.tables import CI, ratio_row, ratio_text, row, spread

INPUT_SHARE = 30.0
IDLE_SHARE = 20.0
SHORT_KERNEL_US = 20.0
STEP_SHARE = 90.0  # % of its step alone a variant trains at, from which its own step is what holds it
CONFIRM = 1.05
LEAD = 1.5  # a bound class short of this multiple of the next one's kernel time leads only narrowly
RULES = (f"Rules, first match wins: **input-bound** when the loop waits for input (the loader, then the batch's copy "
         f"to the GPU) {INPUT_SHARE:g}% of the time or more and the loader's part is the larger (prescribe `workers`); "
         f"**copy-bound** when the copy's part is (`pinned-async`); **sync-bound** when the GPU idles {IDLE_SHARE:g}% or more while the host "
         f"synchronizes every step (`lazy-sync`); **launch-bound** when it idles that much and kernels average under "
         f"{SHORT_KERNEL_US:g} us (`compile`); otherwise the GPU is busy (on its timeline, or without one by NVML's "
         f"utilization) and ncu's bound class of the top kernels, "
         f"weighted by kernel time, decides (memory- or compute-bound: `amp`; latency-bound: `compile`; no ncu data: GPU-bound, `amp`; "
         f"**narrowly** where that class holds less than {LEAD:g} times the next one's time). "
         f"**confirmed**: the prescribed variant's paired speedup exceeds {CONFIRM:g}x even at the low end of its 95 % interval.\n")
PRESCRIPTION = {"input-bound": "workers", "copy-bound": "pinned-async", "sync-bound": "lazy-sync", "launch-bound": "compile",
                "memory-bound kernels": "amp", "compute-bound kernels": "amp", "latency-bound kernels": "compile",
                "GPU-bound (kernel class not measured)": "amp"}


NARROW = ", narrowly"


def value(summary: pd.DataFrame, workload: str, variant: str, metric: str, profilers=("timing",)) -> float | None:
    """The median of a metric, from the first of `profilers` that measured it."""
    for p in profilers:
        r = row(summary, workload, variant, metric, p)
        if r is not None:
            return float(r["median"])
    return None


def kernel_class(kernels: pd.DataFrame, workload: str) -> tuple[str, str] | None:
    """The bound class that carries most of the baseline's top-kernel time, from ncu."""
    k = kernels[(kernels.workload == workload) & (kernels.variant == "baseline") & (kernels.profiler == "ncu")]
    if k.empty or "bound" not in k:
        return None
    weight = k.groupby("bound")["share"].sum().sort_values(ascending=False)
    split = ", ".join(f"{bound} {share:.1f} %" for bound, share in weight.items())
    narrow = len(weight) > 1 and weight.iloc[0] < LEAD * weight.iloc[1]
    return f"{weight.index[0]}-bound kernels{NARROW if narrow else ''}", f"ncu's top kernels by bound class: {split} of all kernel time"


def holding(summary: pd.DataFrame, workload: str, variant: str) -> str:
    """What holds a variant where it stands, from its own measurements: its own step (it trains at
    STEP_SHARE % of its step alone or more, where the `step` profiler ran: no loader holds it back,
    whatever time the loop spends in the loader's next batch; its host work where the GPU still
    idles IDLE_SHARE % or more), the input (the loop waits for
    batches INPUT_SHARE % of the time or more), the host (the GPU idles IDLE_SHARE % or more:
    nsys's busy share where it ran, else NVML's utilization of the timing cell), or the GPU's own
    work; with the share of its step alone it reaches where the `step` profiler ran."""
    wait = value(summary, workload, variant, "input_wait_share")
    busy = value(summary, workload, variant, "gpu_busy", ("nsys",)) or value(summary, workload, variant, "gpu_util")
    step = value(summary, workload, variant, "step_ceiling_used", ("step",))
    ceiling = f"; trains at {step:.0f}% of its step alone" if step is not None else ""
    if step is not None and step >= STEP_SHARE:
        waits = f" (its waits for batches, {wait:.0f}% of the time, cost it little)" if wait and wait >= INPUT_SHARE else ""
        if busy is not None and 100 - busy >= IDLE_SHARE:  # the step itself leaves the GPU idle
            return (f"its own step's host work: trains at {step:.0f}% of its step alone{waits}, and the GPU "
                    f"idles {100 - busy:.0f}% of the time: the host issues the step slower than the GPU runs it")
        gpu = "" if busy is None else f"; in training the GPU is busy {busy:.0f}% of the time"
        return f"its own step: trains at {step:.0f}% of its step alone{waits}{gpu}"
    if wait is not None and wait >= INPUT_SHARE:
        return f"input: waits for batches {wait:.0f}% of the time{ceiling}"
    if busy is None:
        return "unknown: no GPU utilization measured"
    if 100 - busy >= IDLE_SHARE:
        return f"host: the GPU idles {100 - busy:.0f}% of the time{ceiling}"
    return f"GPU work: the GPU is busy {busy:.0f}% of the time{ceiling}"


def classify(summary: pd.DataFrame, kernels: pd.DataFrame, workload: str) -> tuple[str, str]:
    """(bottleneck class, the evidence) for the workload's baseline."""
    prof = ("nsys", "torch")
    wait = value(summary, workload, "baseline", "input_wait_share")
    busy = value(summary, workload, "baseline", "gpu_busy", ("nsys",)) or value(
        summary, workload, "baseline", "gpu_busy_share", ("torch",))
    nvml = value(summary, workload, "baseline", "gpu_util")  # no timeline: NVML's sampled utilization
    syncs = value(summary, workload, "baseline", "sync_calls_per_step", ("nsys",))
    mean_us = value(summary, workload, "baseline", "kernel_mean_duration", prof)
    loader, copy = (value(summary, workload, "baseline", m) for m in ("loader_wait_share", "copy_wait_share"))
    if loader is not None and copy is not None and loader + copy >= INPUT_SHARE:
        said = f"waits for the loader {loader:.0f}% of the time, for the copy to the GPU {copy:.0f}%"
        return ("input-bound" if loader >= copy else "copy-bound"), said
    if loader is None and wait is not None and wait >= INPUT_SHARE:  # a record without the split
        return "input-bound", f"waits for input {wait:.0f}% of the time"
    source = ""
    if busy is None and nvml is not None and 100 - nvml < IDLE_SHARE:  # busy: no timeline needed to say so
        busy, source = nvml, " (NVML, no timeline)"
    if busy is None:
        return "unknown", "no GPU timeline (run the torch or nsys profiler on the baseline)"
    idle = 100 - busy
    if idle >= IDLE_SHARE and syncs and syncs >= 1:
        return "sync-bound", f"GPU idle {idle:.0f}% with {syncs:.0f} synchronizing calls per step"
    if idle >= IDLE_SHARE and mean_us is not None and mean_us < SHORT_KERNEL_US:
        return "launch-bound", f"GPU idle {idle:.0f}%, mean kernel {mean_us:.1f} us"
    found = kernel_class(kernels, workload)
    if found:
        return found[0], f"GPU busy {busy:.0f}%{source}; {found[1]}"
    return "GPU-bound (kernel class not measured)", f"GPU busy {busy:.0f}%{source}; no ncu data for the kernels' class"


def diagnose(summary: pd.DataFrame, kernels: pd.DataFrame, ratios: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for workload in sorted(summary.workload.unique()):
        label, evidence = classify(summary, kernels, workload)
        fix = PRESCRIPTION.get(label.removesuffix(NARROW))
        r = ratio_row(ratios, workload, "baseline", fix) if fix else None
        if r is None or pd.isna(r.get("lo")):
            effect = ratio_text(r)
            verdict = ("not run here" if r is None else f"unverified ({r['status']})") if fix \
                else "no rule matched"
        else:
            effect = ratio_text(r)
            verdict = "confirmed" if r["lo"] > CONFIRM else "not confirmed"
        rows.append({"workload": workload, "baseline bottleneck": label, "evidence": evidence,
                     "prescribed": fix or "", f"measured speedup (paired, {CI})": effect, "verdict": verdict})
    return pd.DataFrame(rows)
