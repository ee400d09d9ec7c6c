"""results/<machine>/REPORT.md from the tidy tables: the summary on the first screen, then each
workload (ResNet-50 first, the articles' case), the documented claims and the environment;
APPENDIX.md beside it holds host calls, MFU, profiler cost, what the matrix took and the cells that
did not run. Every number comes from the tables; nothing is typed by hand."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd

import yaml

from analysis import aggregate, claims, diagnosis, figures, sections, summary as first
from analysis.tables import CI, digits, fmt, num, ratio_row, ratio_text, row, table

ANCHORS = Path(__file__).with_name("anchors.yaml")
SOURCES = Path(__file__).with_name("sources.yaml")
APPENDIX = "APPENDIX.md"

# the chains the report shows, each with its title; a tuple of chains shares one table
CHAINS = {"a002": "article 002's ResNet-50 case, its fixes in its order",
          "a000": "article 000's ViT case, its DataLoader then DALI",
          "ladder": "the step alone (a batch held on the GPU), the GPU-side fixes one after another",
          ("sync", "sync32", "scaler"): "the step alone, the loss read every step then every 10th: under bf16 "
          "(`sync`: no GradScaler, so the read is the step's only sync), the same at the article's batch of 32 "
          "(`sync32`), under fp16 (`scaler`: its GradScaler syncs every step)",
          "copy": "the DataLoader's path, the pinned asynchronous copy last"}
ENV_KEYS = ["gpu", "driver", "cuda", "torch", "torchvision", "cudnn", "dali", "nsys_version", "ncu_version", "cpu",
            "cpu_count", "python", "git_commit", "host", "gpu_uuid", "dates", "runs", "profilers"]


def cell(summary: pd.DataFrame, workload: str, variant: str, metric: str) -> str:
    r = summary[(summary.workload == workload) & (summary.variant == variant) & (summary.metric == metric)
                & (summary.profiler == "timing")]
    return fmt(*r.iloc[0][["median", "lo", "hi"]]) if len(r) else ""


def cost(summary: pd.DataFrame, workload: str, variant: str, price: float | None) -> str:
    """The price of a million samples at `price` per GPU-hour: price x GPU-hours per 1M samples."""
    r = row(summary, workload, variant, "throughput")
    if not price or r is None:
        return ""
    return fmt(*(price * 1e6 / 3600 / r[k] for k in ("median", "hi", "lo")))


def variants_table(summary: pd.DataFrame, ratios: pd.DataFrame, workload: str, names: list[str],
                   price: float | None = None) -> str:
    tput = first.throughput_metric(summary, workload)
    unit = summary[(summary.workload == workload) & (summary.metric == tput)].unit
    note = sections.loss_notes(summary, workload)
    rows = [{"variant": v, f"throughput ({unit.iloc[0] if len(unit) else ''})": cell(summary, workload, v, tput),
             f"speedup (paired, {CI})": "" if v == "baseline" else ratio_text(ratio_row(ratios, workload, "baseline", v)),
             "step (ms)": cell(summary, workload, v, "step_time_mean"),
             "input wait (%)": cell(summary, workload, v, "input_wait_share"),
             "of which the copy (% of time)": cell(summary, workload, v, "copy_wait_share"),
             "peak memory (GiB)": cell(summary, workload, v, "peak_memory") or cell(summary, workload, v, "peak_host_memory"),
             "energy (J/sample)": cell(summary, workload, v, "energy_per_sample"),
             "energy vs baseline (paired)": "" if v == "baseline" else
             ratio_text(ratio_row(ratios, workload, "baseline", v, metric="energy_per_sample")),
             "GPU throttled (% of samples)": cell(summary, workload, v, "throttled_share"),
             "cost per 1M samples": cost(summary, workload, v, price),
             "loss vs baseline (%)": note(v)}
            for v in names if cell(summary, workload, v, tput)]
    if not rows:
        return "(no variant ran)\n"
    df = pd.DataFrame(rows)
    if df["energy vs baseline (paired)"].isin(["", "unpaired"]).all():
        df = df.drop(columns="energy vs baseline (paired)")  # no set of runs metered both cells of any pair
    return table(df[[c for c in df.columns if (df[c] != "").any() or c in ("variant", "loss vs baseline (%)")]])


VARIANTS_NOTE = (
    "**Every fix against the baseline**: the columns but the paired ones are the median [min, max] over every run of "
    "the cell, whichever set of runs, as everywhere in the report; loss vs baseline is the mean training loss over "
    f"the last {aggregate.LOSS_STEPS} steps a "
    "run shares with the baseline's run of its repetition and set of runs, against the baseline's (%): the check "
    f"that a fix still trains, **check** where it sits over {aggregate.LOSS_TOLERANCE:g} % above. The step alone "
    "(one batch fed again) is checked only for a non-finite loss, which fails its run: how fast a variant fits one "
    "batch says little of how it trains.\n")


def environment(envs: list[dict], differing: bool = False) -> str:
    """One column per distinct environment (a set of runs has two where its records differ, as when a
    package was installed while it ran); with `differing`, the rows where they differ, the rest in a line."""
    keys = [k for k in ENV_KEYS if any(k in e for e in envs)]  # a field older records lack is left out
    same = [k for k in keys if len({str(e.get(k, "")) for e in envs}) == 1]
    shown = [k for k in keys if not (differing and k in same)]
    rows = [{"": k, **{f"environment {i + 1}": e.get(k, "") for i, e in enumerate(envs)}} for k in shown]
    common = "; ".join(f"{k} {envs[0].get(k)}" for k in same if envs[0].get(k) not in (None, ""))
    return (f"Common to every environment: {common}.\n\n" if differing and common else "") + table(pd.DataFrame(rows))


def interval(v, lo, hi) -> str:
    """A value with its interval, at as many digits (3 to 5) as it takes to tell the bounds apart."""
    lo, hi = (v if pd.isna(lo) else lo), (v if pd.isna(hi) else hi)
    d = digits(lo, hi)
    return num(v) if d is None or lo == hi else f"{v:.{d}g} [{lo:.{d}g}, {hi:.{d}g}]"


def claims_rows(tables: dict) -> pd.DataFrame:
    c = claims.evaluate(tables["metrics"], tables["cells"])
    c[f"measured here ({CI}; n)"] = ["" if pd.isna(v) else f"{interval(v, lo, hi)} (n={int(n)})"
                                       for v, lo, hi, n in zip(c.value, c.lo, c.hi, c.n)]
    c[f"measured here ({CI}; n)"] += [f"; {b} of {v} {num(x)}" if isinstance(b, str) and not pd.isna(x) else ""
                                        for b, v, x in zip(c.beside, c.beside_cell, c.beside_value)]
    c[f"measured here ({CI}; n)"] += [f"; {e}" if (e := ends_text(b, a, u)) else "" for b, a, u in zip(c.before_value, c.after_value, c.metric_unit)]
    c["verdict"] = [f"{v}: {w}" if isinstance(w, str) and w else v for v, w in zip(c.verdict, c.why)]  # no verdict: why
    return c


def ends_text(before, after, unit) -> str:
    """'0.54 -> 39.9 %': a ratio's two cells by their own values, where both were measured."""
    if any(v is None or pd.isna(v) for v in (before, after)):
        return ""
    return f"{num(before)} -> {num(after)}" + ("" if not isinstance(unit, str) else f" {unit}")


