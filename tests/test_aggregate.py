"""Aggregation on real run records made on an H200 (tests/data/h200-timing) and on records of
every status."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import aggregate, paired
from analysis.tables import row

H200 = sorted((Path(__file__).parent / "data" / "h200-timing").glob("*.json"))
DATA = Path(__file__).parent / "data" / "h200-timing"
ONE_SET = "NVIDIA H200|3f3a4b6e6edb|2026-12-02"  # resnet50's baseline, workers, dali and optimized: one set of runs


def catalog():
    """The variants of the config, as the pipeline passes them (kind, order, what each is about)."""
    from trainperf import config, variants
    return variants.catalog(config.load())


def ratio(out: Path, before: str, after: str, profiler: str = "timing", workload: str = "resnet50"):
    """The one row of ratios.csv for a comparison."""
    r = pd.read_csv(out / "ratios.csv")
    r = r[(r.workload == workload) & (r.before == before) & (r.after == after) & (r.profiler == profiler)]
    assert len(r) == 1, (before, after, profiler)
    return r.iloc[0]


def tput(path: Path) -> float:
    return next(m["value"] for m in json.loads(path.read_text())["metrics"] if m["metric"] == "throughput")


def repeat(path: Path, out: Path, rep: int, scale: float = 1.0, day: str | None = None, commit: str | None = None,
           gpu_uuid: str | None = None) -> Path:
    """A copy of a real record as repetition `rep` of its set of runs (or of another: on `day`, at
    `commit`, on the GPU `gpu_uuid`), its throughput times `scale`."""
    r = json.loads(path.read_text())
    r["keys"] = {**r["keys"], "rep": rep}
    r["started"] = (day or r["started"][:10]) + f"T{14 + rep:02d}" + r["started"][13:]  # repetition r+1 after r
    r["env"] = {**r["env"], **({"git_commit": commit} if commit else {}), **({"gpu_uuid": gpu_uuid} if gpu_uuid else {})}
    for m in r["metrics"]:
        m["value"] *= scale if m["metric"] == "throughput" else 1.0
    dst = out / f"{r['keys']['workload']}--{r['keys']['variant']}--rep{rep}--{day}-{commit}-{gpu_uuid}.json"
    dst.write_text(json.dumps(r))
    return dst


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    out = tmp_path_factory.mktemp("h200")
    skipped = [{"keys": {"workload": "lstm", "variant": "dali", "profiler": "timing", "rep": 0},
                "reason": "DALI decodes images; lstm reads tokens"},
               {"keys": {"workload": "vit_b_16", "variant": "optimized+fused-sgd", "profiler": "timing", "rep": 0},
                "status": "set aside", "reason": "set aside, to rerun"}]
    return aggregate.main(H200, skipped, out, catalog=catalog()), out


def test_gpu_records_give_gpu_metrics(h200):
    summary, out = h200
    ok = summary[summary.status == "ok"]
    units = dict(zip(ok.metric, ok.unit))
    assert units["peak_memory"] == "GiB" and units["gpu_util"] == "%" and units["gpu_step_time"] == "ms"
    assert units["token_throughput"] == "tokens/s" and units["throughput"] == "samples/s"
    assert (ok.n == 1).all() and (ok.lo <= ok["median"]).all() and (ok["median"] <= ok.hi).all()
    env = json.loads((out / "env.json").read_text())
    assert {e["gpu"] for e in env} == {"NVIDIA H200"}
    # each environment says which runs it holds
    assert sum(e["runs"] for e in env) == len(H200) and all(e["dates"].startswith("2026-") for e in env)
    assert len(env) > 1 and [e["first_started"] for e in env] == sorted(e["first_started"] for e in env)


def test_each_run_carries_its_set_of_runs_and_each_variant_its_kind(h200):
    """metrics.csv and cells.csv name each run's set of runs (GPU, commit, day from its record);
    variants.csv carries the catalog's kind, order and what a variant is about, for the report."""
    summary, out = h200
    metrics, cells = pd.read_csv(out / "metrics.csv"), pd.read_csv(out / "cells.csv")
    for path in H200:
        record = json.loads(path.read_text())
        expected = paired.run_set(record["env"], record["started"])
        keys = (cells.workload == record["keys"]["workload"]) & (cells.variant == record["keys"]["variant"])
        assert cells[keys].run_set.tolist() == [expected]
        keys = (metrics.workload == record["keys"]["workload"]) & (metrics.variant == record["keys"]["variant"])
        assert (metrics[keys & (metrics.metric == "throughput")].run_set == expected).all()
    assert cells[cells.status.isin(["skipped", "set aside"])].run_set.isna().all()  # no record, no set
    assert ONE_SET in set(cells.run_set)
    v = pd.read_csv(out / "variants.csv").set_index(["workload", "variant"])
    meta = {c["variant"]: c for c in catalog()}
    for key in (("resnet50", "baseline"), ("resnet50", "optimized-no-amp"), ("lstm", "optimized-no-pinned-async"),
                ("vit_b_16", "amp-bf16"), ("resnet50", "optimized+bf16"), ("resnet50", "a002-upto-compile")):
        c = meta[key[1]]
        assert (v.loc[key, "kind"], v.loc[key, "order"]) == (c["kind"], c["order"])
        for column in ("about", "chain"):  # empty where the catalog has none
            assert (v.loc[key, column] if isinstance(v.loc[key, column], str) else "") == c.get(column, "")
    assert v.loc[("resnet50", "a002-upto-compile"), "chain"] == "a002"
    assert v.loc[("resnet50", "optimized-no-amp"), "kind"] == "ablation" and v.loc[("resnet50", "optimized-no-amp"), "about"] == "amp"
    assert not {"speedup", "vs_optimized_paired"} & set(summary.metric)  # ratios are paired: ratios.csv


