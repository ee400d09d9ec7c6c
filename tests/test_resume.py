"""The pipeline keeps what it has: bad input stops it before any cell runs, a failed run never
replaces a record that trained, a stopped run resumes with the plain command, deleted records are
redone exactly, and a run of some workloads adds to the others' results."""
import hashlib
import json
import os
import signal
import subprocess
import sys

import pandas as pd
import pytest

from tests.conftest import copy_workflow

SMALL = ["preset=cpu", "workloads=[lstm,resnet50]", "variants=[baseline,lazy-sync]", "profilers=[timing]"]


def snakemake(workdir, *config, extra=(), env=None):
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--directory", str(workdir), *extra, "--config", *config]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=1200, env=env)


def fingerprints(work) -> dict:
    """Every record of the machine, by path: its content's hash and its modification time."""
    return {str(p.relative_to(work)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in (work / "runs/cpu").rglob("metrics.json")}


@pytest.fixture()
def small(tmp_path):
    work = copy_workflow(tmp_path)
    done = snakemake(work, *SMALL)
    assert done.returncode == 0, done.stderr[-3000:]
    return work


@pytest.mark.slow
@pytest.mark.parametrize("config,message", [
    ("presets: {cpu: {workloads: {resnet50: {batch_size: -8}}}}",
     "trainperf: presets.cpu.workloads.resnet50.batch_size: -8 must be greater than 0"),
    ("presets: {cpu: {workloads: {resnet50: {batch_size: 0}}}}",
     "trainperf: presets.cpu.workloads.resnet50.batch_size: 0 must be greater than 0"),
    ("presets: {cpu: {profile: {nsys: {variants: [baseline, turbo]}}}}",
     "trainperf: presets.cpu.profile.nsys.variants: unknown name 'turbo'"),
])
def test_bad_input_stops_before_any_cell_with_one_line_and_the_records_intact(small, config, message):
    before = fingerprints(small)
    (small / "bad.yaml").write_text(config)
    out = snakemake(small, *SMALL, extra=["--configfile", "config/config.yaml", "bad.yaml"])
    assert out.returncode != 0
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.startswith("trainperf:")]
    assert lines == [message] or (len(lines) == 1 and lines[0].startswith(message))
    assert fingerprints(small) == before


@pytest.mark.slow
def test_a_workload_whose_every_cell_fails_fails_the_pipeline_and_keeps_its_records(small):
    """A dataset that cannot be read fails every resnet50 cell: the pipeline says so and exits
    non-zero, the report is still written, and the records that trained stay what it shows."""
    before = fingerprints(small)
    broken = small / "broken"
    (broken / "class_a").mkdir(parents=True)
    for i in range(12):
        (broken / "class_a" / f"{i}.jpg").write_bytes(b"not a jpeg")
    out = snakemake(small, *SMALL, f"datasets={{resnet50: {broken}}}")
    assert out.returncode != 0
    assert "trainperf: every cell of resnet50 failed" in out.stdout + out.stderr
    assert fingerprints(small) == before  # the good records were not replaced
    attempts = list((small / "runs/cpu/resnet50").rglob("failed.json"))
    assert len(attempts) == 2 and all(json.loads(a.read_text())["status"] == "failed" for a in attempts)
    summary = pd.read_csv(small / "results/cpu/summary.csv")
    assert set(summary[summary.metric == "throughput"].workload) == {"lstm", "resnet50"}


@pytest.mark.slow
def test_a_run_stopped_by_a_signal_resumes_with_the_plain_command(small):
    """SIGINT to snakemake alone (as `kill -INT` or a time limit sends it) mid-sweep: the plain
    command then finishes, redoing only the cells that had no record."""
    for d in ("runs/cpu/lstm", "runs/cpu/resnet50"):
        subprocess.run(["rm", "-rf", str(small / d)], check=True)
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--directory", str(small), "--config", *SMALL]
    proc = subprocess.Popen(cmd, cwd=small, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # even from a background job
    for line in proc.stdout:  # stop it once the first cell of a sweep has its record
        if line.rstrip().endswith("] ok"):
            break
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=600)
    assert proc.returncode != 0
    finished = fingerprints(small)
    assert finished
    again = snakemake(small, *SMALL)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    after = fingerprints(small)
    assert len(after) == 4 and all(after[p] == finished[p] for p in finished)


@pytest.mark.slow
def test_deleted_records_are_redone_exactly(small):
    before = fingerprints(small)
    subprocess.run(["rm", "-rf", str(small / "runs/cpu/lstm")], check=True)
    out = snakemake(small, *SMALL)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    after = fingerprints(small)
    assert after.keys() == before.keys()
    assert all(after[p] == before[p] for p in before if "/resnet50/" in p)
    assert all(after[p][1] != before[p][1] for p in before if "/lstm/" in p)