def claims_section(c: pd.DataFrame) -> str:
    """The rule, a row per test run here, and one line naming the tests whose cells did not run."""
    unrun = c.verdict.astype(str).str.startswith("not run here")
    shown = c[~unrun]
    shown = shown.assign(id=[f'<a id="claim-{i}"></a>{i}' if i != p else i for i, p in zip(shown.id, [None, *shown.id[:-1]])])
    cols = ["id", "source", "documented", "pair", "why this pair", f"measured here ({CI}; n)", "verdict"]
    return claims.RULE + "\n" + (table(shown[cols]) if len(shown) else "") + unrun_line(c[unrun], set(c[~unrun].id))


def unrun_line(c: pd.DataFrame, anchored: set[str]) -> str:
    """'Not run on this machine: <claim> (<metric> xN); ...', each claim's anchor where no row holds it."""
    if c.empty:
        return ""
    metric = c.pair.str.extract(r"^(\w+)")[0]
    parts = [("" if i in anchored else f'<a id="claim-{i}"></a>') + f"{i} (" + ", ".join(
        f"{m} x{k}" if k > 1 else m for m, k in Counter(metric[g.index]).items()) + ")" for i, g in c.groupby("id", sort=False)]
    return "\nNot run on this machine (a cell of the pair has no record here): " + "; ".join(parts) + ".\n"


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