def test_skipped_cells_keep_their_reason(h200):
    summary, out = h200
    row = summary[(summary.workload == "lstm") & (summary.variant == "dali")]
    assert row.status.tolist() == ["skipped"] and "DALI decodes images" in row.reason.iloc[0]
    cells = pd.read_csv(out / "cells.csv")
    assert len(cells) == len(H200) + 2 and set(cells.status) == {"ok", "failed", "skipped", "set aside"}
    aside = summary[(summary.workload == "vit_b_16") & (summary.variant == "optimized+fused-sgd")]
    assert aside.status.tolist() == ["set aside"] and aside.reason.iloc[0] == "set aside, to rerun"


def test_a_failed_cell_is_data_not_a_number(h200):
    summary, _ = h200
    rows = summary[(summary.workload == "transformer_lm") & (summary.variant == "optimized")]
    assert rows.status.tolist() == ["failed"] and "non-finite loss" in rows.reason.iloc[0]
    assert rows["median"].isna().all()


def test_paired_speedup_and_loss_check_against_the_baseline(tmp_path):
    """Real ResNet-50 records of one set of runs (one GPU, commit and day), one repetition each:
    each variant's speedup is the ratio of its run to the baseline's run of the same repetition,
    one pair, so no interval."""
    paths = [DATA / "resnet50--baseline.json", DATA / "resnet50--optimized.json", DATA / "resnet50--workers.json"]
    summary = aggregate.main(paths, [], tmp_path / "out", catalog=catalog())
    value = summary.set_index(["variant", "metric"])["median"]
    assert not {"speedup", "vs_optimized_paired"} & set(summary.metric)
    for variant in ("optimized", "workers"):
        r = ratio(tmp_path / "out", "baseline", variant)
        expected = tput(DATA / f"resnet50--{variant}.json") / tput(paths[0])
        assert r["median"] == pytest.approx(expected, rel=1e-5) and r["median"] > 1  # ratios.csv: 6 digits
        assert (r.n, r.status, r.run_set, r.metric) == (1, "too few pairs", ONE_SET, "throughput")
        assert pd.isna(r.lo) and pd.isna(r.hi)
    ratios = pd.read_csv(tmp_path / "out" / "ratios.csv")
    assert set(zip(ratios.before, ratios.after)) == {("baseline", "optimized"), ("baseline", "workers")}
    assert value["baseline", "loss_vs_baseline"] == 0.0
    loss = value["optimized", "final_loss"] / value["baseline", "final_loss"] - 1
    assert value["optimized", "loss_vs_baseline"] == pytest.approx(100 * loss)
    flagged = {v for v in ("optimized", "workers") if value[v, "loss_vs_baseline"] > aggregate.LOSS_TOLERANCE}
    assert set(aggregate.loss_flags(summary).variant) == flagged


