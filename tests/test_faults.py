"""Faults end in a clear record for their cell, never in a crash of the matrix or a half-written
result: out of memory, a corrupt JPEG, a run killed mid-way."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import spec_of
from workloads import harness
from trainperf.sweep import run_cell

OOM = """
import json, resource, sys
from trainperf.sweep import run_cell
spec = json.loads(sys.argv[1])
vm = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize"))
cap = vm + 768 * 2**20  # room to build the model, not to train a big batch
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
print(json.dumps({k: v for k, v in run_cell(spec).items() if k in ("status", "reason")}))
"""


def test_out_of_memory_is_recorded_with_the_batch_size(cpu_config):
    spec = spec_of(cpu_config, "resnet50", "baseline")
    spec["params"]["batch_size"] = 48
    spec["params"]["image_size"] = 224
    out = subprocess.run([sys.executable, "-c", OOM, json.dumps(spec)], capture_output=True, text=True, timeout=600)
    record = json.loads(out.stdout.strip().splitlines()[-1])
    assert record == {"status": "failed", "reason": "out of memory (batch_size=48)"}


@pytest.mark.parametrize("variant", ["baseline", "workers"])
def test_corrupt_jpeg_fails_the_cell_naming_the_file(cpu_config, datasets, tmp_path, variant):
    images = tmp_path / "images"
    shutil.copytree(datasets / "cpu" / "images", images)
    victim = sorted(images.glob("class_000/*.jpg"))[0]
    victim.write_bytes(victim.read_bytes()[:200])  # a truncated download
    # the sampler draws more samples than the 16 files hold, so every file is read
    spec = spec_of(cpu_config, "resnet50", variant)
    spec["data"] = str(images)
    record = run_cell(spec)
    assert record["status"] == "failed"
    assert f"corrupt image {victim}" in record["reason"]


def test_a_killed_run_leaves_no_result_and_the_next_run_writes_one(cpu_config, tmp_path):
    spec = spec_of(cpu_config, "lstm", "baseline")
    # the run logs its progress every measured_steps // 5 steps: its first line comes after 10 steps
    # (2 s on 2 cores), with 40 still to go (the kill follows the line at once)
    spec["measured_steps"] = 50
    out = tmp_path / "metrics.json"
    cmd = [sys.executable, "-m", "trainperf.cli", "run", "--spec", json.dumps(spec), "--out", str(out)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    said = []
    for line in proc.stderr:  # the event: its first progress line, read from its pipe
        said.append(line)
        if "step " in line and "/50:" in line:
            break
    proc.send_signal(signal.SIGKILL)  # in the middle of its measured steps
    # died of the kill: not before it (a crash), nor having ended before it came (it would exit 0)
    assert proc.wait(timeout=60) == -signal.SIGKILL, "".join(said)[-2000:]
    assert not out.exists() and not list(tmp_path.iterdir())
    spec["measured_steps"] = 2
    cmd[cmd.index("--spec") + 1] = json.dumps(spec)
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    assert json.loads(out.read_text())["status"] == "ok"


def test_probe_steps_until_the_loss_goes_non_finite_and_shows_where(cpu_config):
    """A learning rate that blows the weights up: the probe's first step is finite with huge
    weights, the next one's loss is NaN, and the row says the weights and gradients went bad too;
    the probe stops there."""
    from workloads import probe
    spec = spec_of(cpu_config, "lstm", "baseline")
    spec["params"]["lr"] = 1e30
    rows = list(probe.probe(spec, 6))
    assert [r["step"] for r in rows] == [0, 1]
    assert rows[0]["loss"] > 0 and rows[0]["nonfinite_weights"] == 0 and rows[0]["max_weight"] > 1e20
    assert rows[1]["loss"] != rows[1]["loss"]  # NaN
    assert rows[1]["nonfinite_weights"] > 0 and rows[1]["nonfinite_grads"] > 0
    assert rows[1]["scale"] is None and rows[1]["graphs_compiled"] == 0  # fp32, eager: no GradScaler, no compile
    again = rows[1]["recheck"]  # the same batch again: the weights are bad, so eager is NaN too, from the start
    assert again["loss_again"] != again["loss_again"] and again["eager_loss"] != again["eager_loss"]
    assert again["eager_first_nonfinite"] == "embed" and "recheck" not in rows[0]


def test_probe_of_a_skipped_cell_is_one_clear_error(capsys):
    from trainperf import cli
    assert cli.main(["probe", "lstm", "channels-last", "--steps", "1", "--preset", "cpu"]) == 2
    assert capsys.readouterr().err.startswith("trainperf: lstm/channels-last is skipped here: ")


def test_probe_recheck_of_a_healthy_batch_is_finite_everywhere(cpu_config):
    """recheck on weights that are fine: both forwards finite, no module named."""
    from workloads import harness, probe
    t = harness.Trainer(spec_of(cpu_config, "lstm", "baseline"))
    again = probe.recheck(t, *next(t.batches))
    assert 0 < again["loss_again"] == again["eager_loss"] < 20 and again["eager_first_nonfinite"] is None