def anchors(workload: str, path: Path = ANCHORS) -> str:
    return "; ".join(f"{a['source']}, {a['gpu']}: {a['figure']}" for a in yaml.safe_load(path.read_text())
                     if a["workload"] == workload)


def at_step(tables, workload: str, variant: str) -> str:
    """A variant's paired speedup at the step alone: its own step cell's, else the ladder's stage of it
    where that stage is the ladder's first (over the baseline, as tf32's)."""
    v = tables["variants"]
    ladder = [a for b, a in first.chain_steps(v[(v.workload == workload) & (v.chain == "ladder")], variant) if b == "baseline"] \
        if "chain" in v else []
    rows = (ratio_row(tables["ratios"], workload, "baseline", name, "step") for name in (variant, *ladder))
    return ratio_text(next((r for r in rows if r is not None), None))


def headline_table(summary, tables) -> str:
    """The summary's table: each workload's baseline, article chain and optimized, with the paired
    speedups (end to end, and at the step alone where that pair ran), and the lines under it."""
    h = first.headline(summary, tables["ratios"], tables["variants"])
    if h.empty:
        return "(no workload trained)\n"
    step = {(r.workload, r.variant): at_step(tables, r.workload, r.variant) for r in h.itertuples() if r.variant != "baseline"}
    held = {name for name, _ in first.throttled(summary)}
    rows = [{"workload": r.workload if i == 0 or h.workload.iloc[i - 1] != r.workload else "",
             "variant": r.variant, "throughput": f"{fmt(r.median, r.lo, r.hi)} {r.unit}" + (" (1 run)" if r.n == 1 else "")
             + (" (throttled)" if f"{r.workload}/{r.variant}" in held else ""),
             "speedup over the baseline (paired)": ratio_text(r.speedup),
             "the same at the step alone (paired)": step.get((r.workload, r.variant), "")}
            for i, r in enumerate(h.itertuples())]
    if not any(step.values()):
        rows = [{k: v for k, v in x.items() if k != "the same at the step alone (paired)"} for x in rows]
    apart = [r.workload for r in h.itertuples() if r.variant == "optimized" and r.speedup is not None
             and r.speedup["status"] == "unpaired"]
    elsewhere = [f"{w}: {a}" for w in dict.fromkeys(h.workload) if (a := anchors(w))]
    lines = [f"**No set of runs here holds both the baseline and optimized of {', '.join(apart)}**: their speedups "
             "are unpaired (the records come from sets of runs made apart), and no ratio pairs runs of two sets; "
             "`snakemake --cores 1 --config preset=headline` measures the summary's cells in one set."] if apart else []
    if any("(throttled)" in x["throughput"] for x in rows):
        lines.append(f"(throttled): the GPU was held below its clocks by power or heat in at least {first.THROTTLED} % "
                     "of the cell's samples (the caveats below).")
    if first.REFERENCE in set(h.variant):
        lines.append(f"`{first.REFERENCE}` is the baseline with TF32 on for matmuls and convolutions: PyTorch's defaults "
                     "turn it on for cuDNN's convolutions and RNNs (not for matmuls) and the baseline turns it off, so the "
                     "baseline sits below PyTorch's defaults; its row shows what that setting alone gains over it.")
    if elsewhere:
        lines.append("Published elsewhere (other GPUs and software, not paired with these runs): " + "; ".join(elsewhere) + ".")
    return table(pd.DataFrame(rows)) + "".join(f"\n{line}\n" for line in lines)


def settings_text(summary, claim_rows: pd.DataFrame | None = None) -> str:
    """How each article's own scenario measured here compares with the article's (in the runs its
    claim pairs, where it pairs any), and why the two settings differ (analysis/claims.yaml's `setting`)."""
    lines = []
    for a in first.article_settings(summary, claims.load(), claim_rows):
        d, (before, after) = a["documented"], a["cells"]
        said = f"Article {a['source']}'s {a['workload']} case ({a['hardware']}): {before} -> {after}"
        there = f"{num(d['before'])} -> {num(d['after'])} {d['unit']}" if "before" in d else ""
        here = "" if a["here"] is None else f"{num(a['here'][0])} -> {num(a['here'][1])} {a['unit']}"
        if not here:
            continue
        same = a["unit"] == d.get("unit")
        lines.append(f"- {said}: {there} there, {here} here" + (", in the runs its claim pairs" if a["paired"] else "")
                     + (f" (the baseline at {num(a['here'][0] / d['before'])}x the article's, the end at "
                        f"{num(a['here'][1] / d['after'])}x)" if same else "")
                     + (f"; here {before} waits for input {num(a['wait'])} % of its time (median over runs)" if a["wait"] is not None else "")
                     + f". The settings differ: {a['setting']}.")
    return ("**The articles' own scenarios, there and here** (medians: over the runs the claim below pairs, one set of "
            "runs, where it pairs any; else over every run):\n\n"
            + "\n".join(lines) + "\n") if lines else ""


