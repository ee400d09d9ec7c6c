"""A sweep runs several cells in one process tree: a crash or kill of one cell is recorded as that
cell's failure and the next cell still runs; a failed cell does not leak into the next one; a
sweep run again redoes only the cells without a record."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import spec_of
from trainperf import sweep


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_a_killed_cell_is_recorded_and_the_next_cell_runs(cpu_config, tmp_path):
    long = spec_of(cpu_config, "lstm", "baseline")
    long["measured_steps"] = 50
    short = spec_of(cpu_config, "lstm", "lazy-sync")
    jobs = [[long, str(tmp_path / "a/metrics.json")], [short, str(tmp_path / "b/metrics.json")]]
    cmd = [sys.executable, "-m", "trainperf.cli", "sweep", "--jobs", json.dumps(jobs), "--out", str(tmp_path / "sweep.json")]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:  # the first cell is measuring: kill the process that runs it
        if "step " in line and "/50:" in line:
            break
    os.kill(children(proc.pid)[0], signal.SIGKILL)
    rest = proc.stderr.read()
    assert proc.wait(timeout=300) == 0, rest[-2000:]
    first, second = (json.loads(Path(p).read_text()) for _, p in jobs)
    assert (first["status"], first["reason"]) == ("failed", "process died (signal 9)")
    assert second["status"] == "ok"
    assert json.loads((tmp_path / "sweep.json").read_text())["records"] == [p for _, p in jobs]


def run_sweep(jobs, out):
    """A sweep as the pipeline runs it: its own process (forking a test runner full of threads
    could deadlock the child, which a real sweep process never is)."""
    cmd = [sys.executable, "-m", "trainperf.cli", "sweep", "--jobs", json.dumps([[s, str(p)] for s, p in jobs]),
           "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)


def test_a_failed_cell_hands_over_to_a_fresh_process_and_a_rerun_skips_done_cells(cpu_config, tmp_path):
    poisoned = spec_of(cpu_config, "lstm", "baseline")
    poisoned["params"]["lr"] = 1e30  # the loss turns non-finite
    fine = spec_of(cpu_config, "lstm", "lazy-sync")
    jobs = [(poisoned, tmp_path / "a/metrics.json"), (fine, tmp_path / "b/metrics.json")]
    run_sweep(jobs, tmp_path / "sweep.json")
    first, second = (json.loads(p.read_text()) for _, p in jobs)
    assert first["status"] == "failed" and "non-finite loss" in first["reason"]
    assert second["status"] == "ok" and second["env"] and second["pid"] != first["pid"]
    assert first["sweep"].startswith("sweep:") and second["sweep"] == first["sweep"]  # one run of the sweep, two processes
    stamps = [p.stat().st_mtime_ns for _, p in jobs]
    run_sweep(jobs, tmp_path / "sweep.json")  # nothing left to do
    assert [p.stat().st_mtime_ns for _, p in jobs] == stamps
    fine["measured_steps"] = 4  # a changed spec is a different cell: it runs again
    assert not sweep.done(fine, jobs[1][1])
    run_sweep(jobs, tmp_path / "sweep.json")
    rerun = json.loads(jobs[1][1].read_text())
    assert rerun["spec"]["measured_steps"] == 4 and rerun["sweep"] != first["sweep"]  # a stop fell between them


def test_a_sweep_takes_its_jobs_one_way_only(tmp_path, capsys):
    import pytest
    from trainperf import cli
    for both_or_none in (["--jobs", "[]", "--jobs-file", "x"], []):
        with pytest.raises(SystemExit) as stop:
            cli.main(["sweep", *both_or_none, "--out", str(tmp_path / "sweep.json")])
        assert stop.value.code == 2 and "--jobs" in capsys.readouterr().err
    assert not (tmp_path / "sweep.json").exists()
