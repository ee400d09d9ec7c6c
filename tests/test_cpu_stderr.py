"""A CPU run's stderr holds the harness's lines and real errors, not a library's complaint that
there is no GPU (Kineto, writing torch.profiler's trace, asks CUDA for the GPUs' properties)."""
import json
import os
import subprocess
import sys

from workloads import env
from trainperf import matrix


def test_a_cpu_cell_under_torch_profiler_logs_no_gpu_probe_error(cpu_config, tmp_path):
    cell = matrix.cell(cpu_config, "lstm", "baseline", "torch")
    out = tmp_path / "metrics.json"
    clean = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    run = subprocess.run([sys.executable, "-m", "trainperf.cli", "run", "--spec", json.dumps(cell["spec"]),
                          "--out", str(out)], cwd=env.ROOT, env=clean, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    record = json.loads(out.read_text())
    assert record["status"] == "ok", record["reason"]
    assert (tmp_path / "trace.json.gz").exists() and "[lstm/baseline/torch rep0] ok" in run.stderr
    assert "gpuGetDeviceCount" not in run.stderr and "ERROR:" not in run.stderr, run.stderr


def test_kinetos_level_is_set_only_without_cuda_and_never_over_the_users(monkeypatch):
    monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    env.quiet_kineto(cuda=True)
    assert "KINETO_LOG_LEVEL" not in os.environ
    env.quiet_kineto(cuda=False)
    assert os.environ["KINETO_LOG_LEVEL"] == env.KINETO_PAST_ERROR
    monkeypatch.setenv("KINETO_LOG_LEVEL", "4")  # someone who wants Kineto's errors on a CPU
    env.quiet_kineto(cuda=False)
    assert os.environ["KINETO_LOG_LEVEL"] == "4"
