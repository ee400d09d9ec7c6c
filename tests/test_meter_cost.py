"""The energy meter's cost measured in one process: the sampling process paused and resumed on
command, the windows' schedule, and the paired ratio of neighbouring windows."""
import contextlib
import os
import threading
import time

import pytest

from analysis import aggregate
from profiles import meter_cost, nvml_sampler
from tests.conftest import spec_of
from trainperf import matrix


def test_the_sampling_loop_sleeps_while_paused_and_ends_on_any_other_line():
    """The loop and its command reader, in threads, over a real pipe, as the sampling process runs them."""
    r, w = os.pipe()
    stream, send = os.fdopen(r), os.fdopen(w, "w")
    on, done, samples = threading.Event(), threading.Event(), []
    on.set()
    reader = threading.Thread(target=nvml_sampler.commands, args=(stream, on, done), daemon=True)
    loop = threading.Thread(target=nvml_sampler.sample_until_done,
                            args=(time.perf_counter, samples, 0.002, on, done, os.getppid()), daemon=True)
    reader.start(), loop.start()
    time.sleep(0.1)

    def say(line):
        send.write(line + "\n")
        send.flush()
        time.sleep(0.1)
        return len(samples)
    sampled = say("pause")
    assert sampled > 5 and say("pause") == sampled  # nothing sampled while paused
    assert say("resume") > sampled and loop.is_alive()
    say("stop")
    loop.join(2), reader.join(2)
    assert not loop.is_alive() and not reader.is_alive()


def test_every_pair_of_windows_samples_in_one_and_the_order_alternates():
    order = [(meter_cost.sampling(2 * j), meter_cost.sampling(2 * j + 1)) for j in range(4)]
    assert order == [(False, True), (True, False), (False, True), (True, False)]


class Switches:
    """A meter that keeps what it is told: this CPU has no NVML sampling process to switch."""
    why = None

    def __init__(self, alive=True):
        self.calls, self.alive = [], alive

    def switch(self, on):
        self.calls.append(on)
        return self.alive

    @contextlib.contextmanager
    def running(self):
        yield self


def test_the_observer_closes_a_window_every_window_steps_and_switches_the_sampling(tmp_path):
    """Driven as the harness drives it (window, then a step() per step)."""
    observer = meter_cost.MeterCost({}, False, tmp_path)
    observer.meter = Switches()
    with observer.window():
        for _ in range(4 * meter_cost.WINDOW_STEPS + 3):
            observer.step()
    windows = observer.tables()["windows"]
    assert [w["sampling"] for w in windows] == [False, True, True, False]
    assert observer.meter.calls == [False, True, True, False, False]  # each window's, then the fifth's
    assert all(w["steps"] == meter_cost.WINDOW_STEPS and w["seconds"] > 0 for w in windows)


def test_a_sampling_process_that_has_ended_fails_the_cell(tmp_path):
    observer = meter_cost.MeterCost({}, False, tmp_path)
    observer.meter = Switches(alive=False)
    with pytest.raises(RuntimeError, match="sampling process has ended"):
        with observer.window():
            pass


def test_a_meter_cost_cell_measures_its_own_windows_and_needs_a_gpu(cpu_config):
    cell = matrix.cell(cpu_config, "resnet50", "baseline", "meter-cost")
    assert cell["status"] == "skipped" and "needs an NVIDIA GPU" in cell["reason"]
    gpu = matrix.cell({**cpu_config, "cuda": True}, "resnet50", "baseline", "meter-cost")
    assert gpu["spec"]["measured_steps"] == 2 * meter_cost.PAIRS * meter_cost.WINDOW_STEPS
    assert spec_of(cpu_config, "resnet50", "baseline")["measured_steps"] == cpu_config["presets"]["cpu"]["measured_steps"]


def record(rep, seconds, status="ok", commit="abc123"):
    """A meter-cost record whose windows took `seconds` (sampled ones slower by the factor given)."""
    windows = [{"window": i, "sampling": meter_cost.sampling(i), "steps": 10, "seconds": s} for i, s in enumerate(seconds)]
    return {"keys": {"workload": "resnet50", "variant": "optimized", "profiler": "meter-cost", "rep": rep},
            "status": status, "started": "2026-12-08T01:00:00+00:00",
            "env": {"gpu_uuid": "GPU-a", "git_commit": commit}, "meter-cost": {"windows": windows}}


def windows(slower, pairs=6, base=0.4):
    return [base * (slower if meter_cost.sampling(i) else 1.0) + 0.001 * (i % 3) for i in range(2 * pairs)]


def test_neighbouring_windows_pair_and_their_ratio_is_throughput_with_sampling_over_without():
    row = aggregate.in_run_meter_cost([record(0, windows(1.02)), record(1, windows(1.02)[:-1])]).iloc[0]
    assert (row.profiler, row.before, row.after, row.n) == ("meter-cost", "optimized", "optimized", 11)
    assert row["median"] == pytest.approx(1 / 1.02, abs=0.005) and row.status == "loss" and row.hi < 1


def test_a_meter_cost_run_that_failed_or_came_from_an_uncommitted_tree_gives_no_ratio():
    failed = aggregate.in_run_meter_cost([record(0, windows(1.0)), record(1, [], status="failed")]).iloc[0]
    assert failed.status == "failed" and failed.n == 0 and failed.why == "optimized failed in 1 of 2 runs"
    dirty = aggregate.in_run_meter_cost([record(0, windows(1.0), commit="abc123-dirty")]).iloc[0]
    assert dirty.status == "unpaired"
