"""Run records (metrics.json) -> tidy tables for one machine.

metrics.csv  one row per run x metric (the raw measurements, every repetition)
cells.csv    one row per cell (workload, variant, profiler, rep): ok / failed / skipped / set aside, why, for a
             failed cell the last lines of its log, and what the run cost the matrix: `seconds` (the
             cell from start to record; under nsys or ncu the whole process under the tool), of which
             `first_step_s` (compilation, autotuning, the first batch) and `setup_s` (model, loader)
summary.csv  one row per workload x variant x profiler x metric: median over repetitions with its
             spread lo..hi (min..max over repetitions), n (repetitions that ran); a cell with no
             successful repetition has one row with its status and reason instead; `failed` counts
             a cell's failed runs (a cell that failed in some runs and not in others keeps its
             statistics over the runs that trained, and its reason says how many failed and why).
env.json     the environment(s) the runs recorded, with the profiling tools' versions
kernels.csv  the top kernels each profiled run saw (torch, nsys) and ncu's measurements of them
api_calls.csv the CUDA API calls of each nsys run, by name and thread (`training`: the thread that
             runs the loop; the others by name, e.g. `pt_autograd_0`), whether the call waits for
             the GPU, calls and host milliseconds per step
variants.csv each variant's knobs per workload
ratios.csv   every paired ratio the report shows (analysis/paired.py): each variant against the
             baseline, each lever and ablation against optimized, each chain stage against the one
             before it, under timing and the step alone; median, 95 % interval, pairs, status.
Derived: `step_time_mean` (ms) per run, the measured window's time per step (throughput's
inverse); `loss_vs_baseline` (%): a variant's loss against the baseline's at the same training
steps (the mean over the last LOSS_STEPS steps both ran, per repetition), the check that an
optimization still trains.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import paired


KEYS = ["workload", "variant", "profiler"]
CEILINGS = {"input": "input_ceiling_used", "step": "step_ceiling_used"}  # profilers that measure a ceiling
LOSS_TOLERANCE = 10.0  # % a variant's loss may sit above the baseline's before it is flagged
LOSS_STEPS = 3  # common steps the loss check averages over


def load_records(paths) -> list[dict]:
    """Run records: from their files, a sweep's list of them ({'records': [paths]}), or a folder
    (every metrics.json under it: what a machine's runs hold, whichever pipeline made them)."""
    records = []
    for path in paths:
        if Path(path).is_dir():
            records += load_records(sorted(Path(path).rglob("metrics.json")))
            continue
        try:
            obj = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"unreadable run record {path}: {e}") from e
        records += load_records(obj["records"]) if "records" in obj else [obj]
    return records


NCU_SUMMARY = {"tensor_pipe_util": "tensor_pct", "achieved_occupancy": "achieved_occupancy",
               "sm_throughput": "sm_pct", "memory_throughput": "memory_pct"}


def _time_weighted(kernels: list[dict], metrics: dict) -> list[dict]:
    weight = sum(k["duration_us"] * k["launches"] for k in kernels)
    return [{"metric": m, "unit": "%", "value": sum(k[c] * k["duration_us"] * k["launches"] for k in kernels) / weight}
            for m, c in metrics.items() if weight and all(c in k for k in kernels)]


OCCUPANCY = {"achieved_occupancy": "achieved_occupancy", "theoretical_occupancy": "theoretical_occupancy"}


def ncu_metrics(record: dict) -> list[dict]:
    """An ncu run's kernel measurements, averaged over its kernels weighted by their time (%); the
    tensor pipe over its matrix-product kernels alone (matrix_tensor_pipe_util); achieved and
    theoretical occupancy per kernel class, matrix_* and other_* (none for a class not profiled)."""
    kernels = [k for k in record.get("ncu", {}).get("kernels", []) if k.get("duration_us")]
    matrix, other = [k for k in kernels if k["matrix"]], [k for k in kernels if not k["matrix"]]
    return (_time_weighted(kernels, NCU_SUMMARY) + _time_weighted(matrix, {"matrix_tensor_pipe_util": "tensor_pct"})
            + _time_weighted(matrix, {f"matrix_{m}": c for m, c in OCCUPANCY.items()})
            + _time_weighted(other, {f"other_{m}": c for m, c in OCCUPANCY.items()}))