def gains_table(summary, tables) -> str:
    def said(gains) -> str:
        return "; ".join(f"{f} {ratio_text(g)} ({first.basis(g)})" for f, g in gains)
    rows = [{"workload": w, "input side": said(first.top_fixes(tables["ratios"], tables["variants"], w, "input")),
             "step side": said(first.top_fixes(tables["ratios"], tables["variants"], w, "step"))}
            for w in first.workload_order(summary.workload.unique())]
    return table(pd.DataFrame(rows))


def sources_line(ids, path: Path = SOURCES) -> str:
    """The sources of the claims shown, each with its title and what it is about."""
    said = [f'{"article " + x["id"] if x["id"].isdigit() else x["id"]}: "{x["title"]}" ({x["about"]})'
            for x in yaml.safe_load(path.read_text()) if x["id"] in set(ids)]
    return "Sources: " + "; ".join(said) + ".\n" if said else ""


def optimized_line(variants: pd.DataFrame) -> str:
    """What `optimized` applies: the study's fixes, in the matrix's order."""
    if "kind" not in variants:
        return ""
    fixes, extra = (list(dict.fromkeys(variants[variants.kind == k].sort_values("order").variant)) for k in ("fix", "extra"))
    return ("`optimized` is the baseline with every fix at once (" + ", ".join(fixes) + "), each where it acts on "
            "the workload (channels_last on CNNs; DALI on images, where it replaces the DataLoader: there `workers` sets "
            "DALI's CPU threads, and pinned-async has no host batch to pin or copy, since DALI's GPU decoder hands over "
            "batches already on the GPU); each ablation table shows what the fixes it leaves out add"
            + (f"; {', '.join(extra)} are measured beside the fixes, not in `optimized`" if extra else "") + ".\n"
            if fixes else "")


def glossary(variants: pd.DataFrame) -> str:
    """Each fix and extra variant by the knobs it sets on the baseline."""
    def value(x):
        return int(x) if isinstance(x, float) and x.is_integer() else x
    fixes = first.fix_knobs(variants)
    said = [f"`{v}`: " + ", ".join(f"{k}={value(x)}" for k, x in knobs) for v, knobs in fixes.items() if knobs]
    base = variants[variants.variant == "baseline"]
    moved = list(dict.fromkeys(k for knobs in fixes.values() for k, _ in knobs))  # the knobs a fix sets
    start = ("The baseline, the articles' naive start, at each workload's own batch size: "
             + ", ".join(f"{k}={value(base.iloc[0][k])}" for k in moved) + ". " if len(base) and moved else "")
    return (start + "The fixes and the variants measured beside them, by the knobs each sets on the baseline "
            "(workloads/knobs.py says what each knob does): " + "; ".join(said) + ".\n" if said else "")


def tally_line(verdicts: pd.Series) -> str:
    t = first.tally(verdicts)
    return (f"Verdicts of the {len(verdicts)} tests: " + "; ".join(f"{k}: {n}" for k, n in t.items()) + ". A verdict "
            f"compares gains, not ratios: the measured ratio less one (its 95 % interval) against the documented ratio "
            f"less one; **holds** where the interval reaches the documented gain within a factor of "
            f"{claims.SIZE_FACTOR:g} either way (the full rule: [Documented claims](#documented-claims)).\n" if t else "")


def terms(variants: pd.DataFrame) -> str:
    ladder = variants[variants.chain == "ladder"].sort_values("order").drop_duplicates("variant").about
    return ("a *cell* is one workload, variant and profiler; a *set of runs* is the records of one GPU, "
            "commit and day, the only runs a ratio pairs; *the step alone* trains on one batch held on the GPU, no "
            "loader (profiler `step`); `a002-upto-<fix>` is article 002's chain of fixes up to and including that "
            "one (`a000-`: article 000's)" + (f"; `ladder-upto-<fix>` the step-alone chain baseline -> "
                                              f"{' -> '.join(ladder)}" if len(ladder) else "") + "; a stage "
            "adds its fix to the stages before it, but precision is one knob, so a precision stage (amp after tf32) "
            "replaces the one before.\n")


