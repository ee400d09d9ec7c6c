"""The ddp knob: N processes started by torch.distributed.run (gloo on the CPU) train one model
on disjoint shards of the data, rank 0 writes the record, and a failing rank fails its cell
without stopping the sweep."""
import json
import subprocess
import sys

from analysis import aggregate, sections
from tests.conftest import spec_of
from workloads import loaders
from workloads.ddp import Shard


def ddp_spec(cfg, variant="lazy-sync", **params):
    spec = spec_of(cfg, "lstm", variant)
    spec["knobs"].update(ddp=2, num_workers=0)
    spec["params"].update(params)
    return spec


def run_sweep(jobs, out):
    cmd = [sys.executable, "-m", "trainperf.cli", "sweep", "--jobs", json.dumps([[s, str(p)] for s, p in jobs]),
           "--out", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def test_ranks_draw_disjoint_shards_of_one_random_order(cpu_config):
    windows = loaders.TokenWindows(cpu_config["data_root"] + "/cpu/tokens.npy", 16)
    knobs = spec_of(cpu_config, "lstm", "baseline")["knobs"]
    whole = list(loaders.torch_loader(windows, 4, 6, knobs, seed=0, shard=Shard(0, 1)).sampler)
    ranks = [list(loaders.torch_loader(windows, 4, 3, knobs, seed=0, shard=Shard(r, 2)).sampler) for r in (0, 1)]
    assert ranks[0] == whole[0::2] and ranks[1] == whole[1::2] and len(ranks[0]) == 12


def test_two_gloo_ranks_train_one_model_and_the_report_scales_them(cpu_config, tmp_path):
    """ddp2 (optimized on 2 processes) and optimized (1 process) in one sweep, then the report's
    scaling table from their records."""
    jobs = [(spec_of(cpu_config, "lstm", "ddp2"), tmp_path / "ddp/metrics.json"),
            (spec_of(cpu_config, "lstm", "optimized"), tmp_path / "single/metrics.json")]
    proc = run_sweep(jobs, tmp_path / "sweep.json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    ddp, single = (json.loads(p.read_text()) for _, p in jobs)
    assert ddp["status"] == "ok" and single["status"] == "ok"
    ranks = ddp["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1] and ranks[0]["pid"] != ranks[1]["pid"]
    assert ranks[0]["weight_sum"] == ranks[1]["weight_sum"]  # gradients were all-reduced
    assert ranks[0]["last_local_loss"] != ranks[1]["last_local_loss"]  # on different data
    metric = {m["metric"]: m["value"] for m in ddp["metrics"]}
    bs, steps = ddp["params"]["batch_size"], len(ddp["steps"])
    assert metric["throughput"] > 1.5 * bs * steps / sum(s["wall_s"] for s in ddp["steps"])  # both ranks count

    metrics, cells = aggregate.tidy([ddp, single])
    summary = aggregate.summarize(metrics, cells)
    text = sections.scaling_section(summary, aggregate.ratio_table(metrics, cells, []), "lstm", ["ddp2"])
    row = next(line for line in text.splitlines() if line.startswith("| ddp2 |")).split(" | ")
    one = summary[(summary.variant == "optimized") & (summary.metric == "throughput")]["median"].iloc[0]
    assert row[3] == "2" and row[4] == f"{100 * metric['throughput'] / (2 * one):.0f}"


def test_a_failing_rank_fails_the_cell_and_the_sweep_goes_on(cpu_config, tmp_path):
    jobs = [(ddp_spec(cpu_config, "baseline", lr=1e30), tmp_path / "ddp/metrics.json"),  # the loss turns non-finite
            (spec_of(cpu_config, "lstm", "lazy-sync"), tmp_path / "single/metrics.json")]
    proc = run_sweep(jobs, tmp_path / "sweep.json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    ddp, single = (json.loads(p.read_text()) for _, p in jobs)
    assert ddp["status"] == "failed" and " of 2: non-finite loss" in ddp["reason"] and ddp["reason"].startswith("rank ")
    assert single["status"] == "ok"