def cost(record: dict) -> dict:
    """What a run cost (s): under nsys or ncu the whole process under the tool, else the cell's own
    duration; of which its first step and its setup; the first step again as `compile_s` where the
    run compiled graphs (not from the cache), with its cache folder. None where the record did not
    measure it (records made before the harness timed them)."""
    m = {x["metric"]: x["value"] for x in record.get("metrics", [])}
    compiled = bool(m.get("compile_cache_misses"))  # it compiled graphs itself (not from the cache)
    return {"seconds": m.get("profiled_cell_time", record.get("duration_s")),
            "first_step_s": m.get("first_step_time"), "setup_s": m.get("setup_time"),
            "compile_s": m.get("first_step_time") if compiled else None,
            "compile_key": record["compile_cache"] if compiled else None}


def step_time_mean(record: dict) -> list[dict]:
    """The run's time per step (ms): samples per step (over all ranks) over its throughput."""
    tput = next((m["value"] for m in record["metrics"] if m["metric"] == "throughput"), None)
    if not tput or "batch_size" not in record.get("params", {}):
        return []
    per_step = record["params"]["batch_size"] * max(1, len(record.get("ranks", [])))  # a DDP run lists its ranks
    return [{"metric": "step_time_mean", "value": 1e3 * per_step / tput, "unit": "ms"}]


def energy_per_sample(record: dict) -> list[dict]:
    """The run's energy per sample (J: its mean power over its throughput, both over the measured
    window) and samples per kWh; none where the run has no energy figure."""
    m = {x["metric"]: x["value"] for x in record["metrics"]}
    if not m.get("mean_power") or not m.get("throughput"):
        return []
    joules = m["mean_power"] / m["throughput"]
    return [{"metric": "energy_per_sample", "value": joules, "unit": "J"},
            {"metric": "samples_per_kwh", "value": 3.6e6 / joules, "unit": "samples/kWh"}]


def comparisons(cells: pd.DataFrame, catalog) -> list[tuple[str, str, str]]:
    """The ratios the report shows, per workload: every variant against the baseline; each lever
    and ablation against optimized; each stage of a chain against the stage before it."""
    meta = {c["variant"]: c for c in catalog}
    out = []
    for w, g in cells.groupby("workload", sort=True):
        present = sorted(set(g.variant), key=lambda v: (meta.get(v, {}).get("order", len(meta)), v))
        out += [(w, "baseline", v) for v in present if v != "baseline"]
        out += [(w, "optimized", v) for v in present if meta.get(v, {}).get("kind") in ("lever", "ablation")]
        staged = [v for v in present if meta.get(v, {}).get("kind") == "stage"]
        for chain in [c for c in dict.fromkeys(meta[v]["chain"] for v in staged) if c]:
            stages = ["baseline", *(v for v in staged if meta[v]["chain"] == chain)]
            out += [(w, a, b) for a, b in zip(stages, stages[1:]) if a != "baseline"]
    return out


def aliases(cells: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(workload, variant) -> the variant it was measured as, where the matrix skipped it as having
    the same knobs ('same knobs as X here')."""
    if "reason" not in cells:  # cells that say no reason: none was skipped as another
        return {}
    same = cells.reason.astype(str).str.extract(r"^same knobs as (\S+) here$")[0]
    return {(w, v): x for w, v, x in zip(cells.workload, cells.variant, same) if isinstance(x, str)}


def ratio_table(metrics: pd.DataFrame, cells: pd.DataFrame, catalog) -> pd.DataFrame:
    """ratios.csv: every comparison's paired ratio of throughput, in the timing runs and (where
    both cells ran it) the step alone; and of the energy per sample in the timing runs that
    measured it (what a fix saves in energy: below 1 is a saving, status gain); and what the energy meter costs
    the cells also run without it (profilers timing/bare, step/step-bare)."""
    ran = cells[cells.status.isin(["ok", "failed"]) | cells.reason.astype(str).str.startswith("same knobs as")]
    timed = ran[ran.profiler == "timing"]
    parts = [paired.table(metrics, cells, comparisons(ran[ran.profiler == p], catalog), profiler=p, aliases=aliases(cells))
             for p in ("timing", "step") if (ran.profiler == p).any()]
    if (metrics.metric == "energy_per_sample").any() and len(timed):
        parts.append(paired.table(metrics, cells, comparisons(timed, catalog), metric="energy_per_sample",
                                  aliases=aliases(cells), lower_is_better=True))
    if ran.profiler.isin(list(METERED)).any():
        parts.append(meter_cost(metrics, cells))
    return pd.concat(parts, ignore_index=True) if parts else paired.table(metrics, cells, [])


METERED = {"bare": "timing", "step-bare": "step"}  # a profiler without the energy meter: the same one with it
IN_RUN = "meter-cost"  # the meter's cost measured in one run: sampling switched on and off in alternate windows
METER = [*(f"{m}/{b}" for b, m in METERED.items()), IN_RUN]  # ratios.csv's profilers of the meter's cost: with over without


def meter_cost(metrics: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Per cell run both with the energy meter (timing, or the step alone) and without (bare,
    step-bare): the paired ratio of the throughput with it over without; below 1 is what metering
    costs the cell."""
    rows = []
    for bare, metered in METERED.items():
        for w, v in cells[cells.profiler == bare][["workload", "variant"]].drop_duplicates().itertuples(index=False):
            def of_cell(df):  # the cell's rows, its profilers in the variant column: paired.ratio pairs those
                return df[(df.workload == w) & (df.variant == v) & df.profiler.isin([metered, bare])].assign(
                    variant=lambda d: d.profiler)
            r = paired.ratio(of_cell(metrics[metrics.metric == "throughput"]), of_cell(cells), bare, metered)
            rows.append({"workload": w, "before": v, "after": v, "profiler": f"{metered}/{bare}", "metric": "throughput", **r})
    return pd.DataFrame(rows)