def measured(x: float, unit: str, pair: str, lo: float = float("nan"), hi: float = float("nan")) -> str:
    """A claim's measured value as the digest says it: a reduction (before / after) as the way it
    went, a difference (before - after) as what the fix saved or cost; with its interval [lo, hi],
    turned the same way, where given."""
    def span(a: float, b: float) -> str:
        return "" if pd.isna(a) or pd.isna(b) else f" [{num(a)}, {num(b)}]"
    if "(reduction;" in pair and unit == "x":
        return f"{num(x)}x down{span(lo, hi)}" if x >= 1 else f"{num(1 / x)}x up{span(1 / hi, 1 / lo)}"
    if "(difference;" in pair:
        return f"{num(x)} {unit} saved{span(lo, hi)}" if x >= 0 else f"{num(-x)} {unit} lost{span(-hi, -lo)}"
    return f"{num(x)}{'' if unit == 'x' else ' '}{unit}{span(lo, hi)}"


def verdict_said(verdict: str, x: float, unit: str, n: float, pair: str, lo: float = float("nan"),
                 hi: float = float("nan")) -> str:
    """A test's verdict with its measured value as the digest says it: 'holds (4.07x)',
    'too few pairs (1.62x up, n=1)', or the verdict alone where nothing was measured."""
    return verdict.split(":")[0] + ("" if pd.isna(x) else f" ({measured(x, unit, pair, lo, hi)}{'' if n >= 3 else f', n={int(n)}'})")


def test_said(t) -> str:
    """One test in the digest: its metric, verdict and value; where the source gives no number, the
    two cells' own values too."""
    ends = ends_text(t.before_value, t.after_value, t.metric_unit) if t.documented.startswith("(no number") else ""
    return f"{t.metric}: {verdict_said(t.verdict, t.value, t.unit, t.n, t.pair)}" + (f" ({ends})" if ends else "")


def claims_digest(c: pd.DataFrame) -> str:
    """One line per claim: the figures it documents, and each test's metric, verdict and measured
    value with its unit (one verdict said by several tests of a metric, once with their count)."""
    rows = []
    for cid, tests in c.groupby("id", sort=False):
        said = [test_said(t) for t in tests.assign(n=tests.n.fillna(0)).itertuples()]
        rows.append({"claim": f"[{cid}](#claim-{cid})", "documented": " / ".join(dict.fromkeys(tests.documented)),
                     "each test: metric, verdict (measured here)": " / ".join(
                         f"{v} (x{k})" if k > 1 else v for v, k in Counter(said).items())})
    return table(pd.DataFrame(rows))


def caveats_text(summary, tables) -> str:
    c = first.caveats(summary, tables["cells"], tables["study"])
    one, more = c["one_run"][:12], len(c["one_run"]) - 12
    lines = [f"- {len(c['failed'])} cell(s) failed in some or all runs and count in no speedup: " + ", ".join(c["failed"])
             if c["failed"] else "- No cell failed.",
             f"- {len(c['one_run'])} timing cell(s) rest on one run (no interval): " + ", ".join(one)
             + (f" and {more} more" if more > 0 else "") if one else "- Every timing cell ran more than once.",
             f"- {c['run_sets']} set(s) of runs (GPU, commit, day; [appendix]({APPENDIX}#sets-of-runs): what each holds, "
             "the command that makes it); a ratio pairs runs of one set only."]
    if c["unmeasured"]:
        lines.append(f"- Not measured on this machine (no record): {', '.join(c['unmeasured'])}.")
    held, more = c["throttled"][:8], len(c["throttled"]) - 8
    if held:
        lines.append(f"- {len(c['throttled'])} timing cell(s) ran with the GPU held below its clocks by power or heat "
                     f"(NVML's clock-event reasons) in at least {first.THROTTLED} % of their samples (median over runs): "
                     + ", ".join(f"{name} ({num(share)} %)" for name, share in held) + (f" and {more} more" if more > 0 else "")
                     + "; their throughput is what this GPU gives under those limits.")
    lines += wide_line(first.wide_ratios(summary, tables["ratios"]))
    return "\n".join(lines) + "\n"


