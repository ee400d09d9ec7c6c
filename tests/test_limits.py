"""The matmul peak and the copy bandwidth of limits.json: measured once per set of runs (same
environment, commit and day) and reused by every later call of that set, the best of several repeats."""
import json

import pytest
import torch

from workloads import env
from trainperf import limits
from trainperf import cli

NOISY = [0.054, 0.095, 0.071, 0.088]  # TFLOP/s: one peak measured again and again on a busy 2-core CPU


@pytest.fixture()
def measured(monkeypatch):
    """Every matmul measurement made: each returns its repeats, one value of NOISY after another."""
    calls = []

    def fake(precision, device, repeats=3, seconds=0.0):
        calls.append(precision)
        return [NOISY[(len(calls) - 1) % len(NOISY)] * (1 - i / 10) for i in range(repeats)]
    def copy(device):
        calls.append("copy")
        return [5.0, 7.5, 6.0]  # GB/s per repeat
    monkeypatch.setattr(limits, "matmul_peak", fake)
    monkeypatch.setattr(limits, "copy_bandwidth", copy)
    return calls


def limits_json(tmp_path, name: str) -> dict:
    out = tmp_path / f"{name}.json"
    assert cli.main(["limits", "--specs", "{}", "--peaks", str(tmp_path / "peaks.json"), "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_the_peak_is_measured_once_per_set_of_runs_and_reused(tmp_path, measured, monkeypatch):
    first, again = limits_json(tmp_path, "first"), limits_json(tmp_path, "again")
    per_set = len(first["peak_tflops"]) + 1  # one measurement per precision of this machine, and its bandwidth
    assert len(measured) == per_set and again["peak_tflops"] == first["peak_tflops"]
    assert first["bandwidth_gbps"] == again["bandwidth_gbps"] == 7.5  # the best repeat of the copy
    assert not first["peak"]["reused"] and again["peak"]["reused"]
    assert first["peak_tflops"] == {p: max(r) for p, r in first["peak"]["repeats"].items() if p != "copy"}  # the best repeat
    real = env.fingerprint()
    monkeypatch.setattr(env, "fingerprint", lambda: {**real, "git_commit": "another-commit"})
    other_commit = limits_json(tmp_path, "other-commit")
    monkeypatch.setattr(env, "fingerprint", lambda: real)
    monkeypatch.setattr(limits, "today", lambda: "2031-01-02")
    other_day = limits_json(tmp_path, "other-day")
    assert len(measured) == 3 * per_set and not other_commit["peak"]["reused"] and not other_day["peak"]["reused"]
    assert len(json.loads((tmp_path / "peaks.json").read_text())) == 3  # one entry per set of runs
    assert limits_json(tmp_path, "same-day-again")["peak_tflops"] == other_day["peak_tflops"]
    assert len(measured) == 3 * per_set


def test_a_peak_is_the_best_of_repeats_each_timing_many_matmuls():
    repeats = limits.matmul_peak("fp32", torch.device("cpu"), repeats=3, seconds=0.05)
    assert len(repeats) == 3 and all(r > 0 for r in repeats)


def test_the_bandwidth_is_the_best_of_repeats_each_timing_many_copies():
    repeats = limits.copy_bandwidth(torch.device("cpu"), repeats=3, seconds=0.05)
    assert len(repeats) == 3 and all(r > 0.1 for r in repeats)  # GB/s: any memory copies faster than 100 MB/s


def test_a_set_whose_peaks_predate_the_bandwidth_gets_it_measured_and_keeps_its_peaks(tmp_path, measured):
    first = limits_json(tmp_path, "first")
    entries = json.loads((tmp_path / "peaks.json").read_text())
    for e in entries:  # as a set of runs measured them before the suite measured the bandwidth
        del e["bandwidth_gbps"], e["bandwidth_measured"], e["repeats"]["copy"]
    (tmp_path / "peaks.json").write_text(json.dumps(entries))
    again = limits_json(tmp_path, "again")
    assert again["peak_tflops"] == first["peak_tflops"] and again["peak"]["reused"]  # the matmuls not measured again
    assert again["bandwidth_gbps"] == 7.5 and measured.count("copy") == 2

