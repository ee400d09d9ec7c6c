"""How long a preset would take on a machine, from that machine's own runs: tested on two real
H100 sets of ResNet-50 (baseline, workers, optimized) and a real H200 compile stage."""
from pathlib import Path

import pandas as pd
import pytest

from analysis import aggregate
from trainperf import cli, config, estimate, matrix, variants

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def h100(tmp_path_factory):
    out = tmp_path_factory.mktemp("results") / "h100"
    aggregate.main(sorted((DATA / "h100-two-sets").glob("*.json")), [], out, catalog=variants.catalog(config.load()))
    return out


def gpu_config(**overrides):
    return {**matrix.resolve(config.load(overrides={"gpu_jobs": True, "machine": "h100", "preset": "headline",
                                                     **overrides})), "gpus": 1}


def test_a_cell_is_timed_by_its_own_runs_else_by_its_workloads_else_not_at_all(h100):
    past = pd.read_csv(h100 / "cells.csv")
    runs = estimate.cell_times(gpu_config(workloads=["resnet50", "lstm"], variants=["baseline", "optimized", "amp"],
                                          profilers=["timing"]), past)
    basis = runs.drop_duplicates(["workload", "variant"]).set_index(["workload", "variant"]).basis
    assert basis[("resnet50", "baseline")] == basis[("resnet50", "optimized")] == "the cell's runs"
    assert basis[("resnet50", "amp")] == "its workload's runs" and basis[("lstm", "baseline")] == "no run"
    mine = past[(past.variant == "optimized") & (past.profiler == "timing")].seconds.median()
    assert runs[(runs.workload == "resnet50") & (runs.variant == "optimized")].seconds.tolist() == [mine] * 3
    resnet = runs[runs.workload == "resnet50"]  # the LSTM is not compiled (dynamo does not trace nn.LSTM)
    assert resnet[resnet.variant == "optimized"].compile_key.notna().all() and runs[runs.variant != "optimized"].compile_key.isna().all()


def test_the_compile_stage_builds_its_folders_so_many_at_a_time_on_a_cold_cache():
    compiles = aggregate.compile_table(sorted((DATA / "h200-compiles").glob("*.json")))
    keys = set(compiles.key)
    times = compiles.groupby("key").seconds.median()
    stage, unknown = estimate.compile_stage_s(keys, compiles, 4)
    assert unknown == 0 and stage == pytest.approx(max(times.max(), times.sum() / 4))
    stage, unknown = estimate.compile_stage_s({"transformer_lm-000000000000", "lstm-000000000000"}, compiles, 1)
    assert unknown == 1 and stage == pytest.approx(compiles[compiles.workload == "transformer_lm"].seconds.median())


def test_the_estimate_command_prints_per_workload_and_profiler_and_says_what_it_leaves_out(h100, capsys):
    assert cli.main(["estimate", str(h100), "--workloads", "resnet50", "lstm", "--variants", "baseline", "optimized",
                     "--profilers", "timing"]) == 0
    out = capsys.readouterr().out
    assert "resnet50       timing       6 runs" in out and "lstm           timing       6 runs" in out
    assert "(6 never run on h100: not counted)" in out and out.strip().splitlines()[-1].startswith("total: ")


def test_a_run_that_compiled_in_its_cell_counts_as_if_the_compile_stage_had_built_its_graphs():
    """The stage's time is estimated apart: a cell's runs that loaded their graphs stand for it,
    else its compiled runs less the first step that compiled."""
    cells = pd.DataFrame([("a", 10.0, None), ("a", 12.0, None), ("a", 60.0, 50.0), ("b", 60.0, 50.0), ("b", 62.0, 50.0)],
                         columns=["variant", "seconds", "compile_s"]).assign(workload="resnet50", profiler="timing", status="ok")
    s = estimate.past_seconds(cells, ["workload", "variant", "profiler"])
    assert s[("resnet50", "a", "timing")] == 11.0 and s[("resnet50", "b", "timing")] == 11.0


def test_a_matrix_with_nothing_to_run_takes_no_time(h100):
    e = estimate.estimate(gpu_config(workloads=["resnet50"], variants=["ddp8"], profilers=["timing"]), h100)
    assert e["total_s"] == 0 and e["table"].empty


def test_a_folder_without_tables_is_one_line_before_anything_runs(tmp_path, capsys):
    assert cli.main(["estimate", str(tmp_path / "h100")]) == 2
    assert capsys.readouterr().err.strip() == (f"trainperf: {tmp_path / 'h100'}: no cells.csv here; estimate reads a "
                                               "results folder the pipeline wrote (results/<machine>)")
