"""The report's first screen, computed from the tidy tables: what each workload trains at (baseline,
tf32, the article's chain, optimized), which fixes gained most on each side, and the caveats. Numbers only
here; analysis/report.py writes them."""
from __future__ import annotations

import re

import pandas as pd

from analysis.aggregate import unreliable
from analysis.paired import FLIP
from analysis.diagnosis import IDLE_SHARE, INPUT_SHARE
from analysis.tables import ratio_row, row

# The articles' case first, then the other reference workloads; any other workload after them.
FIRST = ("resnet50", "vit_b_16", "lstm", "transformer_lm")
ARTICLE_CHAINS = ("a002", "a000")  # a chain that repeats an article's own scenario


def workload_order(workloads) -> list[str]:
    present = set(workloads)
    return [w for w in FIRST if w in present] + sorted(present - set(FIRST))


def throughput_metric(summary: pd.DataFrame, workload: str) -> str:
    """token_throughput for a sequence workload (tokens/s), else throughput."""
    has = summary[(summary.workload == workload) & (summary.metric == "token_throughput")]
    return "token_throughput" if len(has) else "throughput"


def chain_end(variants: pd.DataFrame, summary: pd.DataFrame, workload: str) -> str | None:
    """The last stage that ran of the workload's article chain, if it has one."""
    v = variants[(variants.workload == workload) & variants.chain.isin(ARTICLE_CHAINS) & (variants.kind == "stage")]
    ran = set(summary[(summary.workload == workload) & (summary.status == "ok") & (summary.profiler == "timing")].variant)
    return next((n for n in v.sort_values("order", ascending=False).variant if n in ran), None)


REFERENCE = "tf32"  # the baseline with TF32 on, nearer PyTorch's defaults than the baseline (TF32 off)


def headline(summary: pd.DataFrame, ratios: pd.DataFrame, variants: pd.DataFrame) -> pd.DataFrame:
    """Per workload: baseline, tf32, the article's chain and optimized, each with its throughput (median,
    min, max over every run, as in every table) and its paired speedup over the baseline (a
    ratios.csv row)."""
    rows = []
    for w in workload_order(summary.workload.unique()):
        m = throughput_metric(summary, w)
        ends = [v for v in ("baseline", REFERENCE, chain_end(variants, summary, w), "optimized") if v]
        for v in ends:
            r = row(summary, w, v, m)
            if r is not None:
                rows.append({"workload": w, "variant": v, "metric": m, "unit": r["unit"],
                             **{k: r[k] for k in ("median", "lo", "hi", "n")},
                             "speedup": None if v == "baseline" else ratio_row(ratios, w, "baseline", v)})
    return pd.DataFrame(rows)


def article_settings(summary: pd.DataFrame, claims: list[dict], tested: pd.DataFrame | None = None) -> list[dict]:
    """Per claim that states how its article's setting differs from this suite's: the article's
    scenario (its first throughput test's two cells) as documented and as measured here (the
    medians of the runs its test pairs, from `tested`: claims.evaluate's rows; else the medians
    over every run), and how long this baseline waits for input."""
    out = []
    for c in claims:
        test = next((t for t in c["tests"] if t["kind"] == "ratio" and t["metric"] == "throughput"), None)
        if not c.get("setting") or test is None:
            continue
        m = throughput_metric(summary, test["workload"])
        here = [row(summary, test["workload"], v, m) for v in (test["before"], test["after"])]
        ends, paired_unit = paired_ends(tested, c["id"], test)
        wait = row(summary, test["workload"], test["before"], "input_wait_share")
        out.append({"claim": c["id"], "source": c["source"], "hardware": c["hardware"], "workload": test["workload"],
                    "cells": (test["before"], test["after"]), "documented": c["documented"], "setting": c["setting"],
                    "here": ends or (None if any(r is None for r in here) else [r["median"] for r in here]),
                    "paired": ends is not None,
                    "unit": paired_unit or (None if here[0] is None else here[0]["unit"]),
                    "wait": None if wait is None else wait["median"]})
    return out


def paired_ends(tested: pd.DataFrame | None, claim: str, test: dict) -> tuple[list[float] | None, str | None]:
    """The medians of a claim's test's two cells over the runs it pairs, and their unit; (None,
    None) where it pairs none."""
    if tested is None or tested.empty:
        return None, None
    t = tested[(tested.id == claim) & (tested.metric == test["metric"]) & (tested.before == test["before"])
               & (tested.after == test["after"])]
    if t.empty or pd.isna(t.before_value.iloc[0]) or pd.isna(t.after_value.iloc[0]):
        return None, None
    return [float(t.before_value.iloc[0]), float(t.after_value.iloc[0])], t.metric_unit.iloc[0]