def wide_line(w: dict) -> list[str]:
    """The caveat on paired ratios whose interval is wide, and what the records say of why."""
    n = len(w["host"]) + len(w["other"])
    if not n:
        return []
    other = f" The others, worth a look: {', '.join(w['other'])}." if w["other"] else ""
    return [f"- {n} of the {w['paired']} paired throughput ratios have a 95 % interval wider than {first.WIDE:g} % of "
            f"their median; in {len(w['host'])} of them the host sets the pace of a cell (its loop waits for input "
            f"{first.INPUT_SHARE:g} % of the time or more, or its GPU idles {first.IDLE_SHARE:g} % or more by NVML), "
            "and the host's pace varies from run to run more than the GPU's." + other]


def summary_section(summary, tables, claim_rows) -> list[str]:
    """The answer first (throughput and speedups, the fixes that gained most, the claims' verdicts,
    the caveats), the terms they use last."""
    return ["## Summary\n", "**What each workload trains at**, at its own batch size (throughput: median [min, max] over "
            "runs; speedup: median of the ratios paired within one set of runs [95 % interval; from 3 pairs, their "
            "range, which holds the true median 3 times in 4]; the step alone: one batch held on the GPU, no "
            "loader, what the GPU side alone gains; [terms](#terms)):\n",
            headline_table(summary, tables), settings_text(summary, claim_rows),
            "**The fixes that gained most**, established gains only, by side (input: the loader and the copy; step: the "
            "GPU's work and the host's syncs), each on the first basis that gives it an interval: " + first.GAIN_RULE + " "
            "(gains on different bases do not multiply to optimized's speedup):\n", gains_table(summary, tables),
            "**Do the articles' claims hold here?** (details: [Documented claims](#documented-claims)):\n",
            claims_digest(claim_rows), tally_line(claim_rows.verdict),
            "**Caveats**:\n", caveats_text(summary, tables),
            '<a id="terms"></a>**Terms**: ' + (terms(tables["variants"]) if "kind" in tables["variants"] else "\n"),
            "A cell's throughput is the median [min, max] over every run of it, the same number wherever it shows; a "
            "speedup is the median of ratios paired within one set of runs [95 % bootstrap interval; from 3 pairs it is "
            "their range, which holds the true median 3 times in 4], so where a folder holds several sets, it need not "
            "equal the ratio of two throughputs.\n",
            glossary(tables["variants"]), optimized_line(tables["variants"]),
            sources_line(claim_rows.source.str.split(", ").explode())]


def workload_part(summary, tables: dict, workload: str, out: Path) -> tuple[list[str], list[str]]:
    """One workload's sections of the report, and of the appendix."""
    kinds = by_kind(tables["variants"], workload, summary)
    names = kinds["all"]
    main = [v for v in names if v in {"baseline", "optimized", *kinds.get("fix", []), *kinds.get("extra", [])}]
    parts = [f"## {workload}\n", "### Every fix against the baseline\n",
             variants_table(summary, tables["ratios"], workload, main, tables["study"].get("gpu_hour_price"))]
    v = tables["variants"]
    kind_of = dict(zip(v[v.workload == workload].variant, v[v.workload == workload].kind)) if "kind" in v else {}
    article = first.chain_end(v, summary, workload) if "chain" in v else None  # the article's chain, drawn beside
    kind_of |= {article: "article"} if article else {}
    fig = figures.speedups(tables["ratios"], workload, out / "figures" / f"speedup-{workload}.png",
                           main + ([article] if article else []), kind_of)
    if fig:
        parts.append(f"![{workload} speedups](figures/{fig.name})\n" + not_drawn(tables["ratios"], workload, main))
    ablations = kinds.get("ablation", [])
    chain = list(dict.fromkeys(v[(v.chain == "stages")].sort_values("order").about)) if "chain" in v else []
    for title, text in (
            ("Ablation: optimized with one fix left out", sections.tuning_section(summary, tables["ratios"], workload, ablations)),
            ("Data-parallel scaling", sections.scaling_section(summary, tables["ratios"], workload, kinds.get("ddp", []))),
            ("Stage by stage: one fix after another", sections.stages_section(summary, tables["ratios"], tables["cells"], chain, workload, out)),
            *((f"{chain_heading(c)}: {title}", sections.chain_section(summary, tables["ratios"], v, tables["cells"], workload, c))
              for c, title in CHAINS.items()),
            *((f"Grid {g}: the throughput at each point", sections.grid_section(summary, v, workload, g))
              for g in sorted(set(v[(v.workload == workload) & (v.kind == "grid")].chain))),
            ("Where the time goes", time_part(summary, workload, out, ["baseline", *names_of_article(v, workload), "optimized"])),
            ("Kernels of the baseline and optimized", sections.kernels_section(tables["kernels"], workload, 3, ["baseline", "optimized"], merged=True))):
        if text:
            parts += [f"### {title}\n", text]
    appendix = [f"## {workload}\n"]
    predicts = {n: p for n, p in zip(v.variant, v.predicts) if isinstance(p, str) and p} if "predicts" in v else None
    levers = sections.tuning_section(summary, tables["ratios"], workload, kinds.get("lever", []), predicts)
    for title, text in (("Past the articles: levers on top of optimized, each beside the gain it predicts", levers),
                        ("Where the time goes, every profiled variant", sections.time_section(summary, workload, None)),
                        ("Ceilings: the loader alone and the step alone", sections.ceilings_section(summary, workload, names)),
                        ("Kernels of every profiled variant", sections.kernels_section(tables["kernels"], workload)),
                        ("Host CUDA calls", sections.host_calls_section(tables["api_calls"], workload)),
                        ("Against the limit", sections.limits_section(summary, tables["variants"], tables["limits"], workload,
                                                                      tables.get("datasheet")))):
        if text:
            appendix += [f"### {title}\n", text]
    return parts, appendix if len(appendix) > 1 else []