SIDES = {True: "with sampling", False: "without sampling"}  # the two sides of a meter-cost window pair


def in_run_meter_cost(records: list[dict]) -> pd.DataFrame:
    """The meter's cost measured in one process (profiler meter-cost): each pair of neighbouring
    windows of a run, one sampled and one not, is a pair (its two throughputs as the sides of
    SIDES); the paired ratio with over without, per cell, pooled over its runs of one set."""
    runs, cells = [], []
    for r in (r for r in records if r["keys"]["profiler"] == IN_RUN and r["status"] in ("ok", "failed")):
        k, rset = r["keys"], paired.run_set(r.get("env"), r.get("started")) if r.get("env") else None
        cells += [{**k, "variant": f"{k['variant']} {side}", "cell": k["variant"], "status": r["status"], "run_set": rset}
                  for side in SIDES.values()]
        windows = r.get(IN_RUN, {}).get("windows", []) if r["status"] == "ok" else []
        runs += [{**k, "variant": f"{k['variant']} {SIDES[w['sampling']]}", "cell": k["variant"], "rep": f"{k['rep']}.{w['window'] // 2}",
                  "value": w["steps"] / w["seconds"], "run_set": rset} for w in windows[:len(windows) // 2 * 2]]
    runs = pd.DataFrame(runs, columns=[*KEYS, "cell", "rep", "value", "run_set"])
    cells = pd.DataFrame(cells, columns=[*KEYS, "cell", "rep", "status", "run_set"])
    rows = []
    for (w, v), c in cells.groupby(["workload", "cell"]):
        r = paired.ratio(runs[(runs.workload == w) & (runs.cell == v)], c, f"{v} {SIDES[False]}", f"{v} {SIDES[True]}")
        why = r.get("why") and r["why"].replace(f"{v} {SIDES[False]} failed", f"{v} failed")  # a run fails both sides
        rows.append({"workload": w, "before": v, "after": v, "profiler": IN_RUN, "metric": "throughput", **r, "why": why})
    return pd.DataFrame(rows)


def tidy(records: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(metrics, cells) DataFrames from run records (ok, failed or skipped)."""
    rows, cells = [], []
    for r in records:
        keys = {**r["keys"], "run_set": paired.run_set(r["env"], r.get("started")) if r.get("env") else None}
        cells.append({**keys, "status": r["status"], "reason": r.get("reason"), "started": r.get("started"), "sweep": r.get("sweep"),
                      "preset": (r.get("spec") or {}).get("preset"),
                      "log_tail": " | ".join(r.get("log_tail", [])), **cost(r)})
        if r["status"] == "ok":
            rows += [{**keys, **m} for m in r["metrics"] + step_time_mean(r) + energy_per_sample(r) + ncu_metrics(r)]
    metrics = pd.DataFrame(rows, columns=[*KEYS, "rep", "metric", "value", "unit", "run_set"])
    columns = [*KEYS, "rep", "status", "reason", "started", "sweep", "preset", "log_tail", "seconds", "first_step_s", "setup_s", "compile_s", "compile_key",
               "run_set"]
    return metrics, pd.DataFrame(cells, columns=columns)


def step_losses(records: list[dict]) -> pd.DataFrame:
    """Every recorded loss of every successful run: keys, its set of runs, step index, loss."""
    rows = [{**r["keys"], "run_set": paired.run_set(r.get("env"), r.get("started")), "step": s["step"], "loss": s["loss"]}
            for r in records if r["status"] == "ok"
            for s in r.get("warmup_steps", []) + r.get("steps", []) if s.get("loss") is not None]
    return pd.DataFrame(rows, columns=[*KEYS, "rep", "run_set", "step", "loss"])


def loss_check(losses: pd.DataFrame) -> pd.DataFrame:
    """loss_vs_baseline (%) per run: the run's mean loss over the last LOSS_STEPS steps it shares
    with the baseline run of the same workload, profiler, repetition and set of runs, against the
    baseline's; where there is none, against the mean of the baseline runs of that workload and
    profiler (every run of a cell starts from the same seed, weights and data order).
    Cells stop at different steps (a slow cell measures fewer), so only common steps compare."""
    out = []
    base = losses[losses.variant == "baseline"]
    own = base.set_index(["workload", "profiler", "rep", "run_set", "step"]).loss.sort_index()
    other = base.groupby(["workload", "profiler", "step"]).loss.mean()
    for (w, v, p, r, rset), g in losses.groupby([*KEYS, "rep", "run_set"], sort=False):
        if (w, p, r, rset) in own.droplevel("step").index:
            b = own.loc[(w, p, r, rset)]
        elif (w, p) in other.droplevel("step").index:
            b = other.loc[(w, p)]
        else:
            continue
        common = sorted(set(g.step) & set(b.index))[-LOSS_STEPS:]
        if common:
            mine, ref = g.set_index("step").loss.loc[common].mean(), b.loc[common].mean()
            out.append({"workload": w, "variant": v, "profiler": p, "rep": r, "metric": "loss_vs_baseline",
                        "value": 100 * (mine - ref) / ref, "unit": "%", "run_set": rset})
    return pd.DataFrame(out, columns=[*KEYS, "rep", "metric", "value", "unit", "run_set"])


def summarize(metrics: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    g = metrics.groupby([*KEYS, "metric", "unit"], sort=False)["value"]
    summary = g.agg(median="median", lo="min", hi="max", n="count").reset_index()
    summary = pd.concat([summary, derived(metrics)], ignore_index=True)
    summary["status"], summary["reason"] = "ok", None  # reason: filled below for cells that failed
    runs = cells.groupby(KEYS, sort=False).agg(
        ok=("status", lambda s: (s == "ok").sum()), failed=("status", lambda s: (s == "failed").sum()),
        status=("status", "first"), reason=("reason", lambda r: next((x for x in r if isinstance(x, str)), None)))
    repeated = (runs.failed > 0) & (runs.ok + runs.failed > 1)  # say how often a cell failed
    runs.loc[repeated, "reason"] = [f"{how_often(r.failed, r.ok + r.failed)}: {r.reason}"
                                    for _, r in runs[repeated].iterrows()]
    key = list(zip(*(summary[k] for k in KEYS)))
    summary["failed"] = [int(runs.failed.get(k, 0)) for k in key]
    summary["reason"] = [runs.reason.get(k) if runs.failed.get(k, 0) else None for k in key]
    missing = runs[runs["ok"] == 0].reset_index()[[*KEYS, "status", "reason", "failed"]]
    return pd.concat([summary, missing], ignore_index=True)


def how_often(failed: int, runs: int) -> str:
    return f"failed in {failed} of {runs} runs"


def unreliable(summary: pd.DataFrame) -> pd.DataFrame:
    """Cells that trained in some runs and failed in others (one row per cell: how often, and why)."""
    rows = summary[(summary.status == "ok") & (summary.get("failed", 0) > 0)].drop_duplicates(KEYS)
    return rows.assign(how_often=[how_often(f, int(n) + f) for f, n in zip(rows.failed, rows.n)])[
        [*KEYS, "how_often", "reason"]]


def derived(metrics: pd.DataFrame) -> pd.DataFrame:
    """Each profiler's overhead and the ceilings' shares (ratios of cells are paired: ratios.csv)."""
    return pd.DataFrame(overheads(metrics), columns=[*KEYS, "metric", "unit", "median", "lo", "hi", "n"])


def overheads(metrics: pd.DataFrame) -> list[dict]:
    """Per cell observed by more than timing: each profiler's overhead (%), and for the loader
    alone (`input`) and the step alone (`step`) the share of their throughput the training reaches
    (input_ceiling_used, step_ceiling_used, %); each from the runs paired with a timing run of the
    same set of runs and repetition (median, min, max over the pairs; none without a pair)."""
    tput = metrics[metrics.metric == "throughput"]
    timing = tput[tput.profiler == "timing"].set_index(["workload", "variant", "run_set", "rep"]).value
    timing = timing[~timing.index.duplicated(keep="last")]
    out = []
    for (w, v, p), runs in tput[~tput.profiler.isin(["timing", *METERED, IN_RUN])].groupby(["workload", "variant", "profiler"]):
        keys = list(zip([w] * len(runs), [v] * len(runs), runs.run_set, runs.rep))
        both = [(timing[k], x) for k, x in zip(keys, runs.value) if k in timing.index]
        if not both:
            continue
        t, r = np.array(both).T
        name, vals = (CEILINGS[p], 100 * t / r) if p in CEILINGS else ("profiler_overhead", 100 * (t / r - 1))
        out.append({"workload": w, "variant": v, "profiler": p, "metric": name, "unit": "%",
                    "median": float(np.median(vals)), "lo": float(vals.min()), "hi": float(vals.max()), "n": len(vals)})
    return out


def loss_flags(summary: pd.DataFrame) -> pd.DataFrame:
    """Variants whose final loss is worse than the baseline's by more than LOSS_TOLERANCE %, in
    their timing runs: the runs the report's loss column shows (a profiled run is its own cell)."""
    rows = summary[(summary["metric"] == "loss_vs_baseline") & (summary["profiler"] == "timing")]
    return rows[rows["median"] > LOSS_TOLERANCE]


def kernel_table(records: list[dict]) -> pd.DataFrame:
    """One row per kernel a profiler listed in a successful run: its rank and measurements, and
    for a timeline's kernels (torch, nsys) their mean duration: time per step over calls per step."""
    rows = [{**r["keys"], "rank": i + 1, **k} for r in records if r["status"] == "ok"
            for p in ("torch", "nsys", "ncu") for i, k in enumerate(r.get(p, {}).get("kernels", []))]
    table = pd.DataFrame(rows, columns=[*KEYS, "rep", "rank", "name", "ms_per_step", "calls_per_step", "share"]
                         if not rows else None)
    timeline = {"ms_per_step", "calls_per_step"} <= set(table)  # an ncu run lists its kernels' own durations
    return table.assign(mean_us=1e3 * table.ms_per_step / table.calls_per_step) if timeline else table


def api_call_table(records: list[dict]) -> pd.DataFrame:
    """One row per CUDA API call name x thread an nsys run recorded, most host time first."""
    rows = [{**r["keys"], **c} for r in records if r["status"] == "ok" for c in r.get("nsys", {}).get("api_calls", [])]
    return pd.DataFrame(rows, columns=[*KEYS, "rep", "name", "thread", "waits", "per_step", "ms_per_step"])


def variant_table(records: list[dict], catalog=()) -> pd.DataFrame:
    """Each variant's kind (baseline, fix, extra, optimized, lever, ablation, stage, ddp; `other`
    where the catalog does not name it), its order in the matrix, what it is about, its knobs."""
    meta = {c["variant"]: c for c in catalog}
    rows = {(r["keys"]["workload"], r["keys"]["variant"]): r["spec"]["knobs"] for r in records if r.get("spec")}
    for w in {r["keys"]["workload"] for r in records}:  # a variant without a record keeps its place
        rows |= {(w, v): {} for v in meta if (w, v) not in rows}
    return pd.DataFrame([{"workload": w, "variant": v, "kind": meta.get(v, {}).get("kind", "other"),
                          "about": meta.get(v, {}).get("about", ""), "predicts": meta.get(v, {}).get("predicts", ""),
                          "chain": meta.get(v, {}).get("chain", ""),
                          "order": meta.get(v, {}).get("order", len(meta)), "side": meta.get(v, {}).get("side", ""), **k}
                         for (w, v), k in sorted(rows.items())])


def environments(records: list[dict]) -> list[dict]:
    """The distinct environments in the order their first runs started, each with the profiling
    tools' versions seen in the runs, and which runs it holds: how many, when, under which profilers."""
    tools = {k: v for r in records for k, v in r.get("tool_versions", {}).items()}
    sets: dict[str, list[dict]] = {}
    for r in records:
        if r.get("env"):
            sets.setdefault(json.dumps(r["env"], sort_keys=True), []).append(r)
    out = []
    first = {e: min((r.get("started") or "" for r in runs)) for e, runs in sets.items()}
    for e, runs in sorted(sets.items(), key=lambda kv: (first[kv[0]], kv[0])):
        days = sorted({r["started"][:10] for r in runs if r.get("started")})
        out.append({**json.loads(e), **tools, "runs": len(runs), "dates": " .. ".join(dict.fromkeys([days[0], days[-1]])) if days else "",
                    "first_started": first[e], "profilers": ", ".join(sorted({r["keys"]["profiler"] for r in runs}))})
    return out


def compile_table(paths) -> pd.DataFrame:
    """The compile stage's records (trainperf/precompile.py): one row per cache folder it built."""
    rows = []
    for r in load_records(paths):
        rows.append({"key": r["key"], "workload": r["cell"]["workload"], "variant": r["cell"]["variant"], "status": r["status"], "reason": r.get("reason"),
                     "start_ts": r["start_ts"], "seconds": r["seconds"], "first_step_s": r.get("first_step_s"),
                     "graphs_compiled": r.get("graphs_compiled"), "graphs_loaded": r.get("graphs_loaded"),
                     "git_commit": r.get("env", {}).get("git_commit"), "stage_ts": r.get("stage_ts"),
                     "stage_s": r.get("stage_s")})
    return pd.DataFrame(rows, columns=["key", "workload", "variant", "status", "reason", "start_ts", "seconds",
                                       "first_step_s", "graphs_compiled", "graphs_loaded", "git_commit",
                                       "stage_ts", "stage_s"])


def unpublished(record: dict) -> dict:
    """A record made from a tree with uncommitted changes is set aside: no table uses it, and
    the cells list says why."""
    commit = str(record.get("env", {}).get("git_commit", ""))
    if not commit.endswith("-dirty"):
        return record
    return {"keys": record["keys"], "status": "set aside",
            "reason": f"made from a tree with uncommitted changes ({commit}): not published"}


def main(run_paths, skipped: list[dict], out_dir, compiles=(), catalog=(), study: dict | None = None,
         committed_only: bool = False) -> pd.DataFrame:
    """The tables of one machine; `catalog`: each variant's kind, order and what it is about (the
    config's, as variants.csv carries it for the report); `study`: what the user set for the
    report (the price of a GPU-hour), kept in study.json; `committed_only` (what the pipeline
    publishes): records from an uncommitted tree are set aside."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.json").write_text(json.dumps(study or {}, indent=1))
    if compiles:
        compile_table(compiles).sort_values("start_ts").to_csv(out / "compiles.csv", index=False, float_format="%.6f")
    records = [unpublished(r) if committed_only else r for r in load_records(run_paths)]
    records += [{"keys": c["keys"], "status": c.get("status", "skipped"), "reason": c["reason"]} for c in skipped]
    metrics, cells = tidy(records)
    metrics = pd.concat([metrics, loss_check(step_losses(records))], ignore_index=True)
    summary = summarize(metrics, cells)
    metrics.to_csv(out / "metrics.csv", index=False)
    cells.sort_values([*KEYS, "rep"]).to_csv(out / "cells.csv", index=False, float_format="%.6g")
    summary.to_csv(out / "summary.csv", index=False, float_format="%.6g")
    (out / "env.json").write_text(json.dumps(environments(records), indent=1))
    kernel_table(records).to_csv(out / "kernels.csv", index=False, float_format="%.6g")
    api_call_table(records).to_csv(out / "api_calls.csv", index=False, float_format="%.6g")
    variant_table(records, catalog).to_csv(out / "variants.csv", index=False)
    ratios, in_run = ratio_table(metrics, cells, catalog), in_run_meter_cost(records)
    ratios = pd.concat([ratios, in_run], ignore_index=True) if len(in_run) else ratios
    ratios.to_csv(out / "ratios.csv", index=False, float_format="%.6g")
    return summary