def test_a_speedup_of_three_paired_repetitions_has_its_interval(tmp_path):
    """Copies of the real baseline and workers records of ResNet-50 as three repetitions of their
    set of runs, and further pairs from other sets: a tree with uncommitted changes, the next
    day, another GPU. The ratio rests on the three pairs of one set: the median of the ratios of
    the runs of each repetition, its 95 % interval; the other sets' runs pair with none of them."""
    scale = {"baseline": [1.0, 1.02, 0.97], "workers": [1.0, 0.99, 1.04]}
    paths = [repeat(DATA / f"resnet50--{v}.json", tmp_path, rep, f) for v, fs in scale.items() for rep, f in enumerate(fs)]
    for rep, other in enumerate(({"commit": "3f3a4b6e6edb-dirty"}, {"day": "2026-12-03"},
                                 {"gpu_uuid": "GPU-65f1ea9d-12db-24d6-1834-662f0f32fddd"}), start=3):
        paths += [repeat(DATA / "resnet50--baseline.json", tmp_path, rep, 1.0, **other),
                  repeat(DATA / "resnet50--workers.json", tmp_path, rep, 0.1, **other)]  # a tenth: it would show
    # optimized ran on another day only: nothing to pair it with
    paths.append(repeat(DATA / "resnet50--optimized.json", tmp_path, 0, day="2026-12-03"))
    aggregate.main(paths, [], tmp_path / "out", catalog=catalog())
    cells = pd.read_csv(tmp_path / "out" / "cells.csv")
    assert cells.run_set.nunique() == 4 and (cells.run_set == ONE_SET).sum() == 6
    ratios = [tput(DATA / "resnet50--workers.json") * w / (tput(DATA / "resnet50--baseline.json") * b)
              for b, w in zip(scale["baseline"], scale["workers"])]
    r = ratio(tmp_path / "out", "baseline", "workers")
    assert (r.n, r.run_set, r.status) == (3, ONE_SET, "gain")
    assert r["median"] == pytest.approx(np.median(ratios), rel=1e-5)  # ratios.csv: 6 digits
    assert (r.lo, r.hi) == pytest.approx(paired.interval(np.array(ratios)), rel=1e-5)
    assert 1 < r.lo < r["median"] < r.hi
    r = ratio(tmp_path / "out", "baseline", "optimized")
    assert r.status == "unpaired" and r.n == 0 and pd.isna(r["median"])


def test_ratios_compare_what_the_report_shows():
    """Per workload: every variant against the baseline, each lever and ablation against
    optimized, each stage against the stage before it in its own chain (a stage skipped as having
    another variant's knobs is measured as that one); under the timing and the step profilers."""
    variants = {"timing": ["baseline", "workers", "optimized", "optimized+bf16", "optimized-no-amp", "upto-workers",
                           "upto-lazy-sync", "upto-amp", "a002-upto-workers", "a002-upto-lazy-sync"],
                "step": ["optimized", "ladder-upto-tf32", "ladder-upto-amp"]}
    same = {"upto-workers": "workers", "a002-upto-workers": "workers"}  # the matrix skips them
    cells = pd.DataFrame([{"workload": "resnet50", "variant": v, "profiler": p, "rep": rep,
                           "status": "skipped" if v in same else "ok",
                           "reason": f"same knobs as {same[v]} here" if v in same else None,
                           "run_set": None if v in same else ONE_SET}
                          for p, vs in variants.items() for v in vs for rep in range(3)])
    metrics = pd.DataFrame([{**c, "metric": "throughput", "value": 100.0 * (1 + variants[c["profiler"]].index(c["variant"])),
                             "unit": "samples/s"} for c in cells[cells.status == "ok"].to_dict("records")])
    table = aggregate.ratio_table(metrics, cells, catalog())
    timing = set(zip(*(table[table.profiler == "timing"][k] for k in ("before", "after"))))
    assert timing == {
        *(("baseline", v) for v in variants["timing"][1:]),
        ("optimized", "optimized+bf16"), ("optimized", "optimized-no-amp"),
        ("upto-workers", "upto-lazy-sync"), ("upto-lazy-sync", "upto-amp"),
        ("a002-upto-workers", "a002-upto-lazy-sync")}  # never the last stage of one chain against another's
    step = table[table.profiler == "step"].set_index(["before", "after"])
    assert set(step.index) == {("baseline", "optimized"), ("baseline", "ladder-upto-tf32"), ("baseline", "ladder-upto-amp"),
                               ("ladder-upto-tf32", "ladder-upto-amp")}
    assert (step.loc["baseline"].status == "unpaired").all()  # the baseline's step alone did not run
    assert step.loc[("ladder-upto-tf32", "ladder-upto-amp"), "median"] == pytest.approx(1.5)
    assert step.loc[("ladder-upto-tf32", "ladder-upto-amp"), ["n", "status"]].tolist() == [3, "gain"]
    table = table[table.profiler == "timing"]
    r = table.set_index(["before", "after"])
    assert r.loc[("baseline", "upto-workers"), "median"] == pytest.approx(2.0)  # measured as workers
    assert r.loc[("upto-workers", "upto-lazy-sync"), "median"] == pytest.approx(7 / 2)
    assert r.loc[("optimized", "optimized-no-amp"), "median"] == pytest.approx(5 / 3)
    assert (table.n == 3).all() and (table.run_set == ONE_SET).all()


