"""The pipeline on a real SLURM cluster through Snakemake's SLURM executor and the repo's profile
(config/slurm): a single-node cluster (munge, MariaDB, slurmdbd, slurmctld, slurmd) started on this
machine by tests/slurm/cluster.sh; sacct shows that the jobs ran under SLURM."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import copy_workflow

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "tests" / "slurm" / "cluster.sh"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    state = tmp_path_factory.mktemp("slurm")
    if shutil.which("bash") is None or not CLUSTER.exists():
        pytest.skip("no bash")
    up = subprocess.run(["bash", str(CLUSTER), "start", str(state)], capture_output=True, text=True, timeout=300)
    if up.returncode == 3:
        pytest.skip(up.stderr.strip().splitlines()[-1])
    assert up.returncode == 0, up.stderr[-2000:]
    env = {**os.environ, "SLURM_CONF": up.stdout.strip().split("=", 1)[1]}
    yield env
    subprocess.run(["bash", str(CLUSTER), "stop", str(state)], timeout=60)


@pytest.mark.slow
def test_the_cpu_preset_runs_as_slurm_jobs(slurm, tmp_path):
    copy_workflow(tmp_path)
    cmd = [sys.executable, "-m", "snakemake", "--profile", "config/slurm", "--config", "preset=cpu",
           "workloads=[lstm]", "variants=[baseline,lazy-sync]", "profilers=[timing]",
           # this one-node test cluster: its partition, and jobs small enough for 2 cores
           "--default-resources", "slurm_partition=debug", "mem_mb=2000", "cpus_per_task=1", "runtime=10",
           "--set-resources", "sweep:cpus_per_task=2", "sweep:mem_mb=6000", "images:cpus_per_task=1",
           "limits:cpus_per_task=1", "--seconds-between-status-checks", "2",
           "--slurm-init-seconds-before-status-checks", "2"]
    done = subprocess.run(cmd, cwd=tmp_path, env=slurm, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = pd.read_csv(tmp_path / "results/cpu/summary.csv")
    assert set(summary[summary.metric == "throughput"].variant) == {"baseline", "lazy-sync"}
    acct = subprocess.run(["sacct", "-X", "-n", "-P", "-S", "now-1hour", "-o", "JobID,Comment,State,WorkDir"],
                          env=slurm, capture_output=True, text=True, timeout=60).stdout
    jobs = [line.split("|") for line in acct.splitlines() if str(tmp_path) in line]
    rules = {c.split("rule_")[1].split("_")[0] for _, c, _, _ in jobs if "rule_" in c}
    assert {"tokens", "sweep", "aggregate", "report"} <= rules, acct
    assert all(state == "COMPLETED" for _, _, state, _ in jobs), acct
