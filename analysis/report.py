"""results/<machine>/REPORT.md from the tidy tables: environment, speedups, ablations, claims,
failed and skipped cells. Every number comes from summary.csv; nothing is typed by hand."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from analysis import aggregate, claims, diagnosis, figures, sections
from analysis.tables import fmt, ratio_row, ratio_text, table

CHAINS = {"a002": "article 002's ResNet-50 case, its fixes in its order",
          "a000": "article 000's ViT case, its DataLoader then DALI",
          "ladder": "the step alone (a batch held on the GPU), the GPU-side fixes one after another"}
ENV_KEYS = ["gpu", "driver", "cuda", "torch", "torchvision", "cudnn", "dali", "nsys_version", "ncu_version", "cpu",
            "cpu_count", "python", "git_commit", "host", "gpu_uuid", "dates", "runs", "profilers"]


def cell(summary: pd.DataFrame, workload: str, variant: str, metric: str) -> str:
    r = summary[(summary.workload == workload) & (summary.variant == variant) & (summary.metric == metric)
                & (summary.profiler == "timing")]
    return fmt(*r.iloc[0][["median", "lo", "hi"]]) if len(r) else ""


def variants_table(summary: pd.DataFrame, ratios: pd.DataFrame, workload: str, names: list[str]) -> str:
    unit = summary[(summary.workload == workload) & (summary.metric == "throughput")].unit
    note = sections.loss_notes(summary, workload)
    rows = [{"variant": v, f"throughput ({unit.iloc[0] if len(unit) else ''})": cell(summary, workload, v, "throughput"),
             "speedup (paired, 95 % CI)": "" if v == "baseline" else ratio_text(ratio_row(ratios, workload, "baseline", v)),
             "step (ms)": cell(summary, workload, v, "step_time_mean"),
             "input wait (%)": cell(summary, workload, v, "input_wait_share"),
             "peak memory (GiB)": cell(summary, workload, v, "peak_memory") or cell(summary, workload, v, "peak_host_memory"),
             "loss vs baseline (%)": note(v)}
            for v in names if cell(summary, workload, v, "throughput")]
    return table(pd.DataFrame(rows)) if rows else "(no variant ran)\n"


def environment(envs: list[dict]) -> str:
    rows = [{"": k, **{f"run set {i + 1}": e.get(k, "") for i, e in enumerate(envs)}} for k in ENV_KEYS
            if any(k in e for e in envs)]  # a field older records lack is left out
    return table(pd.DataFrame(rows))


def claims_section(summary: pd.DataFrame, tables: dict) -> str:
    c = claims.evaluate(tables["metrics"], tables["cells"])
    c["measured here (95 % CI, n)"] = ["" if pd.isna(v) else f"{fmt(v, v if pd.isna(lo) else lo, v if pd.isna(hi) else hi)} "
                                       f"(n={int(n)})" for v, lo, hi, n in zip(c.value, c.lo, c.hi, c.n)]
    c["verdict"] = [f"{v}: {w}" if isinstance(w, str) and w and "no interval" not in v else v
                    for v, w in zip(c.verdict, c.why)]  # a verdict that says it has no interval says why
    return claims.RULE + "\n" + table(c[["id", "source", "documented", "pair", "why this pair",
                                            "measured here (95 % CI, n)", "verdict"]])


def read(out: Path, name: str) -> pd.DataFrame:
    path = out / name
    return pd.read_csv(path) if path.is_file() and path.stat().st_size > 1 else pd.DataFrame(
        columns=["workload", "variant", "profiler", "rank", "name", "share", "status", "reason"])


def by_kind(variants: pd.DataFrame, workload: str, summary: pd.DataFrame) -> dict[str, list[str]]:
    """The workload's variants in the matrix's order (variants.csv), grouped by kind; 'all' holds
    every one, those without a record of their knobs (skipped everywhere) last."""
    v = variants[variants.workload == workload].sort_values(["order", "variant"])
    present = set(summary[summary.workload == workload].variant)
    groups = {"all": [n for n in v.variant if n in present] + sorted(present - set(v.variant))}
    for kind, rows in v.groupby("kind", sort=False):
        groups[kind] = [n for n in rows.variant if n in present]
    return groups


def workload_part(summary, tables: dict, workload: str, out: Path) -> list[str]:
    """Every section of one workload: variants, ablation, stages, time, kernels, limits."""
    ok = summary[summary.status == "ok"]
    kinds = by_kind(tables["variants"], workload, summary)
    names = kinds["all"]
    hidden = {*kinds.get("ablation", []), *kinds.get("stage", []), *kinds.get("ddp", [])}
    parts = [f"## {workload}\n", "### Every variant against the baseline\n",
             variants_table(summary, tables["ratios"], workload, [v for v in names if v not in hidden])]
    ablations = [v for v in names if v == "optimized" or v in kinds.get("ablation", [])]
    if len(ablations) > 1:
        parts += ["### Ablation: optimized with one fix left out\n",
                  sections.tuning_section(summary, tables["ratios"], workload, ablations[1:])]
    fig = figures.speedups(tables["ratios"], workload, out / "figures" / f"speedup-{workload}.png",
                           [v for v in names if v not in hidden])
    if fig:
        parts.append(f"![{workload} speedups](figures/{fig.name})\n")
    v = tables["variants"]
    chain = list(dict.fromkeys(v[(v.chain == "stages")].sort_values("order").about)) if "chain" in v else []
    for title, text in (
            ("Past the articles: levers on top of optimized", sections.tuning_section(summary, tables["ratios"], workload, kinds.get("lever", []))),
            ("Data-parallel scaling", sections.scaling_section(summary, tables["ratios"], workload, kinds.get("ddp", []))),
            ("Stage by stage: one fix after another", sections.stages_section(summary, tables["ratios"], tables["cells"], chain, workload, out)),
            *((f"Chain {c}: {title}", sections.chain_section(summary, tables["ratios"], v, tables["cells"], workload, c))
              for c, title in CHAINS.items()),
            ("Ceilings: the loader alone and the step alone", sections.ceilings_section(summary, workload, names)),
            ("Where the time goes", sections.time_section(summary, workload, out)),
            ("Host CUDA calls", sections.host_calls_section(tables["api_calls"], workload)),
            ("Kernels", sections.kernels_section(tables["kernels"], workload)),
            ("Against the limit", sections.limits_section(summary, tables["variants"], tables["limits"], workload))):
        if text:
            parts += [f"### {title}\n", text]
    return parts


def render(out_dir: str | Path) -> Path:
    out = Path(out_dir)
    (out / "figures").mkdir(exist_ok=True)  # a declared output, even when no figure can be drawn
    summary = pd.read_csv(out / "summary.csv")
    machine = out.name
    limits_path = out / "limits.json"
    tables = {"cells": read(out, "cells.csv"), "kernels": read(out, "kernels.csv"), "api_calls": read(out, "api_calls.csv"),
              "variants": read(out, "variants.csv"), "ratios": read(out, "ratios.csv"),
              "metrics": read(out, "metrics.csv"),
              "limits": json.loads(limits_path.read_text()) if limits_path.is_file() else {}}
    parts = [f"# Training performance on `{machine}`\n",
             "Generated by the pipeline from the tidy tables beside this file. A measured value is a median with "
             "its [min, max] over repetitions; a ratio is the median of ratios paired within one set of runs with "
             "its [95 % interval] (ratios.csv).\n"]
    ok_rows = summary[(summary.status == "ok") & (summary.metric == "throughput") & (summary.profiler == "timing")]
    if len(ok_rows) and ok_rows.n.max() == 1:
        parts.append("> **One repetition per cell**: the brackets show no spread, so small differences between "
                     "variants are not established here; the pipeline's default is 3 repetitions.\n")
    elif len(ok_rows) and ok_rows.n.nunique() > 1:
        reps = ok_rows.groupby("workload").n.agg(lambda n: "-".join(str(int(x)) for x in sorted({n.min(), n.max()})))
        parts.append("> **Repetitions differ between cells** (timing runs that trained, per workload: "
                     + ", ".join(f"{w} {r}" for w, r in reps.items()) + "): a figure without brackets comes from "
                     "one run, and small differences between variants are not established by it.\n")
    aside = summary[summary.status == "set aside"].drop_duplicates(["workload", "variant", "profiler"])
    if len(aside):
        parts.append(f"> **{len(aside)} cell{'s' * (len(aside) > 1)} set aside**: their records exist but no table here uses them "
                     "(the last section lists them, with why).\n")
    if machine == "cpu":
        parts.append("> **CPU preset**: small sizes on a CPU, to show the pipeline working. These numbers say "
                     "nothing about GPU training and are not comparable with any GPU's.\n")
    envs = json.loads((out / "env.json").read_text())
    parts += ["## Environment\n", environment(envs)]
    diag = diagnosis.diagnose(summary, tables["kernels"], tables["ratios"])
    parts += ["## Diagnosis: each baseline's bottleneck, the fix it calls for, and what that fix measured\n",
              diagnosis.RULES, table(diag)]
    flagged = set(map(tuple, aggregate.loss_flags(summary)[["workload", "variant"]].values))
    flagged |= set(map(tuple, aggregate.unreliable(summary[summary.profiler == "timing"])[["workload", "variant"]].values))
    targets = sections.targets_section(summary, {str(e.get("gpu", "")) for e in envs}, flagged)
    if targets:
        parts += ["## Against the targets: how far optimized is from the state of the art\n", targets]
    for workload in sorted(summary.workload.unique()):
        parts += workload_part(summary, tables, workload, out)
    parts += ["## Documented claims\n", claims_section(summary, tables)]
    overhead = sections.overhead_section(summary)
    if overhead:
        parts += ["## What each profiler costs\n", overhead]
    compiles = out / "compiles.csv"
    cost = sections.cost_section(tables["cells"], pd.read_csv(compiles) if compiles.is_file() else None)
    if cost:
        parts += ["## What the matrix took to run\n", cost]
    bad = pd.concat([summary[summary.status != "ok"], aggregate.unreliable(summary).assign(status="failed in some runs")])
    bad = bad[["workload", "variant", "profiler", "status", "reason"]].sort_values(["workload", "variant", "profiler"])
    parts += ["## Failed, skipped and set-aside cells\n", table(bad) if len(bad) else "None.\n"]
    path = out / "REPORT.md"
    path.write_text("\n".join(parts))
    return path
