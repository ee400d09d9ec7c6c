"""Aggregation on real run records made on an H200 (tests/data/h200-timing) and on records of
every status."""
import json
from pathlib import Path

import pandas as pd
import pytest

from analysis import aggregate
from analysis.tables import row

H200 = sorted((Path(__file__).parent / "data" / "h200-timing").glob("*.json"))


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    out = tmp_path_factory.mktemp("h200")
    skipped = [{"keys": {"workload": "lstm", "variant": "dali", "profiler": "timing", "rep": 0},
                "reason": "DALI decodes images; lstm reads tokens"},
               {"keys": {"workload": "vit_b_16", "variant": "optimized+fused-sgd", "profiler": "timing", "rep": 0},
                "status": "set aside", "reason": "set aside, to rerun"}]
    return aggregate.main(H200, skipped, out), out


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


def test_speedup_and_loss_check_against_the_baseline(tmp_path):
    data = Path(__file__).parent / "data" / "h200-timing"
    paths = [data / "resnet50--baseline.json", data / "resnet50--optimized.json", data / "resnet50--workers.json"]
    summary = aggregate.main(paths, [], tmp_path / "out")
    value = summary.set_index(["variant", "metric"])["median"]
    for variant in ("optimized", "workers"):
        ratio = value[variant, "throughput"] / value["baseline", "throughput"]
        assert value[variant, "speedup"] == pytest.approx(ratio) and ratio > 1
    assert value["baseline", "speedup"] == 1.0 and value["baseline", "loss_vs_baseline"] == 0.0
    loss = value["optimized", "final_loss"] / value["baseline", "final_loss"] - 1
    assert value["optimized", "loss_vs_baseline"] == pytest.approx(100 * loss)
    flagged = {v for v in ("optimized", "workers") if value[v, "loss_vs_baseline"] > aggregate.LOSS_TOLERANCE}
    assert set(aggregate.loss_flags(summary).variant) == flagged


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
    set of runs (repetition 1), and repetition 0 of each from two different sets (another day's
    machine). Only the pair of one set gives a paired ratio; the unpaired one mixes machines."""
    records = sorted((Path(__file__).parent / "data" / "h200-pairs").glob("*.json"))
    tput = {p.stem: next(m["value"] for m in json.loads(p.read_text())["metrics"] if m["metric"] == "throughput")
            for p in records}
    summary = aggregate.main(records, [], tmp_path)
    paired = row(summary, "vit_b_16", "optimized+bf16-fused-sgd", "vs_optimized_paired")
    lever, ref = "vit_b_16--optimized+bf16-fused-sgd--rep1", "vit_b_16--optimized--rep1"
    assert paired["n"] == 1 and paired["median"] == pytest.approx(tput[lever] / tput[ref])
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    assert metrics[metrics.metric == "vs_optimized_paired"].rep.tolist() == [1]
    unpaired = row(summary, "vit_b_16", "optimized+bf16-fused-sgd", "throughput")["median"] / \
        row(summary, "vit_b_16", "optimized", "throughput")["median"]
    assert unpaired > paired["median"] + 0.05  # rep 0's optimized ran on a slower day


def test_a_run_that_compiled_its_graphs_counts_once_per_cache_folder(tmp_path):
    """Real ViT-B/16 records of the H200: repetition 0 of `optimized+bf16-fused-sgd` compiled its
    graphs (an empty cache), repetition 1 loaded them, `optimized` rep 1 loaded its own. The
    compile's cost is rep 0's first step, under the cache folder of its knobs."""
    from analysis.sections import cost_section
    from workloads import config, matrix
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