def time_part(summary, workload: str, out: Path, names: list[str]) -> str:
    """Where the time goes for `names`, less the variants whose training failed in a timing run: a
    broken cell's timeline is no evidence of where a working one spends its time."""
    t = summary[(summary.workload == workload) & (summary.profiler == "timing")]
    broken = set(t[t.status == "failed"].variant) | set(aggregate.unreliable(t).variant)
    text = sections.time_section(summary, workload, out, [n for n in names if n not in broken])
    left_out = [n for n in names if n in broken]
    return text + (f"\nNot shown, its training failed in a timing run: {', '.join(left_out)}.\n" if text and left_out else "")


def chain_heading(chains) -> str:
    return f"Chain {chains}" if isinstance(chains, str) else "Chains " + ", ".join(chains)


def not_drawn(ratios: pd.DataFrame, workload: str, names: list[str]) -> str:
    """The variants of the speedup figure that have no paired ratio to draw, with their status."""
    r = figures.speedup_rows(ratios, workload, names)
    r = r[~r.status.isin(list(figures.STATUS_STYLE))]
    return "\nNot drawn (no paired ratio): " + ", ".join(f"{a} ({s})" for a, s in zip(r.after, r.status)) + ".\n" if len(r) else ""


def names_of_article(variants: pd.DataFrame, workload: str) -> list[str]:
    """The variants of the articles' own chains on this workload."""
    if "chain" not in variants:
        return []
    return list(variants[(variants.workload == workload) & variants.chain.isin(first.ARTICLE_CHAINS)].variant)


def notes(summary: pd.DataFrame, machine: str) -> list[str]:
    """The notes a reader needs before the numbers: repetitions, set-aside cells, a CPU run."""
    parts = []
    ok_rows = summary[(summary.status == "ok") & (summary.metric == "throughput") & (summary.profiler == "timing")]
    if len(ok_rows) and ok_rows.n.max() == 1:
        parts.append("> **One repetition per cell**: the brackets show no spread, so small differences between "
                     "variants are not established here; the pipeline's default is 3 repetitions.\n")
    aside = summary[summary.status == "set aside"].drop_duplicates(["workload", "variant", "profiler"])
    if len(aside):
        parts.append(f"> **{len(aside)} cell{'s' * (len(aside) > 1)} set aside**: their records exist but no table here uses them "
                     f"([appendix]({APPENDIX}) lists them, with why).\n")
    if machine == "cpu":
        parts.append("> **CPU preset**: small sizes on a CPU, to show the pipeline working. These numbers say "
                     "nothing about GPU training and are not comparable with any GPU's.\n")
    return parts