def test_a_repetition_without_a_baseline_run_is_checked_against_the_other_repetitions(tmp_path):
    """A real optimized run moved to repetition 2, where no baseline ran: its loss is compared with
    repetition 0's baseline at the same steps, as it would be in its own repetition."""
    data = Path(__file__).parent / "data" / "h200-timing"
    moved = json.loads((data / "resnet50--optimized.json").read_text())
    moved["keys"]["rep"] = 2
    (tmp_path / "moved.json").write_text(json.dumps(moved))
    paths = [data / "resnet50--baseline.json", data / "resnet50--optimized.json"]
    same = aggregate.main(paths, [], tmp_path / "same")
    other = aggregate.main([paths[0], tmp_path / "moved.json"], [], tmp_path / "other")
    loss = [s[(s.variant == "optimized") & (s.metric == "loss_vs_baseline")]["median"].item() for s in (same, other)]
    assert loss[1] == pytest.approx(loss[0]) and loss[0] != 0


def test_unreadable_record_names_the_file(tmp_path):
    bad = tmp_path / "metrics.json"
    bad.write_text('{"keys": ')
    with pytest.raises(ValueError, match=f"unreadable run record {bad}"):
        aggregate.main([bad], [], tmp_path / "out")


def test_a_cell_that_failed_in_one_run_and_trained_in_another_says_so(tmp_path):
    """Real H200 records of one cell: repetition 0 went NaN, repetition 1 trained. Its figures come
    from the run that trained, and the cell carries how often it failed and why."""
    paths = sorted((Path(__file__).parent / "data" / "h200-repeats").glob("*.json"))
    summary = aggregate.main(paths, [], tmp_path)
    rows = summary[(summary.variant == "optimized+bf16")]
    tput = rows[rows.metric == "throughput"].iloc[0]
    assert tput.status == "ok" and tput.n == 1 and tput.failed == 1
    assert tput.reason.startswith("failed in 1 of 2 runs: non-finite loss")
    assert (rows.failed == 1).all()
    shaky = aggregate.unreliable(summary)
    assert shaky[["variant", "profiler", "how_often"]].values.tolist() == [["optimized+bf16", "timing", "failed in 1 of 2 runs"]]
    base = summary[(summary.variant == "baseline") & (summary.metric == "throughput")].iloc[0]
    assert base.n == 2 and base.failed == 0 and pd.isna(base.reason)


def test_time_per_step_is_what_the_throughput_says_not_the_median_step(h200):
    """Reading the loss every 10 steps, the LSTM's fp32 steps are queued in ~12 ms and one step in
    ten waits for the GPU: the median step hides it, the time per step does not."""
    summary, _ = h200
    tput, median, mean = (row(summary, "lstm", "optimized-no-amp", m)["median"]
                          for m in ("throughput", "step_time", "step_time_mean"))
    record = json.loads((H200[0].parent / "lstm--optimized-no-amp.json").read_text())
    assert mean == pytest.approx(1e3 * record["params"]["batch_size"] / tput)
    assert mean > 4 * median
    # where no step waits on the others, the two agree
    tput, median, mean = (row(summary, "resnet50", "optimized", m)["median"]
                          for m in ("throughput", "step_time", "step_time_mean"))
    assert mean == pytest.approx(median, rel=0.1)


