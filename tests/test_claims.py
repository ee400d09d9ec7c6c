"""Claim verdicts: every branch on constructed measurements, and the registry measured on real H200
records (and on copies of them as further repetitions of their set of runs, where a verdict needs
three pairs)."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import aggregate, claims, paired

H200 = Path(__file__).parent / "data" / "h200-timing"
ONE_SET = "NVIDIA H200|3f3a4b6e6edb|2026-12-02"  # resnet50's baseline, workers and optimized: one set of runs


def catalog():
    from trainperf import config, variants
    return variants.catalog(config.load())


def measured(median, lo, hi, kind="ratio", status=None):
    """A measurement as claims.measure gives it, its status read from where its interval lies."""
    neutral = 0.0 if kind == "difference" else 1.0
    status = status or ("value" if kind == "share" else "gain" if lo > neutral else "loss" if hi < neutral
                        else "not established")
    return {"median": median, "lo": lo, "hi": hi, "n": 3, "status": status}


@pytest.mark.parametrize("kind,values,effect,expected", [
    ("ratio", (3.1, 2.9, 3.3), 3.0, "holds"),
    ("ratio", (33.0, 30.0, 35.0), 3.0, "holds in direction, larger than documented"),
    ("ratio", (1.02, 0.97, 1.08), 3.0, "not established"),
    ("ratio", (0.8, 0.7, 0.9), 1.25, "does not hold (the opposite)"),
    ("ratio", (1.5, 1.4, 1.6), None, "holds (direction only; no size documented)"),
    ("ratio", (0.8, 0.7, 0.9), None, "does not hold (the opposite)"),
    ("reduction", (10.0, 9.0, 12.0), 13.3, "holds"),
    ("reduction", (1.5, 1.3, 1.7), 13.3, "holds in direction, smaller than documented"),
    ("difference", (4.0, 3.0, 5.0), 5.0, "holds"),
    ("difference", (-1.0, -2.0, -0.5), 5.0, "does not hold (the opposite)"),
    ("difference", (0.5, -0.2, 1.0), 5.0, "not established"),
    # a documented loss: its size is how far from no change, whatever the sign
    ("difference", (-12.0, -14.0, -11.0), -5.0, "holds in direction, larger than documented"),
    ("difference", (-1.0, -1.5, -0.5), -5.0, "holds in direction, smaller than documented"),
    ("difference", (-4.0, -6.0, -3.0), -5.0, "holds"),
    ("share", (40.0, 38.0, 42.0), 35.0, "holds"),
    ("share", (90.0, 88.0, 92.0), 35.0, "does not hold (outside a factor of 2 of the documented value)"),
])
def test_verdict_branches(kind, values, effect, expected):
    assert claims.verdict(kind, measured(*values, kind=kind), effect) == expected


def test_a_direction_without_a_size_can_be_documented_as_a_fall():
    assert claims.verdict("ratio", measured(0.8, 0.7, 0.9), None, expect="lower") == \
        "holds (direction only; no size documented)"
    assert claims.verdict("ratio", measured(1.2, 1.1, 1.3), None, expect="lower") == "does not hold (the opposite)"
    assert claims.verdict("ratio", measured(1.0, 0.9, 1.1), None, expect="lower") == "not established"


@pytest.mark.parametrize("kind,status,said", [("ratio", "too few pairs", "too few pairs"), ("ratio", "unpaired", "unpaired"),
                                              ("ratio", "failed", "not measurable here"),
                                              ("difference", "too few pairs", "too few pairs"),
                                              ("share", "unpaired", "unpaired")])
def test_what_has_no_interval_gets_no_verdict(kind, status, said):
    """Fewer than three pairs, no set of runs that measured both cells, a failed cell: no verdict,
    whatever the value, and the reason in a word."""
    assert claims.verdict(kind, measured(3.1, 2.9, 3.3, kind, status), 3.0) == said


@pytest.mark.parametrize("value,expected", [(62.0, "holds"), (50.0, "holds"),
                                            (37.5, "does not hold (outside the documented range)")])
def test_a_documented_range_decides_a_share(value, expected):
    assert claims.verdict("share", measured(value, value, value, "share"), 62.5, [50, 75]) == expected


def test_a_share_of_fewer_than_three_runs_gets_no_verdict_like_a_ratio_of_fewer_pairs():
    runs = pd.DataFrame({"variant": "optimized", "run_set": "NVIDIA H100|0123456789ab|2026-12-06",
                         "value": [77.1, 76.0]})
    m = claims.share(runs, pd.DataFrame(), "optimized")
    assert (m["status"], m["n"], m["median"]) == ("too few runs", 2, pytest.approx(76.55))
    assert claims.verdict("share", m, 78) == "too few runs"
    m = claims.share(pd.concat([runs, runs.iloc[:1]]), pd.DataFrame(), "optimized")
    assert m["status"] == "value" and claims.verdict("share", m, 78) == "holds"


def test_a_share_whose_ceiling_is_below_the_documented_range_does_not_hold_from_one_run():
    """H100, ResNet-50 optimized's matrix kernels: achieved occupancy 17.4 % from one ncu run, their
    theoretical occupancy 18.8 %: no run can reach 50-75 %. A ceiling inside the range decides nothing."""
    one = claims.share(pd.DataFrame({"variant": "optimized", "run_set": "NVIDIA H100|0123456789ab|2026-12-06", "value": [17.4]}),
                       pd.DataFrame(), "optimized")
    assert claims.verdict("share", one, 62.5, [50, 75], ceiling=18.8) == "does not hold (its ceiling is below the documented range)"
    assert claims.verdict("share", one, 62.5, [50, 75], ceiling=60.0) == "too few runs"
    assert claims.verdict("share", one, 62.5, [50, 75]) == "too few runs"


def test_registry_covers_every_documented_claim_with_cells_of_the_matrix():
    from trainperf import config, variants
    ids = {c["id"] for c in claims.load()}
    assert ids == {"resnet50-e2e", "loader-wait", "item-sync", "time-breakdown", "compile-kernels", "amp-kernels",
                   "async-copy", "vit-dali", "tf32-tensor-cores", "channels-last", "occupancy-range",
                   "lstm-shape", "dataloader-knobs", "tf32-amp-dle"}
    names = set(variants.names(config.load()))
    named = {v for c in claims.load() for t in c["tests"] for v in (t["before"], t.get("after")) if v}
    assert named <= names, named - names  # a pair the matrix never runs would never be measured


def test_the_headline_preset_runs_every_cell_the_claims_read_in_every_repetition():
    """On a GPU (assumed here, its tools not looked for), each claim's cells run under their
    profiler in all three repetitions, or are skipped as the same knobs as a cell that runs."""
    from trainperf import config, matrix
    c = matrix.resolve(config.load(overrides={"preset": "headline", "gpu_jobs": True, "machine": "h200"}))
    cells = {tuple(x["keys"].values()): x for x in matrix.cells(c)}
    missing = []
    for t in (t for claim in claims.load() for t in claim["tests"]):
        for v, rep in ((v, r) for v in (t["before"], t.get("after")) if v for r in range(3)):
            x = cells.get((t["workload"], v, t.get("profiler", "timing"), rep))
            same = x and x["status"] == "skipped" and str(x["reason"]).startswith("same knobs as ")
            if same:
                x = cells.get((t["workload"], x["reason"].split()[3], t.get("profiler", "timing"), rep))
            if not x or x["status"] != "run":
                missing.append((t["workload"], v, t.get("profiler", "timing"), rep, x and x["reason"]))
    assert not missing


def results(paths, tmp_path, skipped=()):
    """metrics.csv and cells.csv as the pipeline writes them (what the report passes to evaluate)."""
    aggregate.main(paths, list(skipped), tmp_path, catalog=catalog())
    return pd.read_csv(tmp_path / "metrics.csv"), pd.read_csv(tmp_path / "cells.csv")


def value(path: Path, metric: str) -> float:
    return next(m["value"] for m in json.loads(path.read_text())["metrics"] if m["metric"] == metric)


def test_registry_on_real_h200_records(tmp_path):
    """Real ResNet-50 records of one set of runs, one repetition each: a pair they hold has its
    ratio but no interval, so no verdict; a pair with a cell that did not run says so."""
    paths = [H200 / f"resnet50--{v}.json" for v in ("baseline", "workers", "optimized")]
    table = claims.evaluate(*results(paths, tmp_path))
    knobs = table.set_index("id").loc["dataloader-knobs"]
    expected = value(paths[0], "input_wait_share") / value(paths[1], "input_wait_share")  # a reduction: before / after
    assert knobs.value == pytest.approx(expected) and knobs.n == 1 and knobs.run_set == ONE_SET
    assert knobs.verdict == "too few pairs" and knobs.why == "1 pair(s); an interval needs 3"
    assert pd.isna(knobs.lo) and pd.isna(knobs.hi)
    e2e = table[table.id == "resnet50-e2e"]
    assert len(e2e) == 3 and (e2e.verdict == "not run here").all()
    assert e2e.why.tolist() == ["throughput of resnet50/a002-upto-compile (timing): not run",
                                "gpu_util of resnet50/a002-upto-compile (timing): not run",
                                "gpu_kernel_share of resnet50/baseline (nsys): not run"]
    dali = table[table.id == "vit-dali"]
    assert (dali.verdict == "not run here").all() and all("not run" in why for why in dali.why)
    assert (table[table.id == "tf32-tensor-cores"].verdict == "not run here").all()
    assert table.verdict.isin(["too few pairs", "not run here"]).all()  # one repetition each: nothing established


def repeat(path: Path, out: Path, rep: int, variant: str | None = None, day: str | None = None,
           commit: str | None = None, **factors) -> Path:
    """A copy of a real record as repetition `rep` of its set of runs (same GPU, commit, day; or
    of another, on `day` or at `commit`), as `variant` where named, with each metric named in
    `factors` multiplied by its factor."""
    r = json.loads(path.read_text())
    r["keys"] = {**r["keys"], "rep": rep, **({"variant": variant} if variant else {})}
    r["started"] = (day or r["started"][:10]) + f"T{14 + rep:02d}" + r["started"][13:]  # repetition r+1 after r
    r["env"] = {**r["env"], **({"git_commit": commit} if commit else {})}
    for m in r["metrics"]:
        m["value"] *= factors.get(m["metric"], 1.0)
    dst = out / f"{r['keys']['workload']}--{r['keys']['variant']}--rep{rep}.json"
    dst.write_text(json.dumps(r))
    return dst


def test_a_claim_is_judged_on_the_gain_of_three_paired_repetitions(tmp_path):
    """Copies of the real baseline and workers records of ResNet-50 as three repetitions of their
    set of runs. loader-wait (baseline -> a002-upto-workers, which the matrix skips as having the
    knobs of workers) and dataloader-knobs (baseline -> workers) are judged on the paired ratios."""
    scale = {"baseline": [1.0, 1.01, 0.99], "workers": [1.0, 0.98, 1.03]}
    paths = [repeat(H200 / f"resnet50--{v}.json", tmp_path, rep, input_wait=f, input_wait_share=f, throughput=1 / f)
             for v, fs in scale.items() for rep, f in enumerate(fs)]
    # a fourth pair on a tree with uncommitted changes, a fifth the next day: other sets of runs
    paths += [repeat(H200 / f"resnet50--{v}.json", tmp_path, 3, commit="3f3a4b6e6edb-dirty", input_wait=f)
              for v, f in (("baseline", 1.0), ("workers", 10.0))]
    paths += [repeat(H200 / f"resnet50--{v}.json", tmp_path, 4, day="2026-12-03", input_wait=f)
              for v, f in (("baseline", 1.0), ("workers", 10.0))]
    # a sixth baseline run in the set, its workers run missing: no pair, so in neither the ratio nor its ends
    paths.append(repeat(H200 / "resnet50--baseline.json", tmp_path, 5, input_wait=100.0))
    skipped = [{"keys": {"workload": "resnet50", "variant": "a002-upto-workers", "profiler": "timing", "rep": rep},
                "reason": "same knobs as workers here"} for rep in range(3)]
    table = claims.evaluate(*results(paths, tmp_path / "out", skipped)).set_index("id")
    for claim, metric, effect, verdict in (
            ("loader-wait", "input_wait", 13.3, "holds"),
            ("dataloader-knobs", "input_wait_share", None, "holds (direction only; no size documented)")):
        row = table.loc[claim]
        ratios = [value(H200 / "resnet50--baseline.json", metric) * b / (value(H200 / "resnet50--workers.json", metric) * w)
                  for b, w in zip(scale["baseline"], scale["workers"])]
        assert row.n == 3 and row.run_set == ONE_SET
        assert row.value == pytest.approx(np.median(ratios))
        assert (row.lo, row.hi) == pytest.approx(paired.interval(np.array(ratios)))
        assert row.lo > 1 and row.verdict == verdict
        assert row["why this pair"] and row.pair.startswith(f"{metric}: baseline -> ")
    assert table.loc["loader-wait"].documented == "200 -> 15 ms/step (13.3x)"
    wait = table.loc["loader-wait"]  # the two cells' own values, over the ratio's pairs alone
    assert (wait.before_value, wait.after_value, wait.metric_unit) == pytest.approx(
        (value(H200 / "resnet50--baseline.json", "input_wait"), value(H200 / "resnet50--workers.json", "input_wait"), "ms/step"))


def test_a_failed_cell_makes_its_claim_not_measurable_with_the_reason():
    metrics = pd.DataFrame(columns=["workload", "variant", "profiler", "rep", "metric", "value", "unit", "run_set"])
    cells = pd.DataFrame([{"workload": "resnet50", "variant": "baseline", "profiler": "timing", "rep": 0,
                           "status": "failed", "reason": "out of memory (batch_size=256)", "run_set": ONE_SET}])
    rows = claims.evaluate(metrics, cells).set_index("id").loc["resnet50-e2e"]
    assert (rows.verdict == ["not measurable here", "not measurable here", "not run here"]).all()
    timing = rows[~rows.pair.str.contains("nsys")]  # throughput and gpu_util, of the timing cells
    assert len(timing) == 2 and all(why.startswith(f"{metric} of resnet50/baseline (timing): failed: out of memory")
                                    for why, metric in zip(timing.why, ("throughput", "gpu_util")))
    assert rows[rows.pair.str.contains("nsys")].why.item() == "gpu_kernel_share of resnet50/baseline (nsys): not run"


def test_a_documented_range_is_what_the_report_quotes():
    occupancy = next(c for c in claims.load() if c["id"] == "occupancy-range")
    assert claims.documented(occupancy, occupancy["tests"][0]) == "50-75 % achieved occupancy"


def test_the_tf32_claim_reads_the_tensor_pipe_of_matrix_kernels_only(tmp_path):
    """Real ncu cells of ResNet-50 on the H200: the baseline's top kernels are fp32 convolutions
    (FFMA, a sliver of tensor pipe); with TF32 the convolutions got fast enough to leave the top
    three (layout transposes and batch-norm remain), so the tf32 cell has no matrix kernel to judge
    and the claim is not measurable, not 'the opposite'."""
    captures = Path(__file__).parent / "data" / "h200-captures"
    metrics, cells = results([captures / f"resnet50-{v}-ncu" / "metrics.json" for v in ("baseline", "tf32")], tmp_path)
    summary = pd.read_csv(tmp_path / "summary.csv")
    matrix = summary[summary.metric == "matrix_tensor_pipe_util"].set_index("variant")["median"]
    overall = summary[summary.metric == "tensor_pipe_util"].set_index("variant")["median"]
    assert list(matrix.index) == ["baseline"] and matrix["baseline"] == pytest.approx(overall["baseline"])
    assert overall["tf32"] < 0.01  # its top kernels: no tensor work at all
    row = claims.evaluate(metrics, cells).set_index("id").loc["tf32-tensor-cores"]
    assert row.verdict == "not measurable here"
    assert row.why == "matrix_tensor_pipe_util of resnet50/tf32 (ncu): the cell ran; its record does not give matrix_tensor_pipe_util"


def test_every_source_a_claim_cites_is_named_with_its_title():
    from analysis import report
    cited = {s for c in claims.load() for s in c["source"].split(", ")}
    line = report.sources_line(cited)
    assert all(f"{'article ' + s if s.isdigit() else s}: \"" in line for s in cited), line


def test_a_metric_beside_a_ratio_is_read_on_the_cell_the_fix_makes(tmp_path):
    """compile-kernels per forward on real H100 records (three paired repetitions): the count rises
    under torch.compile in fp32 NCHW, and the layout transposes inductor adds are shown beside,
    read on the compiled cell (the baseline launches none)."""
    data = Path(__file__).parent / "data" / "h100-traces"
    table = claims.evaluate(*results(sorted(data.glob("*.json")), tmp_path))
    row = table[(table.id == "compile-kernels") & (table.metric == "kernels_per_forward")].iloc[0]
    forward = {v: value(data / f"resnet50--{v}--nsys--rep0.json", "kernels_per_forward") for v in ("baseline", "compile")}
    assert row.value == pytest.approx(forward["baseline"] / forward["compile"]) and row.n == 3
    assert row.verdict == "does not hold (the opposite)"
    assert (row.beside_cell, row.beside_value) == ("compile", value(data / "resnet50--compile--nsys--rep0.json",
                                                                   "layout_kernels_per_forward"))
    assert row.beside_value > 0