GAIN_RULE = ("a step-side fix at the step alone (the ladder), else with the other fixes on (the ablation), else "
             "after a chain's earlier fixes (at the step alone first, for a step-side fix), else alone against the baseline")


def fix_gain(ratios: pd.DataFrame, variants: pd.DataFrame, workload: str, fix: str, side: str):
    """A fix's gain under GAIN_RULE, with its pair: the first candidate with an interval, else the
    first measured at all. A chain that changes the batch (sync32) is no basis for the workload's gain."""
    v = variants[variants.workload == workload]
    other = v[(v.chain != "ladder") & ~v.chain.isin(batch_chains(v))]
    steps = [(b, a) for b, a in chain_steps(other, fix) if b != "baseline"]
    candidates = [*((b, a, "step") for b, a in chain_steps(v[v.chain == "ladder"], fix)),
                  ("optimized", f"optimized-no-{fix}", "timing"),
                  *((b, a, "step") for b, a in steps), *((b, a, "timing") for b, a in steps), ("baseline", fix, "timing")]
    candidates = [c for c in candidates if side == "step" or c[2] != "step"]  # the step alone has no input side
    found = [inverted(r) if before == "optimized" else r for before, after, profiler in candidates
             if (r := ratio_row(ratios, workload, before, after, profiler)) is not None
             and r["status"] not in ("unpaired", "failed")]
    with_interval = [r for r in found if r["status"] in ("gain", "loss", "not established")]
    return (with_interval or found or [None])[0]


def batch_chains(v: pd.DataFrame) -> set[str]:
    """The chains with a stage that changes the batch (a fix or extra setting batch_size or batch_scale)."""
    sized = v[v.kind.isin(["fix", "extra"])]
    changes = pd.Series(False, index=sized.index)
    for knob, default in (("batch_size", 0), ("batch_scale", 1)):
        if knob in sized:
            x = pd.to_numeric(sized[knob], errors="coerce")
            changes |= x.notna() & (x != default)
    about = set(sized[changes].variant)
    return set(v[(v.kind == "stage") & v.about.isin(about)].chain)


def chain_steps(stages: pd.DataFrame, fix: str) -> list[tuple[str, str]]:
    """(the stage before, the stage) wherever a chain of `stages` adds `fix`; a chain's first stage
    is over the baseline."""
    out = []
    for _, chain in stages[stages.kind == "stage"].sort_values("order").groupby("chain", sort=False):
        names, about = list(chain.variant), list(chain.about)
        out += [(names[i - 1] if i else "baseline", names[i]) for i, a in enumerate(about) if a == fix]
    return out


STAGE = re.compile(r"^(?:(.+)-)?upto-(.+)$")  # <chain>-upto-<fix>; the unnamed chain's stages: upto-<fix>


def basis(r: pd.Series) -> str:
    """The basis of a fix_gain ratio, in a few words."""
    before, after = (STAGE.match(str(r[k])) for k in ("before", "after"))
    over = f", over +{before[2]}" if before else ""
    chain = "" if not after else f"{after[1]} chain" if after[1] else "stage by stage"
    if r["profiler"] == "step":  # a step-alone chain's stage over the one before it
        return ("step alone" if not after or after[1] == "ladder" else f"{chain}, step alone") + over
    if after:
        return chain + over
    return "with the others on" if r["after"] == "optimized" else "alone"


def inverted(r: pd.Series) -> pd.Series:
    """A paired ratio read the other way (after / before -> before / after): its median and interval
    invert, a gain becomes a loss."""
    return pd.Series({**r.to_dict(), "before": r["after"], "after": r["before"],
                                                   "median": 1 / r["median"], "lo": 1 / r["hi"], "hi": 1 / r["lo"],
                                                   "status": FLIP.get(r["status"], r["status"])})


def top_fixes(ratios: pd.DataFrame, variants: pd.DataFrame, workload: str, side: str, top: int = 3) -> list:
    """The `top` fixes of one side with the largest established gain (fix_gain), largest first; on the
    step side the ladder's stages that optimized does not apply (tf32) compete too, named as such."""
    v = variants[variants.workload == workload]
    fixes = list(v[(v.kind == "fix") & (v.side == side)].about)
    beside = [a for a in v[(v.kind == "stage") & (v.chain == "ladder")].about if a not in fixes] if side == "step" else []
    gains = [(f if f in fixes else f"{f} (not in optimized)", g) for f in fixes + beside
             if (g := fix_gain(ratios, variants, workload, f, side)) is not None and g["status"] == "gain"]
    return sorted(gains, key=lambda fg: -fg[1]["median"])[:top]