@pytest.mark.slow
def test_a_run_of_one_workload_adds_to_the_report_of_the_others(small):
    out = snakemake(small, *[c for c in SMALL if not c.startswith("workloads=")], "workloads=[lstm]",
                    "seed=1")  # another spec: lstm's cells run again
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    summary = pd.read_csv(small / "results/cpu/summary.csv")
    assert set(summary[summary.metric == "throughput"].workload) == {"lstm", "resnet50"}
    report = (small / "results/cpu/REPORT.md").read_text()
    assert "resnet50" in report and "lstm" in report
    assert os.path.getsize(small / "results/cpu/limits.json") and \
        set(json.loads((small / "results/cpu/limits.json").read_text())["flops_per_sample"]) == {"lstm", "resnet50"}


@pytest.mark.slow
def test_workloads_run_one_after_another_each_get_every_repetition(tmp_path):
    """One workload's first repetition, another workload's run, then the first's two repetitions:
    each workload runs every repetition (a repetition waits on its own workload's sweeps, never on
    what another workload's run left behind)."""
    work = copy_workflow(tmp_path)
    one = [c for c in SMALL if not c.startswith(("workloads=", "variants="))] + ["variants=[baseline]"]
    for w, reps in (("resnet50", 1), ("lstm", 2), ("resnet50", 2)):
        (work / "reps.yaml").write_text(f"presets: {{cpu: {{repetitions: {reps}}}}}")
        out = snakemake(work, *one, f"workloads=[{w}]", extra=["--configfile", "config/config.yaml", "reps.yaml"])
        assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    records = {str(p.relative_to(work / "runs/cpu")) for p in (work / "runs/cpu").rglob("metrics.json")}
    assert records == {f"{w}/baseline/timing/rep{r}/metrics.json" for w in ("lstm", "resnet50") for r in (0, 1)}


@pytest.mark.slow
@pytest.mark.parametrize("profilers", ["timing,bare,step,step-bare", "step,step-bare"])
def test_metered_and_bare_sweeps_swap_order_every_repetition(tmp_path, profilers):
    """The energy meter's cost pairs a cell's timing run (metered) with its bare run (not), and its
    step-alone run with its step-bare run: each two sweeps swap order every repetition, so neither
    order's drift weighs on the paired ratio, and a repetition runs after the one before (with no
    timing sweep to pace them too), so each pair is measured side by side."""
    work = copy_workflow(tmp_path)
    each = "{variants: [baseline], workloads: [lstm], repeat: true}"
    (work / "reps.yaml").write_text(f"presets: {{cpu: {{repetitions: 3, profile: {{bare: {each}, step: {each}, "
                                    f"step-bare: {each}}}}}}}")
    out = snakemake(work, "preset=cpu", "workloads=[lstm]", "variants=[baseline]",
                    f"profilers=[{profilers}]", extra=["--configfile", "config/config.yaml", "reps.yaml"])
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    done = {(p, r): (work / f"runs/cpu/lstm/baseline/{p}/rep{r}/metrics.json").stat().st_mtime_ns
            for p in profilers.split(",") for r in range(3)}
    if "timing" in profilers:
        assert done[("timing", 0)] < done[("bare", 0)] < done[("bare", 1)] < done[("timing", 1)]
    order = [("step", 0), ("step-bare", 0), ("step-bare", 1), ("step", 1), ("step", 2), ("step-bare", 2)]
    assert [done[k] for k in order] == sorted(done[k] for k in order)


@pytest.mark.slow
def test_undecided_ratios_get_confirming_repetitions_and_a_rerun_does_nothing(tmp_path):
    """One repetition decides nothing (an interval needs three pairs): with confirm_repetitions 3
    both cells of the ratio run twice more, interleaved, and the ratio comes from three pairs;
    run again, the pipeline has nothing to do."""
    work = copy_workflow(tmp_path)
    (work / "confirm.yaml").write_text("presets: {cpu: {repetitions: 1, confirm_repetitions: 3}}")
    config = ["preset=cpu", "workloads=[lstm]", "variants=[baseline,lazy-sync]", "profilers=[timing]"]
    committed = {**os.environ, "TRAINPERF_GIT_COMMIT": "0123456789ab"}  # a record of a changed tree gives no ratio
    done = snakemake(work, *config, extra=["--configfile", "config/config.yaml", "confirm.yaml"], env=committed)
    assert done.returncode == 0, done.stderr[-3000:]
    chosen = json.loads((work / "runs/cpu/undecided.json").read_text())
    assert chosen == [{"workload": "lstm", "variant": v, "profiler": "timing"} for v in ["baseline", "lazy-sync"]]
    made = sorted(str(p.relative_to(work / "runs/cpu/lstm").parent) for p in (work / "runs/cpu/lstm").rglob("metrics.json"))
    assert made == [f"{v}/timing/rep{r}" for v in ["baseline", "lazy-sync"] for r in range(3)]
    ratios = pd.read_csv(work / "results/cpu/ratios.csv")
    assert ratios[(ratios.after == "lazy-sync") & (ratios.metric == "throughput")].n.tolist() == [3]
    again = snakemake(work, *config, extra=["--configfile", "config/config.yaml", "confirm.yaml", "-n"], env=committed)
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-2000:]
