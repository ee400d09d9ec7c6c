"""`snakemake --cores 1` on the cpu preset, end to end in a temporary copy of the project: every
cell of the matrix ends in summary.csv, run or skipped with its reason; a second call is a no-op."""
import json
import os
import shutil
import tarfile
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import copy_workflow
import workloads
from trainperf import config, matrix

ROOT = Path(__file__).resolve().parent.parent


def snakemake(workdir, *args):
    """The pipeline's records name this checkout's last commit, edits in the tree or not: the tables
    publish them (a record of an uncommitted tree is set aside)."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--directory", str(workdir), *args]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "TRAINPERF_GIT_COMMIT": head or "unknown"})


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    work = tmp_path_factory.mktemp("project")
    copy_workflow(work)
    done = snakemake(work, "--config", "preset=cpu")
    assert done.returncode == 0, done.stderr[-3000:]
    return work


@pytest.mark.slow
def test_every_cell_is_run_or_skipped_with_a_reason(pipeline):
    cells = matrix.cells(matrix.resolve(config.load(overrides={"preset": "cpu"})))
    summary = pd.read_csv(pipeline / "results/cpu/summary.csv")
    table = pd.read_csv(pipeline / "results/cpu/cells.csv")
    assert len(table) == len(cells)
    for c in cells:
        k = c["keys"]
        rows = summary[(summary.workload == k["workload"]) & (summary.variant == k["variant"])
                       & (summary.profiler == k["profiler"])]
        assert len(rows), f"{k} missing from summary.csv"
        if c["status"] == "skipped":
            assert rows.status.tolist() == ["skipped"] and rows.reason.iloc[0] == c["reason"]
        else:
            assert rows.status.eq("ok").all(), rows[["status", "reason"]].to_dict("records")
            tput = rows[rows.metric == "throughput"].iloc[0]
            assert tput["n"] == 1 and tput["lo"] <= tput["median"] <= tput["hi"] and tput["median"] > 0


@pytest.mark.slow
def test_summary_has_the_documented_columns_and_derived_rows(pipeline):
    summary = pd.read_csv(pipeline / "results/cpu/summary.csv")
    assert {"workload", "variant", "profiler", "metric", "unit", "median", "lo", "hi", "n"} <= set(summary)
    ratios = pd.read_csv(pipeline / "results/cpu/ratios.csv")  # one repetition: no pair gives an interval
    speedups = ratios[(ratios.before == "baseline") & (ratios.profiler == "timing")]
    assert set(speedups.workload) == set(workloads.names()) and not speedups.lo.notna().any()
    assert set(speedups.status) <= {"too few pairs", "unpaired", "failed"}
    assert set(summary[summary.metric == "loss_vs_baseline"].unit) == {"%"}
    report = (pipeline / "results/cpu/REPORT.md").read_text()
    assert "CPU preset" in report and "## resnet50" in report and "## Documented claims" in report
    metrics = pd.read_csv(pipeline / "results/cpu/metrics.csv")
    assert set(metrics.metric) >= {"throughput", "step_time", "input_wait_share", "final_loss", "warmup_time"}
    # the loader alone sets a ceiling; the training of the same cell reaches a share of it
    used = summary[(summary.metric == "input_ceiling_used") & (summary.workload == "resnet50")]
    assert set(used.variant) == {"baseline", "workers", "dali"} and (used["median"] > 0).all()
    # the step alone sets the other ceiling
    step = summary[(summary.metric == "step_ceiling_used") & (summary.workload == "resnet50")]
    assert set(step.variant) == {"baseline", "optimized"} and (step["median"] > 0).all()
    assert "### Ceilings: the loader alone and the step alone" in (pipeline / "results/cpu/APPENDIX.md").read_text()


@pytest.mark.slow
def test_every_run_says_what_it_cost_the_matrix(pipeline):
    cells = pd.read_csv(pipeline / "results/cpu/cells.csv")
    ran = cells[cells.status != "skipped"]
    assert len(ran) and (ran.seconds > 0).all()
    ok = ran[ran.status == "ok"]
    # the first step and the setup are parts of the run's time
    assert (ok.first_step_s > 0).all() and (ok.setup_s > 0).all()
    assert (ok.first_step_s + ok.setup_s < ok.seconds).all()
    appendix = (pipeline / "results/cpu/APPENDIX.md").read_text()  # what the matrix took: in the appendix
    total = next(line for line in appendix.splitlines() if line.startswith("| all |"))
    assert f"| {len(ran)} |" in total


@pytest.mark.slow
def test_runs_record_their_environment_and_a_second_call_does_nothing(pipeline):
    record = next((pipeline / "runs/cpu/resnet50/baseline/timing/rep0").glob("metrics.json"))
    assert '"torch"' in record.read_text() and '"git_commit"' in record.read_text()
    with tarfile.open(pipeline / "results/cpu/records/metrics-json.tgz") as packed:  # the published raw records
        names = packed.getnames()
    assert "./resnet50/baseline/timing/rep0/metrics.json" in names
    assert len(names) == len(list((pipeline / "runs/cpu").rglob("metrics.json")))
    skipped = json.loads((pipeline / "results/cpu/records/skipped.json").read_text())
    assert skipped and all(s["reason"] for s in skipped)
    again = snakemake(pipeline, "--config", "preset=cpu", "-n")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def test_gpu_nodes_declared_on_the_command_line_as_the_readme_writes_it(tmp_path):
    """`--config gpu_jobs=true machine=h200` (a login node without a GPU): the gpu preset's matrix,
    its sweeps asking for a GPU each, planned here (dry run)."""
    copy_workflow(tmp_path)
    plan = snakemake(tmp_path, "-n", "--config", "gpu_jobs=true", "machine=h200", "workloads=[lstm]")
    assert plan.returncode == 0, (plan.stdout + plan.stderr)[-2000:]
    assert "runs/h200/sweeps/lstm.timing.rep0.json" in plan.stdout and "gpu=1" in plan.stdout


@pytest.mark.slow
def test_a_second_pipeline_in_the_same_folder_is_refused(pipeline):
    first = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", "--directory", str(pipeline),
                              "--config", "preset=cpu", "workloads=[lstm]", "variants=[baseline]",
                              "profilers=[torch]"], cwd=pipeline, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        locks = pipeline / ".snakemake" / "locks"
        for _ in range(600):  # wait until the first one holds the folder
            if locks.exists() and any(locks.iterdir()):
                break
            time.sleep(0.1)
        second = snakemake(pipeline, "--config", "preset=cpu")
        assert second.returncode != 0 and "cannot be locked" in second.stdout + second.stderr
    finally:
        assert first.wait(timeout=600) == 0


def test_the_workflow_passes_snakemakes_linter_but_for_per_rule_environments():
    """`snakemake --lint`: logs, no absolute paths, no mixed rule styles...; the one lint left asks
    for a conda environment per rule, and this project installs as one package with pip."""
    out = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    lints = {line.strip() for line in (out.stdout + out.stderr).splitlines() if line.startswith("    * ")}
    assert lints <= {"* Specify a conda environment or container for each rule.:"}, out.stdout + out.stderr