def test_a_kernels_mean_duration_is_its_time_per_step_over_its_calls():
    captures = Path(__file__).parent / "data" / "h200-captures"
    records = aggregate.load_records([captures / "resnet50-baseline-torch" / "metrics.json",
                                      captures / "resnet50-baseline-nsys" / "metrics.json",
                                      captures / "resnet50-baseline-ncu" / "metrics.json"])
    kernels = aggregate.kernel_table(records)
    timeline = kernels[kernels.profiler.isin(["torch", "nsys"])]
    assert set(timeline.profiler) == {"torch", "nsys"} and timeline.mean_us.dtype == float
    assert (timeline.mean_us == 1e3 * timeline.ms_per_step / timeline.calls_per_step).all()
    # the same top kernel seen by both profilers of the same cell: the same order of duration
    first = timeline[timeline["rank"] == 1].set_index("profiler").mean_us
    assert first["torch"] == pytest.approx(first["nsys"], rel=0.5)
    assert kernels[kernels.profiler == "ncu"].mean_us.isna().all()  # ncu measures its own durations


def test_a_lever_is_paired_with_optimized_only_within_one_set_of_runs(tmp_path):
    """Real ViT-B/16 records of the H200: `optimized` and `optimized+bf16-fused-sgd` measured in one
    set of runs (repetition 1), repetition 0 of the lever in that set too, and repetition 0 of
    `optimized` from an earlier set (a tree with uncommitted changes, a slower machine). Only the
    pair of one repetition in one set gives the ratio; the unpaired one mixes machines."""
    records = sorted((Path(__file__).parent / "data" / "h200-pairs").glob("*.json"))
    tput = {p.stem: next(m["value"] for m in json.loads(p.read_text())["metrics"] if m["metric"] == "throughput")
            for p in records}
    summary = aggregate.main(records, [], tmp_path, catalog=catalog())
    lever, ref = "vit_b_16--optimized+bf16-fused-sgd--rep1", "vit_b_16--optimized--rep1"
    r = ratio(tmp_path, "optimized", "optimized+bf16-fused-sgd", workload="vit_b_16")
    assert (r.n, r.status, r.run_set) == (1, "too few pairs", "NVIDIA H200|5ca79efa8af6|2026-12-03")
    assert r["median"] == pytest.approx(tput[lever] / tput[ref], rel=1e-5)
    cells = pd.read_csv(tmp_path / "cells.csv").set_index(["variant", "rep"]).run_set
    assert cells["optimized", 0] == "NVIDIA H200|fdc754e5b7cd-dirty|2026-12-03"
    assert cells["optimized+bf16-fused-sgd", 0] == cells["optimized+bf16-fused-sgd", 1] == cells["optimized", 1] == r.run_set
    # no baseline ran: against the baseline the lever has no ratio at all
    assert ratio(tmp_path, "baseline", "optimized+bf16-fused-sgd", workload="vit_b_16").status == "unpaired"
    unpaired = row(summary, "vit_b_16", "optimized+bf16-fused-sgd", "throughput")["median"] / \
        row(summary, "vit_b_16", "optimized", "throughput")["median"]
    assert unpaired > r["median"] + 0.05  # rep 0's optimized ran on a slower day