def caveats(summary: pd.DataFrame, cells: pd.DataFrame, study: dict | None = None) -> dict:
    """What a reader must know before trusting a number: cells that failed (in any run), timing
    cells resting on one run, how many sets of runs the tables mix, and the study's workloads
    with no record here."""
    timing = summary[(summary.profiler == "timing") & (summary.metric == "throughput")]
    failed = pd.concat([summary[summary.status.isin(["failed", "set aside"])], unreliable(summary)])
    sets = cells.run_set.dropna().unique() if "run_set" in cells else []
    return {"failed": sorted({f"{r.workload}/{r.variant} ({r.profiler})" for r in failed.itertuples()}),
            "one_run": sorted({f"{r.workload}/{r.variant}" for r in timing[(timing.status == "ok") & (timing.n == 1)].itertuples()}),
            "run_sets": len(sets),
            "unmeasured": sorted(set((study or {}).get("workloads", [])) - set(summary.workload)),
            "throttled": throttled(summary)}


def throttled(summary: pd.DataFrame) -> list[tuple[str, float]]:
    """Timing cells whose GPU was held below its clocks in at least THROTTLED % of samples: ("w/v", %)."""
    held = summary[(summary.profiler == "timing") & (summary.metric == "throttled_share") & (summary["median"] >= THROTTLED)]
    return [(f"{r.workload}/{r.variant}", r.median) for r in held.sort_values("median", ascending=False).itertuples()]


THROTTLED = 50  # % of a run's power samples with a power or thermal clock-event reason: a caveat
WIDE = 5.0  # % of its median: a paired throughput ratio's 95 % interval wider than this is a caveat


def wide_ratios(summary: pd.DataFrame, ratios: pd.DataFrame) -> dict:
    """The paired throughput ratios (3 pairs or more) whose interval is wider than WIDE % of their
    median, split by whether the host sets the pace of either cell (its loop waits for input
    INPUT_SHARE % of the window or more, or NVML finds the GPU idle IDLE_SHARE % or more) or not."""
    r = ratios[(ratios.metric == "throughput") & (ratios.n >= 3) & ratios["median"].notna()]
    wide = r[(r.hi - r.lo) / r["median"] * 100 > WIDE]
    t = summary[summary.profiler == "timing"].pivot_table(index=["workload", "variant"], columns="metric", values="median")
    none = pd.Series(float("nan"), index=t.index)
    host = t[(t.get("input_wait_share", none) >= INPUT_SHARE) | (t.get("gpu_util", none) <= 100 - IDLE_SHARE)].index
    paced = wide.apply(lambda x: (x.workload, x.before) in host or (x.workload, x.after) in host, axis=1).astype(bool)
    name = lambda d: [f"{x.workload}: {x.before} -> {x.after}" for x in d.itertuples()]  # noqa: E731
    return {"paired": len(r), "host": name(wide[paced]), "other": name(wide[~paced])}


def fix_knobs(variants: pd.DataFrame) -> dict[str, list[tuple[str, object]]]:
    """Each fix and extra variant, with the knobs it sets away from the baseline (of the first
    workload where it sets any), in the matrix's order."""
    if "kind" not in variants or "side" not in variants:
        return {}
    knobs = list(variants.columns[variants.columns.get_loc("side") + 1:])
    out = {}
    for r in variants[variants.kind.isin(["fix", "extra"])].sort_values(["order", "workload"]).itertuples(index=False):
        base = variants[(variants.workload == r.workload) & (variants.variant == "baseline")]
        if out.get(r.variant) or base.empty:
            continue
        b, v = base.iloc[0], pd.Series(r._asdict())
        out[r.variant] = [(k, v[k]) for k in knobs if not pd.isna(v[k]) and v[k] != b[k]]
    return out


VERDICTS = {"holds": "holds", "holds (direction only": "holds in direction (no size documented)",
            "holds in direction, larger": "holds in direction, larger than documented",
            "holds in direction, smaller": "holds in direction, smaller than documented",
            "not established": "not established", "does not hold": "does not hold"}


def tally(verdicts: pd.Series) -> dict[str, int]:
    """How many tests got each verdict (grouped as VERDICTS names them); the rest have none."""
    said = verdicts.map(lambda v: next((VERDICTS[k] for k in sorted(VERDICTS, key=len, reverse=True)
                                        if v.startswith(k)), "no verdict"))
    order = [*dict.fromkeys(VERDICTS.values()), "no verdict"]
    counts = said.value_counts()
    return {k: int(counts[k]) for k in order if k in counts}