def load_tables(out: Path) -> dict:
    limits_path = out / "limits.json"
    return {"cells": read(out, "cells.csv"), "kernels": read(out, "kernels.csv"), "api_calls": read(out, "api_calls.csv"),
            "variants": read(out, "variants.csv"), "ratios": read(out, "ratios.csv"), "metrics": read(out, "metrics.csv"),
            "limits": json.loads(limits_path.read_text()) if limits_path.is_file() else {},
            "study": json.loads((out / "study.json").read_text()) if (out / "study.json").is_file() else {}}


def appendix_parts(summary, tables, envs, workload_appendix: list[str], out: Path) -> list[str]:
    parts = [f"# Appendix: training performance on `{out.name}`\n",
             "The detail behind [REPORT.md](REPORT.md): every environment in full; per workload the levers past "
             "the articles, the ceilings, "
             "every profiled variant's kernels, host CUDA calls and MFU; what each profiler costs, what the matrix took to run, and the cells that did not run.\n",
             "## Sets of runs\n", sections.run_sets_section(tables["cells"]),
             "## Environment, in full\n", environment(envs), *workload_appendix]
    overhead = sections.overhead_section(summary)
    if overhead:
        parts += ["## What each profiler costs\n", overhead]
    meter = sections.meter_section(tables["metrics"], tables["ratios"])
    if meter:
        parts += ["## What the energy meter costs, and how its two figures agree\n", meter]
    compiles = out / "compiles.csv"
    cost = sections.cost_section(tables["cells"], pd.read_csv(compiles) if compiles.is_file() else None)
    if cost:
        parts += ["## What the matrix took to run\n", cost]
    bad = pd.concat([summary[summary.status != "ok"], aggregate.unreliable(summary).assign(status="failed in some runs")])
    bad = bad[["workload", "variant", "profiler", "status", "reason"]].sort_values(["workload", "variant", "profiler"])
    return parts + ["## Failed, skipped and set-aside cells\n", table(bad) if len(bad) else "None.\n"]


def render(out_dir: str | Path) -> Path:
    out = Path(out_dir)
    (out / "figures").mkdir(exist_ok=True)  # a declared output, even when no figure can be drawn
    summary = pd.read_csv(out / "summary.csv")
    tables = load_tables(out)
    envs = json.loads((out / "env.json").read_text())
    tables["datasheet"] = sections.datasheet({str(e.get("gpu", "")) for e in envs})
    claim_rows = claims_rows(tables)
    parts = [f"# Training performance on `{out.name}`\n", *notes(summary, out.name),
             *summary_section(summary, tables, claim_rows)]
    flagged = set(map(tuple, aggregate.loss_flags(summary)[["workload", "variant"]].values))
    flagged |= set(map(tuple, aggregate.unreliable(summary[summary.profiler == "timing"])[["workload", "variant"]].values))
    targets = sections.targets_section(summary, {str(e.get("gpu", "")) for e in envs}, flagged,
                                       tables["variants"], tables["limits"])
    if targets:
        parts += ["## Against the targets, at each workload's own batch: how far optimized is from the state of the art\n", targets]
    diag = diagnosis.diagnose(summary, tables["kernels"], tables["ratios"])
    parts += ["## Diagnosis: each baseline's bottleneck, the fix it calls for, and what that fix measured\n",
              diagnosis.RULES, table(diag)]
    parts += ["## Reading a workload's part\n", VARIANTS_NOTE, sections.TIME_NOTE, sections.KERNELS_NOTE]
    extra = []
    for workload in first.workload_order(summary.workload.unique()):
        main, more = workload_part(summary, tables, workload, out)
        parts, extra = parts + main, extra + more
    parts += ["## Documented claims\n", claims_section(claim_rows),
              "## Environment\n", "A set of runs is one GPU (gpu_uuid), commit and day; it shows as two columns where its "
              "records differ in another field (a tool installed while it ran).\n", environment(envs, differing=True),
              f"Levers past the articles, ceilings, every profiled kernel, host CUDA calls, MFU, profiler cost, what the matrix took and the cells "
              f"that did not run: [{APPENDIX}]({APPENDIX}).\n"]
    (out / APPENDIX).write_text("\n".join(appendix_parts(summary, tables, envs, extra, out)))
    path = out / "REPORT.md"
    path.write_text("\n".join(parts))
    shown = path.read_text() + (out / APPENDIX).read_text()
    for stale in (f for f in (out / "figures").glob("*.png") if f"figures/{f.name}" not in shown):
        stale.unlink()  # a figure no longer drawn must not outlive its report
    return path