def test_a_run_that_compiled_its_graphs_counts_once_per_cache_folder(tmp_path):
    """Real ViT-B/16 records of the H200: repetition 0 of `optimized+bf16-fused-sgd` compiled its
    graphs (an empty cache), repetition 1 loaded them, `optimized` rep 1 loaded its own. The
    compile's cost is rep 0's first step, under the cache folder of its knobs."""
    from analysis.sections import cost_section
    from trainperf import config, matrix
    from workloads.compiled import cache_key
    records = sorted((Path(__file__).parent / "data" / "h200-pairs").glob("*.json"))
    # a cell the machine skips and one whose record was set aside: the matrix counts the second
    keys = {"workload": "vit_b_16", "profiler": "timing", "rep": 0}
    aggregate.main(records, [{"keys": {**keys, "variant": "ddp2"}, "reason": "ddp2 needs 2 GPUs; this machine has 1"},
                             {"keys": {**keys, "variant": "tf32"}, "status": "set aside", "reason": "to rerun"}], tmp_path)
    cells = pd.read_csv(tmp_path / "cells.csv")
    cold = cells[cells.compile_s.notna()]
    assert cold[["variant", "rep"]].values.tolist() == [["optimized+bf16-fused-sgd", 0]]
    assert cold.compile_s.iloc[0] == pytest.approx(cold.first_step_s.iloc[0]) and cold.compile_s.iloc[0] > 10
    # the record predates records naming their cache folder: it is the one the cell uses today
    today = matrix.cell(matrix.resolve(config.load(overrides={"preset": "gpu", "gpu_jobs": True, "machine": "h200"})),
                        "vit_b_16", "optimized+bf16-fused-sgd")
    assert cold.compile_key.iloc[0] == cache_key(today["spec"])
    text = cost_section(cells)
    assert "over 1 distinct sets of traced knobs" in text and f"{cold.compile_s.iloc[0]:.3g} s for the 1" in text
    # the timing runs' steps alone: each run's time less its first step and its setup
    timed = cells[(cells.profiler == "timing") & cells[["seconds", "first_step_s", "setup_s"]].notna().all(axis=1)]
    steps = (timed.seconds - timed.first_step_s - timed.setup_s)
    assert len(timed) >= 2 and (steps > 0).all()
    assert f"{steps.sum():.3g} s over {len(timed)} runs, {steps.mean():.3g} s a run on average" in text
    # the matrix's timing runs at that average: the runs with a record and the set-aside one, not the skipped one
    n = len(cells[(cells.profiler == "timing") & cells.status.isin(["ok", "failed"])]) + 1
    assert f"holds {n} timing runs on this machine" in text
    assert f"take {n * steps.mean():.3g} s one after another" in text


def test_a_profiled_run_s_loss_is_checked_against_the_baseline_s_run_under_the_same_profiler(tmp_path):
    """Real ResNet-50 records of the H200: the nsys cells of baseline and optimized stop at other
    steps than the timing cells and train on their own: optimized's nsys run compares with the
    baseline's nsys run at their common steps, never with the baseline's timing run."""
    data, captures = Path(__file__).parent / "data" / "h200-timing", Path(__file__).parent / "data" / "h200-captures"
    paths = [data / "resnet50--baseline.json", data / "resnet50--optimized.json",
             captures / "resnet50-baseline-nsys" / "metrics.json", captures / "resnet50-optimized-nsys" / "metrics.json"]
    records = aggregate.load_records(paths)
    summary = aggregate.main(paths, [], tmp_path)
    losses = aggregate.step_losses(records).set_index(["variant", "profiler", "step"]).loss.sort_index()
    for profiler in ("timing", "nsys"):
        mine, base = losses["optimized", profiler], losses["baseline", profiler]
        common = sorted(set(mine.index) & set(base.index))[-aggregate.LOSS_STEPS:]
        expected = 100 * (mine[common].mean() / base[common].mean() - 1)
        assert row(summary, "resnet50", "optimized", "loss_vs_baseline", profiler)["median"] == pytest.approx(expected)
    mine, base = losses["optimized", "nsys"], losses["baseline", "timing"]  # what pairing across profilers gives
    common = sorted(set(mine.index) & set(base.index))[-aggregate.LOSS_STEPS:]
    assert 100 * (mine[common].mean() / base[common].mean() - 1) != pytest.approx(expected, abs=0.1)


def test_what_the_pipeline_publishes_sets_aside_records_of_an_uncommitted_tree(tmp_path):
    """The H200's repeats were made from uncommitted trees (their commits end in -dirty): the
    published tables hold none of their values and no environment of theirs, and say why."""
    from trainperf import cli
    repeats = sorted((Path(__file__).parent / "data" / "h200-repeats").glob("*.json"))
    assert cli.main(["aggregate", *map(str, repeats), "--out-dir", str(tmp_path)]) == 0
    cells = pd.read_csv(tmp_path / "cells.csv")
    assert set(cells.status) == {"set aside"} and cells.reason.str.contains("uncommitted changes").all()
    assert json.loads((tmp_path / "env.json").read_text()) == []
