"""The report is built from the tables alone and is deterministic; its sections and flags follow
the data (real H200 records from tests/data)."""
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import aggregate, paired, report, sections, targets, views
from analysis.tables import num, ratio_row, ratio_text

H200 = sorted((Path(__file__).parent / "data" / "h200-timing").glob("*.json"))
DATA = Path(__file__).parent / "data" / "h200-timing"


def catalog():
    """The variants of the config, as the pipeline passes them to the tables."""
    from trainperf import config, variants
    return variants.catalog(config.load())


def tables(paths, skipped, out):
    """The tidy tables of `paths` as the pipeline makes them (with the config's catalog)."""
    return aggregate.main(paths, skipped, out, catalog=catalog())


def rendered(out) -> str:
    """The report and its appendix, as one text."""
    return report.render(out).read_text() + (Path(out) / report.APPENDIX).read_text()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("results") / "h200"
    tables(H200, [], out)
    return out


def test_report_is_deterministic_and_complete(results):
    first = rendered(results)
    assert rendered(results) == first
    main = (results / "REPORT.md").read_text()
    for section in ("## Summary", "## Environment", "## resnet50", "### Ablation", "## Documented claims"):
        assert section in main
    assert main.index("## Summary") < main.index("## resnet50") < main.index("## Documented claims")
    appendix = (results / report.APPENDIX).read_text()
    for section in ("## What the matrix took", "## Failed, skipped and set-aside", "## Environment, in full"):
        assert section in appendix and section not in main
    assert "NVIDIA H200" in first and "CPU preset" not in first
    assert (results / "figures" / "speedup-resnet50.png").stat().st_size > 5000


def test_report_numbers_come_from_the_summary(results):
    text = rendered(results)
    row = next(line for line in text.splitlines() if line.startswith("| optimized |"))
    summary = aggregate.summarize(*aggregate.tidy(aggregate.load_records(H200)))
    tput = summary[(summary.workload == "resnet50") & (summary.variant == "optimized") & (summary.metric == "throughput")]
    assert num(tput["median"].iloc[0]) in row
    assert "transformer_lm | optimized | timing | failed | non-finite loss" in text
    # the speedup column: the paired ratio of ratios.csv; baseline and optimized ran in one set of
    # runs, one repetition each: their ratio, without an interval
    ratios = pd.read_csv(results / "ratios.csv")
    base = summary[(summary.workload == "resnet50") & (summary.variant == "baseline") & (summary.metric == "throughput")]
    speedup = ratio_text(ratio_row(ratios, "resnet50", "baseline", "optimized"))
    assert speedup == f"{tput['median'].iloc[0] / base['median'].iloc[0]:.3g}x (n=1, no interval)"
    assert row.split(" | ")[2] == speedup
    # cudnn-benchmark and the ablations ran at another commit than baseline and optimized: no ratio
    lines = text.splitlines()
    assert next(line for line in lines if line.startswith("| cudnn-benchmark |")).split(" | ")[2] == "unpaired"
    ablation = text[text.index("### Ablation", text.index("## resnet50")):]
    assert next(line for line in ablation.splitlines() if line.startswith("| optimized-no-amp |")).split(" | ")[2] == "unpaired"


def test_cells_set_aside_are_announced_and_listed_with_why(tmp_path):
    aside = {"keys": {"workload": "vit_b_16", "variant": "optimized+fused-sgd", "profiler": "timing", "rep": 0},
             "status": "set aside", "reason": "to rerun: ran with a stale cache"}
    tables(H200, [aside], tmp_path / "h200")
    text = rendered(tmp_path / "h200")
    assert "> **1 cell set aside**" in text
    assert "| vit_b_16 | optimized+fused-sgd | timing | set aside | to rerun: ran with a stale cache |" in text


def test_cpu_results_say_they_are_not_comparable(results, tmp_path):
    cpu = tmp_path / "cpu"
    shutil.copytree(results, cpu)
    assert "not comparable" in rendered(cpu)


@pytest.mark.parametrize("x,text", [(5543.1, "5,543"), (32.88, "32.9"), (0.0412, "0.0412")])
def test_number_format(x, text):
    assert num(x) == text


CAPTURES = Path(__file__).parent / "data" / "h200-captures"


def test_profiled_sections_come_from_real_nsys_and_ncu_records(tmp_path):
    """The records as the H200 wrote them; the baseline's nsys record with what today's parser
    reads from its capture besides (the training thread's waits for the GPU)."""
    from profiles import nsys as nsys_parser
    out, records = tmp_path / "h200", sorted(CAPTURES.glob("resnet50-*/metrics.json"))
    baseline = json.loads((CAPTURES / "resnet50-baseline-nsys/metrics.json").read_text())
    known = {m["metric"] for m in baseline["metrics"]}
    reparsed = nsys_parser.parse(CAPTURES / "resnet50-baseline-nsys/nsys.sqlite")["metrics"]
    baseline["metrics"] += [m for m in reparsed if m["metric"] not in known]
    (tmp_path / "baseline-nsys.json").write_text(json.dumps(baseline))
    records = [r for r in records if r.parent.name != "resnet50-baseline-nsys"] + [tmp_path / "baseline-nsys.json"]
    tables(H200 + records, [], out)
    shutil.copy(CAPTURES / "limits.json", out / "limits.json")
    text = report.render(out).read_text()
    part = text[text.index("## resnet50"):text.index("## transformer_lm")]
    assert "### Where the time goes" in part and "### Kernels" in part and "Nsight Compute's measurements of each" in text
    kernels = part[part.index("### Kernels"):].split("\n\n")[1].splitlines()[2:]
    assert any(line.rstrip(" |").endswith(("compute", "memory", "latency")) for line in kernels)  # ncu beside nsys
    appendix = (out / report.APPENDIX).read_text()
    assert "### Against the limit" in appendix[appendix.index("## resnet50"):]
    nsys = {m["metric"]: m["value"] for m in json.loads(
        (CAPTURES / "resnet50-baseline-nsys/metrics.json").read_text())["metrics"]}
    row = next(line for line in part.splitlines() if line.startswith("| baseline | nsys |"))
    assert num(nsys["gpu_busy"]) in row and num(nsys["kernels_per_step"]) in row
    waits = next(m["value"] for m in reparsed if m["metric"] == "gpu_wait_training_thread")
    assert "host waits (ms/step)" in part and row.endswith(f"| {num(waits)} |")
    assert (out / "figures" / "time-resnet50-nsys.png").stat().st_size > 5000
    assert "figures/time-resnet50-nsys.png" in text
    assert "| resnet50 | input-bound |" in text  # the diagnosis of the baseline


def test_stage_by_stage_takes_a_skipped_stage_from_the_variant_with_its_knobs(tmp_path):
    """upto-workers skipped as having the knobs of workers: its row shows workers' runs, and its
    paired gains (ratios.csv, under the stage's own name) are those of workers' runs."""
    from analysis import sections
    rset = "NVIDIA H200|3f3a4b6e6edb|2026-12-02"
    cells = pd.DataFrame([("r", v, "timing", rep, status, reason, None if status == "skipped" else rset)
                          for v, status, reason in (("baseline", "ok", None), ("workers", "ok", None),
                                                    ("upto-workers", "skipped", "same knobs as workers here"),
                                                    ("upto-amp", "ok", None)) for rep in range(3)],
                         columns=["workload", "variant", "profiler", "rep", "status", "reason", "run_set"])
    tput = {"baseline": 100.0, "workers": 400.0, "upto-amp": 1000.0}
    metrics = pd.DataFrame([("r", v, "timing", rep, "throughput", x, "samples/s", rset) for v, x in tput.items()
                            for rep in range(3)],
                           columns=["workload", "variant", "profiler", "rep", "metric", "value", "unit", "run_set"])
    summary, ratios = aggregate.summarize(metrics, cells), aggregate.ratio_table(metrics, cells, catalog())
    assert views.stage_variants(cells, ["workers", "amp"], "r") == [
        ("baseline", "baseline"), ("+ workers", "workers"), ("+ amp", "upto-amp")]
    text = sections.stages_section(summary, ratios, cells, ["workers", "amp"], "r", tmp_path)
    assert "| + workers | workers | 400 | 4x [4, 4] | 4x [4, 4] |" in text
    assert "| + amp | upto-amp | 1,000 | 2.5x [2.5, 2.5] | 10x [10, 10] |" in text
    assert (tmp_path / "figures" / "stages-r.png").stat().st_size > 5000


def test_targets_name_the_fastest_variant_that_trains(results):
    text = rendered(results)
    from analysis import sections
    row = next(line for line in text.splitlines() if line.startswith("| resnet50 | 7,200"))
    summary = pd.read_csv(results / "summary.csv")
    tput = summary[(summary.workload == "resnet50") & (summary.metric == "throughput") & (summary.status == "ok")]
    tput = tput[~targets.among(tput, targets.batch_scaled(pd.read_csv(results / "variants.csv")))]
    fastest = tput.loc[tput["median"].idxmax()]
    assert f"{fastest.variant}: {num(fastest['median'])} ({100 * fastest['median'] / 7200:.0f}%)" in row


@pytest.mark.parametrize("workload,target", [("resnet50", "7,200"), ("vit_b_16", "3,500"), ("lstm", "1,200,000")])
def test_targets_say_what_holds_the_fastest_from_its_own_measurements(results, workload, target):
    from analysis.diagnosis import IDLE_SHARE, INPUT_SHARE
    from analysis.tables import row
    line = next(x for x in rendered(results).splitlines() if x.startswith(f"| {workload} | {target}"))
    summary = pd.read_csv(results / "summary.csv")
    fastest = re.search(r"\| ([\w+-]+): [\d,]+", line).group(1)
    wait, busy = (row(summary, workload, fastest, m)["median"] for m in ("input_wait_share", "gpu_util"))
    held = "input" if wait >= INPUT_SHARE else "host" if 100 - busy >= IDLE_SHARE else "GPU work"
    assert f"| {held}: " in line


def test_targets_leave_out_variants_that_do_not_train_and_other_gpus():
    from analysis import sections

    def r(variant, value):
        return {"workload": "resnet50", "variant": variant, "profiler": "timing", "metric": "throughput",
                "unit": "samples/s", "median": value, "lo": value, "hi": value, "n": 1, "status": "ok"}
    summary = pd.DataFrame([r("optimized", 5000.0), r("optimized+bf16", 6000.0), r("ddp2", 9000.0)])
    text = sections.targets_section(summary, {"NVIDIA H200"}, {("resnet50", "optimized+bf16")})
    assert "optimized: 5,000 (69%)" in text and "6,000" not in text and "9,000" not in text
    assert sections.targets_section(summary, {"NVIDIA A100-SXM4-80GB"}, set()) == ""
    baseline_step = pd.DataFrame([{**r("baseline", 900.0), "profiler": "step"}])
    text = sections.targets_section(pd.concat([summary, baseline_step]), {"NVIDIA H200"}, set())
    assert text.splitlines()[2].endswith("|  |  |  |  |")  # a baseline's step alone is no ceiling for the fastest
    steps = pd.DataFrame([{**r("optimized", 6400.0), "profiler": "step"}, {**r("optimized+bf16", 6800.0), "profiler": "step"},
                          *baseline_step.to_dict("records")])
    text = sections.targets_section(pd.concat([summary, steps]), {"NVIDIA H200"}, set())
    assert text.splitlines()[2].endswith("| optimized+bf16: 6,800 (94%) |  |  |  |")  # the step alone: a ceiling


def test_a_larger_batch_is_shown_beside_a_target_never_counted_for_it():
    from analysis import sections
    rows = [{"workload": "resnet50", "variant": v, "profiler": "timing", "metric": "throughput", "unit": "samples/s",
             "median": x, "lo": x, "hi": x, "n": 3, "status": "ok"}
            for v, x in (("optimized", 5000.0), ("optimized+batch400", 7300.0), ("optimized+bf16-batch2x", 7000.0))]
    variants = pd.DataFrame([{"workload": "resnet50", "variant": "optimized", "batch_size": 0, "batch_scale": 1},
                             {"workload": "resnet50", "variant": "optimized+batch400", "batch_size": 400, "batch_scale": 1},
                             {"workload": "resnet50", "variant": "optimized+bf16-batch2x", "batch_size": 0, "batch_scale": 2}])
    text = sections.targets_section(pd.DataFrame(rows), {"NVIDIA H200"}, set(), variants)
    assert "| optimized: 5,000 (69%) |" in text  # the fastest at the workload's own batch
    assert "| optimized+batch400: 7,300 (101%) |" in text.replace("fastest that trains", "")


def test_a_target_set_as_mfu_is_the_measured_peak_over_the_models_flops():
    from analysis import sections
    limits = {"peak_tflops": {"amp-bf16": 600.0}, "flops_per_sample": {"transformer_lm": 2e10, "resnet50": 2.4e10}}
    value, mfu = targets.target_value({"workload": "transformer_lm", "metric": "throughput", "mfu": 0.4}, limits)
    assert value == pytest.approx(0.4 * 600e12 / 2e10) and mfu == 0.4
    value, mfu = targets.target_value({"workload": "resnet50", "metric": "throughput", "value": 7200}, limits)
    assert value == 7200 and mfu == pytest.approx(7200 * 2.4e10 / 600e12)
    assert targets.target_value({"workload": "transformer_lm", "metric": "throughput", "mfu": 0.4}, {}) == (None, None)


def test_a_cell_that_failed_in_some_runs_is_marked_and_never_the_fastest_that_trains(tmp_path):
    repeats = sorted((Path(__file__).parent / "data" / "h200-repeats").glob("*.json"))
    optimized = json.loads((Path(__file__).parent / "data" / "h200-timing" / "resnet50--optimized.json").read_text())
    failed = tmp_path / "resnet50--optimized--rep1.json"  # the same cell failing in a second run
    failed.write_text(json.dumps({**optimized, "keys": {**optimized["keys"], "rep": 1}, "status": "failed",
                                  "reason": "non-finite loss: loss is nan at step 3", "metrics": []}))
    out = tmp_path / "h200"
    tables(H200 + repeats + [failed], [], out)
    text = rendered(out)
    row = next(line for line in text.splitlines() if line.startswith("| optimized+bf16 |"))
    assert row.endswith("**failed in 1 of 2 runs** |")
    assert "| transformer_lm | optimized+bf16 | timing | failed in some runs | failed in 1 of 2 runs: non-finite" in text
    target = next(line for line in text.splitlines() if line.startswith("| resnet50 | 7,200"))
    fastest = target.split(" | ")[4]  # without the failed run it is "optimized: 5,543 (69%)"
    assert fastest and not fastest.startswith("optimized:")


def test_a_lever_that_failed_in_some_runs_is_marked_against_optimized_too(tmp_path):
    pairs = sorted((Path(__file__).parent / "data" / "h200-pairs").glob("*.json"))
    lever = json.loads(pairs[0].read_text())
    failed = tmp_path / "vit_b_16--optimized+bf16-fused-sgd--rep2.json"
    failed.write_text(json.dumps({**lever, "keys": {**lever["keys"], "rep": 2}, "status": "failed",
                                  "reason": "non-finite loss: loss is nan at step 3", "metrics": []}))
    tables(pairs + [failed], [], tmp_path / "h200")
    text = rendered(tmp_path / "h200")
    rows = [line for line in text.splitlines() if line.startswith("| optimized+bf16-fused-sgd |")]
    assert len(rows) == 1  # each lever once: in the levers' table, against optimized
    assert all(row.endswith("**failed in 1 of 3 runs** |") for row in rows)
    header = next(line for line in text.splitlines() if line.startswith("| variant | predicts |")).split(" | ")
    column = header.index("vs optimized (paired, 95 % CI; from 3 pairs, their range)")
    assert [row.split(" | ")[column] for row in rows] == ["failed"]  # no ratio from a cell that failed in its set
    r = ratio_row(pd.read_csv(tmp_path / "h200" / "ratios.csv"), "vit_b_16", "optimized", "optimized+bf16-fused-sgd")
    assert (r.status, r.why) == ("failed", "optimized+bf16-fused-sgd failed in 1 of 3 runs")
    assert not re.search(r"\d\.\d{6,}", text)  # every number in the report is formatted
    assert not re.search(r"\{[A-Za-z_.]+(:[^}]*)?\}", text)  # and no template's field is left unfilled


def repeat(path: Path, out: Path, rep: int, scale: float = 1.0, commit: str = "3f3a4b6e6edb") -> Path:
    """A copy of a real record as repetition `rep` of the set of runs of resnet50's baseline and
    optimized (commit 3f3a4b6e6edb, 2026-12-02, the H200), its throughput times `scale`."""
    r = json.loads(path.read_text())
    r["keys"] = {**r["keys"], "rep": rep}
    r["env"] = {**r["env"], "git_commit": commit}
    r["started"] = f"2026-12-02T{14 + rep:02d}" + r["started"][13:]  # repetition r+1 after r
    for m in r["metrics"]:
        m["value"] *= scale if m["metric"] == "throughput" else 1.0
    dst = out / f"{r['keys']['workload']}--{r['keys']['variant']}--rep{rep}.json"
    dst.write_text(json.dumps(r))
    return dst


def test_speedups_are_paired_ratios_with_their_interval(tmp_path):
    """Copies of real ResNet-50 records of the H200 as three repetitions of one set of runs:
    workers against the baseline (a clear gain), cudnn-benchmark against it (no change beyond
    the pairs' spread), optimized-no-amp against optimized (a loss). Each column shows the median
    of the paired ratios and its 95 % interval, the diagnosis verifies its prescription on it, and
    the figure draws it."""
    scale = {"baseline": [1.0, 1.03, 0.98], "workers": [1.0, 0.99, 1.02], "optimized": [1.0, 1.01, 0.99],
             "optimized-no-amp": [1.0, 0.98, 1.01],
             "cudnn-benchmark": [f * tput(DATA / "resnet50--baseline.json") / tput(DATA / "resnet50--cudnn-benchmark.json")
                                 for f in (1.03, 0.97, 1.0)]}
    paths = [repeat(DATA / f"resnet50--{v}.json", tmp_path, rep, f) for v, fs in scale.items() for rep, f in enumerate(fs)]
    out = tmp_path / "h200"
    tables(paths, [], out)
    text = rendered(out)

    def shown(before, after):
        ratios = [tput(DATA / f"resnet50--{after}.json") * a / (tput(DATA / f"resnet50--{before}.json") * b)
                  for a, b in zip(scale[after], scale[before])]
        lo, hi = paired.interval(np.array(ratios))
        return f"{np.median(ratios):.3g}x [{lo:.3g}, {hi:.3g}]", lo, hi

    lines = text[text.index("## resnet50"):].splitlines()
    workers, lo, _ = shown("baseline", "workers")
    assert lo > 1 and next(x for x in lines if x.startswith("| workers |")).split(" | ")[2] == workers
    cudnn, lo, hi = shown("baseline", "cudnn-benchmark")
    assert lo < 1 < hi and next(x for x in lines if x.startswith("| cudnn-benchmark |")).split(" | ")[2] == \
        f"{cudnn} not established"
    ablation, _, hi = shown("optimized", "optimized-no-amp")
    part = text[text.index("### Ablation"):]
    assert hi < 1 and next(x for x in part.splitlines() if x.startswith("| optimized-no-amp |")).split(" | ")[2] == ablation
    # the diagnosis: input-bound, workers prescribed, confirmed by its paired speedup
    assert f"| resnet50 | input-bound | waits for input 81% of the time | workers | {workers} | confirmed |" in text
    assert (out / "figures" / "speedup-resnet50.png").stat().st_size > 5000


def tput(path: Path) -> float:
    return next(m["value"] for m in json.loads(path.read_text())["metrics"] if m["metric"] == "throughput")


def test_the_host_cuda_calls_of_an_nsys_run_are_tabled_by_thread(tmp_path):
    """A real H200 capture of ResNet-50 with CUDA graphs: the training thread's launches and the
    other threads' calls are listed apart, most host time first, with the calls that wait marked."""
    record = Path(__file__).parent / "data" / "h200-captures" / "resnet50-bf16-graphs-nsys" / "metrics.json"
    tables([record], [], tmp_path / "h200")
    calls = pd.read_csv(tmp_path / "h200" / "api_calls.csv")
    recorded = json.loads(record.read_text())["nsys"]["api_calls"]
    assert len(calls) == len(recorded) and {"training", "other"} == set(calls.thread)  # recorded before thread names
    text = rendered(tmp_path / "h200")
    section = text.split("### Host CUDA calls")[1].split("###")[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| optimized+bf16-graphs |")]
    top = sorted(recorded, key=lambda c: -c["ms_per_step"])[:5]
    assert [r[1] for r in rows] == [re.sub(r"_v\d+$", "", c["name"]) for c in top]
    assert [r[3] == "yes" for r in rows] == [c["waits"] for c in top]


def test_compile_stage_line_per_run_of_the_stage_on_h200_records():
    """Two runs of the compile stage on a fresh H200 at one commit (tests/data/h200-compiles), one
    per workload's sweep: one line each, with its own folders and wall time, not one line per
    commit that would merge them and the time between them."""
    compiles = aggregate.compile_table(sorted((Path(__file__).parent / "data" / "h200-compiles").glob("*.json")))
    assert compiles.git_commit.nunique() == 1 and compiles.stage_ts.nunique() == 2
    assert (compiles.graphs_loaded == 0).all() and (compiles.graphs_compiled > 0).all()  # an empty cache
    lines = [line for line in sections.compile_stage(compiles).splitlines() if line]
    assert len(lines) == 2
    for w, g in compiles.groupby("workload"):
        line = next(line for line in lines if f", {w}) built" in line)
        assert f"built {len(g)} of {len(g)} " in line and f"{num(g.stage_s.iloc[0])} s of wall time" in line
        at_once = int(re.search(r"up to (\d+) at once", line).group(1))
        assert 1 < at_once <= 4 and g.stage_s.iloc[0] < g.seconds.sum()  # built side by side


def worse_loss(path: Path, out: Path, factor: float = 1.25) -> Path:
    """A copy of a real record whose every recorded loss is `factor` times what it trained to."""
    record = json.loads(path.read_text())
    for s in record.get("warmup_steps", []) + record["steps"]:
        if s.get("loss") is not None:
            s["loss"] *= factor
    out.write_text(json.dumps(record))
    return out


def test_the_loss_check_comes_from_the_timing_runs_the_table_shows(tmp_path):
    """Real ResNet-50 records of the H200: the timing runs of baseline, optimized and workers
    (workers' losses raised by a quarter: a timing run that trained worse) and the nsys cells of
    baseline and optimized (optimized's raised likewise: a profiled run that trained worse). The
    table shows each variant's timing runs: workers is flagged, optimized is not, and stays the
    fastest that trains against the target."""
    from analysis.tables import row
    data = Path(__file__).parent / "data" / "h200-timing"
    paths = [data / "resnet50--baseline.json", data / "resnet50--optimized.json",
             worse_loss(data / "resnet50--workers.json", tmp_path / "workers.json"),
             CAPTURES / "resnet50-baseline-nsys" / "metrics.json",
             worse_loss(CAPTURES / "resnet50-optimized-nsys" / "metrics.json", tmp_path / "optimized-nsys.json")]
    summary = tables(paths, [], tmp_path / "h200")
    loss = {(v, p): row(summary, "resnet50", v, "loss_vs_baseline", p)["median"]
            for v, p in (("optimized", "timing"), ("optimized", "nsys"), ("workers", "timing"))}
    assert loss["optimized", "nsys"] > aggregate.LOSS_TOLERANCE >= loss["optimized", "timing"]
    assert loss["workers", "timing"] > aggregate.LOSS_TOLERANCE
    lines = rendered(tmp_path / "h200").splitlines()
    table = {v: next(line for line in lines if line.startswith(f"| {v} |")) for v in ("optimized", "workers")}
    assert table["optimized"].endswith(f"| {num(loss['optimized', 'timing'])} |")
    assert table["workers"].endswith(f"| {num(loss['workers', 'timing'])} **check** |")
    target = next(line for line in lines if line.startswith("| resnet50 | 7,200"))
    assert target.split(" | ")[5].startswith("optimized: ")
    assert set(aggregate.loss_flags(summary).variant) == {"workers"}


def test_mfu_is_never_above_100_percent_a_peak_measured_low_is_said_inconsistent(results, tmp_path):
    """The H200's limits.json with its fp32 peak measured low (below what the LSTM's fp32 baseline
    achieved, as a busy machine measures it): that row says the peak is inconsistent, no MFU above
    100 % is printed, and the other rows keep theirs."""
    from analysis.tables import row
    out = tmp_path / "h200"
    shutil.copytree(results, out)
    limits = json.loads((CAPTURES / "limits.json").read_text())
    achieved = row(pd.read_csv(out / "summary.csv"), "lstm", "baseline", "throughput")["median"] \
        * limits["flops_per_sample"]["lstm"] / 1e12
    limits["peak_tflops"]["fp32"] = 0.9 * achieved
    limits["peak"] = {"measured": "2026-12-02T10:00:00+0000", "reused": True, "repeats": {"fp32": [0.9 * achieved] * 7}}
    (out / "limits.json").write_text(json.dumps(limits))
    text = rendered(out)
    appendix = text[text.index("# Appendix"):]
    part = appendix[appendix.index("## lstm"):].split("### Against the limit")[1].split("\n## ")[0]
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[-2] for line in part.splitlines() if line.startswith("| ")}  # vs the measured peak
    mfu = [float(x.replace(",", "")) for v, cell in rows.items() if v not in ("variant", "---")
           for x in re.findall(r"[\d,.]+", cell)]
    assert mfu and max(mfu) <= 100
    assert rows["baseline"] == "**peak inconsistent**" and "**Peak inconsistent** (fp32): baseline" in part
    assert "the best of 7 repeats" in part
    assert "| MFU vs datasheet (%) |" in part and "Datasheet: NVIDIA H200 Tensor Core GPU datasheet" in part


def test_the_summary_comes_first_and_its_speedups_are_the_paired_ratios(results):
    text = report.render(results).read_text()
    assert text.index("## Summary") < text.index("## Diagnosis") < text.index("## resnet50")
    ratios = pd.read_csv(results / "ratios.csv")
    summary_part = text[text.index("## Summary"):text.index("## Diagnosis")]
    row = next(line for line in summary_part.splitlines() if line.startswith("|  | optimized |")
               or line.startswith("| resnet50 | optimized |"))
    assert ratio_text(ratio_row(ratios, "resnet50", "baseline", "optimized")) in row
    assert "[resnet50-e2e](#claim-resnet50-e2e)" in summary_part and '<a id="claim-resnet50-e2e"></a>' in text


def test_a_fix_gain_reads_the_ablation_the_right_way_round_and_prefers_the_step_alone():
    from analysis import summary as first
    variants = pd.DataFrame([
        {"workload": "w", "variant": "amp", "kind": "fix", "about": "amp", "chain": "", "order": 1, "side": "step"},
        {"workload": "w", "variant": "dali", "kind": "fix", "about": "dali", "chain": "", "order": 2, "side": "input"},
        {"workload": "w", "variant": "ladder-upto-tf32", "kind": "stage", "about": "tf32", "chain": "ladder", "order": 3, "side": "step"},
        {"workload": "w", "variant": "ladder-upto-amp", "kind": "stage", "about": "amp", "chain": "ladder", "order": 4, "side": "step"}])
    def r(before, after, profiler, m, lo, hi, status):
        return {"workload": "w", "before": before, "after": after, "profiler": profiler, "metric": "throughput",
                "median": m, "lo": lo, "hi": hi, "n": 3, "status": status}
    ratios = pd.DataFrame([r("optimized", "optimized-no-dali", "timing", 0.5, 0.4, 0.8, "loss"),
                           r("ladder-upto-tf32", "ladder-upto-amp", "step", 1.5, 1.4, 1.6, "gain"),
                           r("optimized", "optimized-no-amp", "timing", 0.9, 0.85, 0.95, "loss")])
    dali = first.fix_gain(ratios, variants, "w", "dali", "input")
    assert (dali["before"], dali["after"], dali["median"], dali["lo"], dali["hi"], dali["status"]) == \
        ("optimized-no-dali", "optimized", 2.0, 1.25, 2.5, "gain")
    amp = first.fix_gain(ratios, variants, "w", "amp", "step")
    assert (amp["profiler"], amp["median"]) == ("step", 1.5)  # the step alone, not the ablation
    assert [f for f, _ in first.top_fixes(ratios, variants, "w", "input")] == ["dali"]
    tf32 = pd.concat([ratios, pd.DataFrame([r("baseline", "ladder-upto-tf32", "step", 2.0, 1.9, 2.1, "gain")])])
    assert [(f, first.basis(g)) for f, g in first.top_fixes(tf32, variants, "w", "step")] == \
        [("tf32 (not in optimized)", "step alone"), ("amp", "step alone, over +tf32")]  # the ladder's first stage too
    few = pd.DataFrame([r("ladder-upto-tf32", "ladder-upto-amp", "step", 1.5, np.nan, np.nan, "too few pairs"),
                        r("baseline", "amp", "timing", 1.2, 1.1, 1.3, "gain")])
    amp = first.fix_gain(few, variants, "w", "amp", "step")  # no interval at the step alone: the next basis
    assert (amp["profiler"], amp["median"], first.basis(amp)) == ("timing", 1.2, "alone")
    copy = pd.concat([variants, pd.DataFrame([  # a fix with no ablation: its chain stage before the fix alone
        {"workload": "w", "variant": v, "kind": "stage", "about": a, "chain": "copy", "order": o, "side": "input"}
        for v, a, o in (("copy-upto-amp", "amp", 5), ("copy-upto-pinned-async", "pinned-async", 6))])])
    pinned = pd.DataFrame([r("copy-upto-amp", "copy-upto-pinned-async", "timing", 1.12, 1.07, 1.13, "gain"),
                           r("baseline", "pinned-async", "timing", 1.0, 0.9, 1.1, "not established")])
    g = first.fix_gain(pinned, copy, "w", "pinned-async", "input")
    assert (g["median"], first.basis(g)) == (1.12, "copy chain, over +amp")
    steps = pd.concat([copy, pd.DataFrame([  # step-alone chains, one of them at another batch (sync32)
        {"workload": "w", "variant": f"{c}-upto-{a}", "kind": "stage", "about": a, "chain": c, "order": o, "side": "step"}
        for c, a, o in (("sync32", "batch32", 7), ("sync32", "lazy-sync", 8), ("sync", "amp-bf16", 9), ("sync", "lazy-sync", 10),
                        ("copy", "lazy-sync", 5.5))]),
        pd.DataFrame([{"workload": "w", "variant": "batch32", "kind": "extra", "about": "batch32", "batch_size": 32}])])
    lazy = pd.DataFrame([r("sync32-upto-batch32", "sync32-upto-lazy-sync", "step", 1.3, 1.2, 1.4, "gain"),
                         r("copy-upto-amp", "copy-upto-lazy-sync", "timing", 1.1, 1.05, 1.15, "gain"),
                         r("sync-upto-amp-bf16", "sync-upto-lazy-sync", "step", 1.01, 1.005, 1.02, "gain")])
    g = first.fix_gain(lazy, steps, "w", "lazy-sync", "step")  # the step alone first, at the workload's batch only
    assert (g["median"], first.basis(g)) == (1.01, "sync chain, step alone, over +amp-bf16")
    g = first.fix_gain(lazy, steps, "w", "lazy-sync", "input")  # an input-side reading: no step-alone basis
    assert (g["median"], first.basis(g)) == (1.1, "copy chain, over +amp")


def test_a_run_faster_than_its_own_step_alone_is_flagged_not_printed_as_a_share():
    from analysis.sections import INCONSISTENT, step_share
    ok = pd.Series({"median": 96.0, "lo": 95.0, "hi": 97.0})
    too_fast = pd.Series({"median": 107.0, "lo": 105.0, "hi": 109.0})
    assert step_share(ok) == "96 [95, 97]" and "inconsistent" not in step_share(ok)
    assert step_share(too_fast).endswith("**inconsistent: faster than its step alone**")
    assert INCONSISTENT < 107


def test_a_price_per_gpu_hour_the_user_sets_gives_each_variant_its_cost_per_million_samples(tmp_path):
    from analysis.tables import row
    out = tmp_path / "h200"
    aggregate.main(H200, [], out, catalog=catalog(), study={"gpu_hour_price": 3.0})
    text = report.render(out).read_text()
    tput = row(pd.read_csv(out / "summary.csv"), "resnet50", "optimized", "throughput")["median"]
    line = next(x for x in text[text.index("## resnet50"):].splitlines() if x.startswith("| optimized |"))
    assert "| cost per 1M samples |" in text and f"| {num(3.0 * 1e6 / 3600 / tput)} |" in line
    aggregate.main(H200, [], tmp_path / "none", catalog=catalog())  # no price set: no cost column
    assert "cost per 1M samples" not in report.render(tmp_path / "none").read_text()


def test_the_summary_says_what_optimized_applies_and_the_ladder_in_its_order():
    v = pd.DataFrame([{"workload": "w", "variant": n, "kind": k, "about": a, "chain": c, "order": i}
                      for i, (n, k, a, c) in enumerate([("workers", "fix", "workers", ""), ("amp", "fix", "amp", ""),
                                                        ("tf32", "extra", "tf32", ""),
                                                        ("ladder-upto-tf32", "stage", "tf32", "ladder"),
                                                        ("ladder-upto-amp", "stage", "amp", "ladder")])])
    line = report.optimized_line(v)
    assert "every fix at once (workers, amp)" in line and "tf32 are measured beside the fixes" in line
    assert "baseline -> tf32 -> amp; a stage adds its fix" in report.terms(v)


def test_the_summary_names_each_fix_by_the_knobs_it_sets_and_tallies_the_verdicts():
    v = pd.DataFrame([{"workload": "w", "variant": n, "kind": k, "order": i, "side": "", "num_workers": w,
                       "sync_every": s} for i, (n, k, w, s) in enumerate(
                          [("baseline", "baseline", 0.0, 1.0), ("workers", "fix", 8.0, 1.0), ("lazy-sync", "fix", 0.0, 10.0)])])
    assert "`workers`: num_workers=8; `lazy-sync`: sync_every=10." in report.glossary(v)
    assert "naive start, at each workload's own batch size: num_workers=0, sync_every=1. " in report.glossary(v)
    said = pd.Series(["holds", "holds in direction, larger than documented", "holds (direction only; no size documented)",
                      "too few runs", "holds"])
    assert report.tally_line(said).startswith("Verdicts of the 5 tests: holds: 2; holds in direction (no size "
                                              "documented): 1; holds in direction, larger than documented: 1; no verdict: 1. "
                                              "A verdict compares gains, not ratios")


def test_a_variant_of_another_sequence_length_gets_no_mfu_from_flops_counted_at_the_workloads_own():
    """The LSTM's FLOPs per sample were counted at its own sequence length: the shape grid's points
    at other lengths would read 4x too high or too low, so only the others have an MFU row."""
    from analysis import views
    summary = pd.DataFrame([{"workload": "lstm", "variant": v, "profiler": "timing", "metric": "throughput",
                             "status": "ok", "median": 1000.0, "lo": 990.0, "hi": 1010.0, "unit": "samples/s"}
                            for v in ["optimized", "lstm-shape-batch_size32-seq_len32"]])
    variants = pd.DataFrame([{"workload": "lstm", "variant": "optimized", "precision": "amp-fp16", "seq_len": 0.0},
                             {"workload": "lstm", "variant": "lstm-shape-batch_size32-seq_len32", "precision": "amp-fp16",
                              "seq_len": 32.0}])
    limits = {"flops_per_sample": {"lstm": 2e10}, "peak_tflops": {"amp-fp16": 600.0}}
    df = views.mfu(summary, variants, limits, "lstm")
    assert df.variant.tolist() == ["optimized"] and df.mfu.iloc[0] == pytest.approx(100 * 1000 * 2e10 / 1e12 / 600)


@pytest.mark.parametrize("x,unit,kind,said", [
    (16.3, "x", "reduction", "16.3x down"), (0.619, "x", "reduction", "1.62x up"), (4.07, "x", "ratio", "4.07x"),
    (0.391, "ms/step", "difference", "0.391 ms/step saved"), (-3.23, "ms/step", "difference", "3.23 ms/step lost")])
def test_the_claims_digest_says_which_way_a_reduction_or_a_difference_went(x, unit, kind, said):
    """A reduction is before / after: below 1 the metric rose (torch.compile launching more kernels);
    a difference is before - after: what the fix saved, or below 0 what it cost."""
    from analysis import report
    assert report.measured(x, unit, f"baseline -> after ({kind}; resnet50, timing)") == said


def test_a_chain_stage_after_one_that_changes_nothing_shows_its_gain_over_that_one():
    """ViT-B/16's ladder: channels-last is measured as the amp stage (same knobs here) and not shown;
    the compile stage after it shows its paired gain, which ratios.csv keys by the stage before it."""
    from analysis import sections
    stages = ["ladder-upto-tf32", "ladder-upto-amp", "ladder-upto-channels-last", "ladder-upto-compile"]
    variants = pd.DataFrame([{"workload": "vit_b_16", "variant": v, "chain": "ladder", "order": i,
                              "about": v.removeprefix("ladder-upto-")} for i, v in enumerate(stages)])
    ran = ["baseline", "ladder-upto-tf32", "ladder-upto-amp", "ladder-upto-compile"]
    summary = pd.DataFrame([{"workload": "vit_b_16", "variant": v, "profiler": "step", "metric": "throughput",
                             "status": "ok", "median": 100.0 * (i + 1), "lo": 99.0, "hi": 101.0, "n": 3} for i, v in enumerate(ran)])
    cells = pd.DataFrame([{"workload": "vit_b_16", "variant": "ladder-upto-channels-last", "profiler": "step",
                           "status": "skipped", "reason": "same knobs as ladder-upto-amp here"}])
    pairs = list(zip(["baseline", *stages], stages))
    ratios = pd.DataFrame([{"workload": "vit_b_16", "before": b, "after": a, "profiler": "step", "metric": "throughput",
                            "median": 1.5, "lo": 1.4, "hi": 1.6, "n": 3, "status": "gain"} for b, a in pairs])
    text = sections.chain_section(summary, ratios, variants, cells, "vit_b_16", "ladder")
    compile_row = next(line for line in text.splitlines() if line.startswith("| + compile"))
    assert "1.5x [1.4, 1.6]" in compile_row.split("|")[4] and "+ channels-last" not in text
    # a chain shown alone starts from the baseline it is measured against
    assert text.splitlines()[2] == "| baseline | baseline | 100 [99, 101] |  |  |"
    assert text.splitlines()[3].startswith("| + tf32 | ladder-upto-tf32 | 200 [99, 101] | 1.5x [1.4, 1.6] |")


def test_a_chain_stage_after_stages_not_measured_names_every_fix_it_adds():
    """The copy chain with only its last two stages measured: the first shown names the fixes of the
    stages before it too, since its gain over the baseline is theirs as well."""
    from analysis import sections
    fixes = ["workers", "lazy-sync", "compile", "pinned-async"]
    variants = pd.DataFrame([{"workload": "resnet50", "variant": f"copy-upto-{f}", "chain": "copy", "order": i,
                              "about": f} for i, f in enumerate(fixes)])
    ran = ["baseline", "copy-upto-compile", "copy-upto-pinned-async"]
    summary = pd.DataFrame([{"workload": "resnet50", "variant": v, "profiler": "timing", "metric": "throughput",
                             "status": "ok", "median": 100.0, "lo": 99.0, "hi": 101.0, "n": 3} for v in ran])
    ratios = pd.DataFrame([{"workload": "resnet50", "before": b, "after": a, "profiler": "timing", "metric": "throughput",
                            "median": 2.0, "lo": 1.9, "hi": 2.1, "n": 3, "status": "gain"}
                           for b, a in zip(ran, ran[1:])])
    cells = pd.DataFrame(columns=["workload", "variant", "profiler", "status", "reason"])
    stages = [line.split("|")[1].strip() for line in
              sections.chain_section(summary, ratios, variants, cells, "resnet50", "copy").splitlines()[2:]]
    assert stages == ["baseline", "+ workers, lazy-sync, compile", "+ pinned-async"]


def test_chains_shown_together_share_one_table_with_a_column_naming_each():
    """The loss-read chains (bf16, batch 32, fp16) read as one table: each row names its chain."""
    from analysis import sections
    chains = {"sync": "amp-bf16", "scaler": "amp"}
    variants = pd.DataFrame([{"workload": "resnet50", "variant": f"{c}-upto-{f}", "chain": c, "order": i, "about": f}
                             for c, first in chains.items() for i, f in enumerate([first, "lazy-sync"])])
    summary = pd.DataFrame([{"workload": "resnet50", "variant": v, "profiler": "step", "metric": "throughput",
                             "status": "ok", "median": 100.0, "lo": 99.0, "hi": 101.0, "n": 3}
                            for v in ["baseline", *variants.variant]])
    ratios = pd.DataFrame([{"workload": "resnet50", "before": "baseline", "after": v, "profiler": "step",
                            "metric": "throughput", "median": 2.0, "lo": 1.9, "hi": 2.1, "n": 3, "status": "gain"}
                           for v in variants.variant])
    cells = pd.DataFrame(columns=["workload", "variant", "profiler", "status", "reason"])
    text = sections.chain_section(summary, ratios, variants, cells, "resnet50", ("sync", "scaler"))
    rows = [line.split("|")[1:3] for line in text.splitlines()[2:]]
    assert text.startswith("| chain | stage |") and [c.strip() for c, _ in rows] == ["sync", "sync", "scaler", "scaler"]
    assert "chain" not in sections.chain_section(summary, ratios, variants, cells, "resnet50", "sync").split("|")[1]


def test_a_timeline_kernel_ncu_did_not_measure_shows_blank_cells_not_nan():
    """The merged kernels table: ncu's columns beside the nsys kernels it measured (found by mangled
    name: ncu's share comes from another run), blank beside the others."""
    from analysis import sections
    row = {"workload": "lstm", "profiler": "nsys", "rep": 0, "ms_per_step": 1.0, "calls_per_step": 1}
    kernels = pd.DataFrame([{**row, "variant": "optimized", "rank": 1, "name": "gemm_a", "mangled": "_Z6gemm_a", "share": 40.0,
                             "mean_us": 9.5},
                            {**row, "variant": "optimized", "rank": 2, "name": "elementwise", "mangled": "_Z2ew", "share": 20.0,
                             "mean_us": 2.0},
                            {**row, "variant": "optimized", "profiler": "ncu", "rank": 1, "name": "gemm_a", "mangled": "_Z6gemm_a",
                             "share": 41.3, "sm_pct": 80.0, "tensor_pct": 70.0, "memory_pct": 30.0, "achieved_occupancy": 12.0,
                             "theoretical_occupancy": 12.5, "bound": "compute"}])
    text = sections.kernels_section(kernels, "lstm", 3, ["optimized"], merged=True)
    measured, other = (line for line in text.splitlines() if line.startswith("| optimized"))
    assert "compute" in measured and "| nan" not in text and [c.strip() for c in other.split("|")[6:12]] == [""] * 6


def test_where_the_time_goes_leaves_out_a_variant_whose_training_failed_in_a_timing_run():
    """transformer_lm's optimized fails in 2 of 3 timing runs: its nsys timeline is no evidence of
    where a working step spends its time, so its row is left out and the report says so."""
    from analysis import report
    def row(variant, profiler, metric, value, **more):
        return {"workload": "transformer_lm", "variant": variant, "profiler": profiler, "metric": metric, "status": "ok",
                "median": value, "lo": value, "hi": value, "n": 3, "failed": 0, "reason": None, **more}
    rows = [row(v, "nsys", m, x) for v in ("baseline", "optimized")
            for m, x in (("gpu_busy", 90.0), ("gpu_kernel_share", 88.0), ("profiled_step_time", 60.0), ("phase_input", 1.0))]
    rows += [row("baseline", "timing", "throughput", 100.0),
             row("optimized", "timing", "throughput", 400.0, n=1, failed=2, reason="loss went non-finite")]
    text = report.time_part(pd.DataFrame(rows), "transformer_lm", None, ["baseline", "optimized"])
    assert "| baseline | nsys |" in text and "| optimized |" not in text
    assert text.rstrip().endswith("Not shown, its training failed in a timing run: optimized.")


def test_the_variant_table_drops_an_energy_ratio_column_no_pair_fills_and_keeps_one_that_has_a_pair():
    """Where no set of runs metered both cells of any pair the column would read 'unpaired' in every
    row: it goes; one paired energy ratio keeps it."""
    from analysis import report
    summary = pd.DataFrame([{"workload": "resnet50", "variant": v, "profiler": "timing", "metric": m, "unit": u,
                             "status": "ok", "median": x, "lo": x, "hi": x, "n": 3, "failed": 0, "reason": None}
                            for v, x in (("baseline", 100.0), ("amp", 150.0))
                            for m, u in (("throughput", "samples/s"), ("energy_per_sample", "J"))])
    ratio = {"workload": "resnet50", "before": "baseline", "after": "amp", "profiler": "timing", "median": 1.5,
             "lo": 1.4, "hi": 1.6, "n": 3, "status": "gain", "run_set": "GPU-a|abc|2026-12-06", "why": ""}
    unpaired = {**ratio, "metric": "energy_per_sample", "median": float("nan"), "lo": float("nan"), "hi": float("nan"),
                "n": 0, "status": "unpaired"}
    ratios = pd.DataFrame([{**ratio, "metric": "throughput"}, unpaired])
    assert "energy vs baseline" not in report.variants_table(summary, ratios, "resnet50", ["baseline", "amp"])
    paired = {**ratio, "metric": "energy_per_sample", "median": 0.7, "lo": 0.68, "hi": 0.72}
    text = report.variants_table(summary, pd.DataFrame([{**ratio, "metric": "throughput"}, paired]), "resnet50",
                                 ["baseline", "amp"])
    assert "energy vs baseline (paired)" in text and "0.7x [0.68, 0.72]" in text


def test_two_kernels_of_one_variant_under_one_shown_name_are_numbered():
    from analysis import sections
    names = pd.Series(["Kernel2", "Kernel2", "gemm", "Kernel2"])
    variants = pd.Series(["baseline", "baseline", "baseline", "optimized"])
    assert sections.told_apart(names, variants).tolist() == ["Kernel2", "Kernel2 (2)", "gemm", "Kernel2"]


@pytest.mark.parametrize("busy,noted", [(91.8, True), (27.5, False)])
def test_a_busy_gpu_while_the_host_waits_for_input_is_read_as_a_copy_behind_the_gpu(busy, noted):
    """article 002's chain on the H100: GPU busy 92 % while the host waits for input 79 %: the wait is
    the blocking copy queued behind the GPU's work; a baseline waiting as long with the GPU idle is not."""
    from analysis import sections
    rows = [{"workload": "resnet50", "variant": "a002-upto-compile", "profiler": "nsys", "metric": m, "status": "ok",
             "median": x, "lo": x, "hi": x, "n": 3}
            for m, x in (("gpu_busy", busy), ("gpu_kernel_share", busy - 5), ("profiled_step_time", 100.0),
                         ("phase_input", 79.0))]
    text = sections.time_section(pd.DataFrame(rows), "resnet50", None)
    assert ("In a002-upto-compile the GPU is busy 80 %" in text) == noted


def test_a_wide_ratio_is_told_where_the_host_sets_a_cells_pace_and_named_where_it_does_not():
    """A paired throughput ratio whose interval is wider than 5 % of its median: explained where a cell
    waits on its loader (or its GPU idles), named as worth a look where the GPU is busy; a narrow one
    is neither."""
    from analysis import summary as first
    def cell(variant, wait, util):
        return [{"workload": "resnet50", "variant": variant, "profiler": "timing", "metric": m, "median": x}
                for m, x in (("input_wait_share", wait), ("gpu_util", util))]
    summary = pd.DataFrame(cell("baseline", 78.0, 22.0) + cell("optimized", 2.0, 86.0) + cell("optimized-no-x", 2.0, 87.0))
    def ratio(before, after, lo, hi):
        return {"workload": "resnet50", "before": before, "after": after, "metric": "throughput", "n": 3,
                "median": 1.0, "lo": lo, "hi": hi}
    ratios = pd.DataFrame([ratio("baseline", "optimized", 0.9, 1.1), ratio("optimized", "optimized-no-x", 0.95, 1.01),
                           ratio("optimized", "optimized+y", 0.99, 1.01)])
    w = first.wide_ratios(summary, ratios)
    assert w == {"paired": 3, "host": ["resnet50: baseline -> optimized"], "other": ["resnet50: optimized -> optimized-no-x"]}
    assert first.wide_ratios(summary.iloc[:0], ratios)["other"] == ["resnet50: baseline -> optimized",
                                                                     "resnet50: optimized -> optimized-no-x"]


def test_the_shape_grid_is_one_table_with_ncu_beside_the_points_it_measured():
    """Each point's tokens/s, and where ncu ran on it its SM throughput and occupancy in brackets;
    the other points plain."""
    from analysis import sections
    points = [(b, s) for b in (32, 512) for s in (32, 128)]
    variants = pd.DataFrame([{"workload": "lstm", "variant": f"lstm-shape-batch_size{b}-seq_len{s}", "kind": "grid",
                              "about": f"batch_size={b} seq_len={s}", "chain": "lstm-shape"} for b, s in points])
    def row(variant, profiler, metric, value):
        return {"workload": "lstm", "variant": variant, "profiler": profiler, "metric": metric, "status": "ok",
                "median": value, "lo": value, "hi": value, "n": 3}
    rows = [row("optimized", "timing", "token_throughput", 1e6)]
    rows += [row(f"lstm-shape-batch_size{b}-seq_len{s}", "timing", "token_throughput", 1000.0 * b * s) for b, s in points]
    rows += [row("lstm-shape-batch_size32-seq_len128", "ncu", "sm_throughput", 6.5),
             row("lstm-shape-batch_size32-seq_len128", "ncu", "achieved_occupancy", 14.0)]
    text = sections.grid_section(pd.DataFrame(rows), variants, "lstm", "lstm-shape")
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert lines[0] == "| batch_size \\ seq_len | 32 | 128 |" and len(lines) == 4
    assert lines[2] == "| 32 | 1,024,000 | 4,096,000 (SM 6.5 %, occupancy 14 %) |"
    assert "(SM" not in lines[3]


def test_the_summary_sets_an_articles_scenario_as_measured_here_beside_the_article_and_says_why_they_differ():
    """Article 002's chain: its documented 420 -> 1,250 samples/s beside the medians measured here,
    the baseline's share at the article's, its input wait, and claims.yaml's `setting`."""
    from analysis import report
    rows = [{"workload": "resnet50", "variant": v, "profiler": "timing", "metric": m, "unit": u, "status": "ok",
             "median": x, "lo": x, "hi": x, "n": 3}
            for v, m, u, x in (("baseline", "throughput", "samples/s", 210.0), ("a002-upto-compile", "throughput", "samples/s", 625.0),
                               ("baseline", "input_wait_share", "%", 77.6))]
    text = report.settings_text(pd.DataFrame(rows))
    line = next(line for line in text.splitlines() if line.startswith("- Article 002"))
    assert "420 -> 1,250 samples/s there, 210 -> 625 samples/s here (the baseline at 0.5x the article's, the end at 0.5x)" in line
    assert "baseline waits for input 77.6 %" in line and "JPEGs decoded on the host" in line
    assert "Article 000" not in text  # no ViT cell measured: no line
    tested = pd.DataFrame([{"id": "resnet50-e2e", "metric": "throughput", "before": "baseline", "after": "a002-upto-compile",
                            "before_value": 150.0, "after_value": 717.0, "metric_unit": "samples/s"}])  # the claim's pairs
    line = next(line for line in report.settings_text(pd.DataFrame(rows), tested).splitlines() if line.startswith("- Article 002"))
    assert "420 -> 1,250 samples/s there, 150 -> 717 samples/s here, in the runs its claim pairs" in line


def test_a_workload_of_the_study_with_no_record_on_this_machine_is_a_caveat():
    from analysis import summary as first
    summary = pd.DataFrame([{"workload": "resnet50", "variant": "baseline", "profiler": "timing", "metric": "throughput",
                             "status": "ok", "median": 1.0, "lo": 1.0, "hi": 1.0, "n": 3, "failed": 0, "reason": None}])
    c = first.caveats(summary, pd.DataFrame(), {"workloads": ["lstm", "resnet50", "transformer_lm"]})
    assert c["unmeasured"] == ["lstm", "transformer_lm"] and first.caveats(summary, pd.DataFrame())["unmeasured"] == []


def test_the_headline_sets_optimizeds_speedup_at_the_step_alone_beside_the_end_to_end_one():
    """26x end to end against 6.6x at the step alone (H100): the reader sees how much is the GPU
    side; the column goes where no workload has a step-alone pair."""
    from analysis import report
    rows = [{"workload": "resnet50", "variant": v, "profiler": "timing", "metric": "throughput", "unit": "samples/s",
             "status": "ok", "median": x, "lo": x, "hi": x, "n": 3} for v, x in (("baseline", 193.0), ("optimized", 5027.0))]
    ratio = {"workload": "resnet50", "before": "baseline", "after": "optimized", "metric": "throughput", "n": 3,
             "status": "gain", "run_set": float("nan"), "why": ""}
    ratios = pd.DataFrame([{**ratio, "profiler": "timing", "median": 26.1, "lo": 25.8, "hi": 26.3},
                           {**ratio, "profiler": "step", "median": 6.63, "lo": 6.62, "hi": 6.64}])
    variants = pd.DataFrame([{"workload": "resnet50", "variant": v, "kind": v, "chain": "", "order": i}
                             for i, v in enumerate(("baseline", "optimized"))])
    tables = {"ratios": ratios, "variants": variants, "metrics": pd.DataFrame(columns=["workload", "variant", "profiler",
                                                                                      "metric", "run_set", "value"])}
    text = report.headline_table(pd.DataFrame(rows), tables)
    assert "| optimized | 5,027 samples/s | 26.1x [25.8, 26.3] | 6.63x [6.62, 6.64] |" in text
    text = report.headline_table(pd.DataFrame(rows), {**tables, "ratios": ratios[ratios.profiler == "timing"]})
    assert "step alone" not in text and "throttled" not in text
    held = {**rows[1], "metric": "throttled_share", "unit": "%", "median": 96.6}  # NVML: power or heat held the clocks
    text = report.headline_table(pd.DataFrame([*rows, held]), tables)
    assert "| optimized | 5,027 samples/s (throttled) |" in text and "(throttled): the GPU was held below" in text


def test_the_headline_says_so_where_no_set_of_runs_holds_both_the_baseline_and_optimized():
    """H200's published records: baseline and optimized from sets made apart read 'unpaired', and
    the line under the table says why and which command pairs them."""
    from analysis import report
    rows = [{"workload": "resnet50", "variant": v, "profiler": "timing", "metric": "throughput", "unit": "samples/s",
             "status": "ok", "median": x, "lo": x, "hi": x, "n": 3} for v, x in (("baseline", 151.0), ("optimized", 5525.0))]
    ratio = {"workload": "resnet50", "before": "baseline", "after": "optimized", "metric": "throughput", "profiler": "timing",
             "n": 0, "run_set": float("nan"), "why": "no set of runs measured both", "median": float("nan"),
             "lo": float("nan"), "hi": float("nan")}
    variants = pd.DataFrame([{"workload": "resnet50", "variant": v, "kind": v, "chain": "", "order": i}
                             for i, v in enumerate(("baseline", "optimized"))])
    tables = {"variants": variants, "metrics": pd.DataFrame(columns=["workload", "variant", "profiler", "metric",
                                                                     "run_set", "value"])}
    text = report.headline_table(pd.DataFrame(rows), {**tables, "ratios": pd.DataFrame([{**ratio, "status": "unpaired"}])})
    assert "| optimized | 5,525 samples/s | unpaired |" in text
    assert "No set of runs here holds both the baseline and optimized of resnet50**" in text
    paired = {**ratio, "status": "gain", "n": 3, "median": 36.6, "lo": 36.0, "hi": 37.0, "run_set": "s"}
    assert "No set of runs" not in report.headline_table(pd.DataFrame(rows), {**tables, "ratios": pd.DataFrame([paired])})


def test_claim_tests_whose_cells_did_not_run_fold_into_one_line_that_keeps_each_claims_anchor():
    from analysis import report
    base = {"source": "002", "documented": "5 ms/step", "why this pair": "w", "measured here (95 % CI; from 3 pairs, their range; n)": ""}
    c = pd.DataFrame([
        {**base, "id": "item-sync", "pair": "step_time_mean: a -> b (difference; resnet50, step)", "verdict": "holds"},
        {**base, "id": "item-sync", "pair": "step_time_mean: c -> d (difference; resnet50, step)",
         "verdict": "not run here: step_time_mean of resnet50/d (step): not run"},
        {**base, "id": "lstm-shape", "pair": "token_throughput: e -> f (ratio; lstm, timing)", "verdict": "not run here: x"},
        {**base, "id": "lstm-shape", "pair": "token_throughput: g -> h (ratio; lstm, timing)", "verdict": "not run here: y"}])
    text = report.claims_section(c)
    assert text.count("| item-sync |") == 0 and text.count('<a id="claim-item-sync"></a>item-sync |') == 1
    assert "not run here:" not in text and "| lstm-shape" not in text
    assert ('Not run on this machine (a cell of the pair has no record here): item-sync (step_time_mean); '
            '<a id="claim-lstm-shape"></a>lstm-shape (token_throughput x2).') in text


def test_each_lever_is_set_beside_the_gain_it_predicts_and_whether_its_paired_ratio_bore_it_out():
    from analysis import sections
    from trainperf import config, variants
    said = {c["variant"]: c["predicts"] for c in variants.catalog(config.load())}
    assert said["optimized+bf16-step-graph"].startswith("with the whole step one graph launch") and said["optimized"] == ""
    rows = [{"workload": "resnet50", "variant": v, "profiler": "timing", "metric": "throughput", "unit": "samples/s",
             "status": "ok", "median": x, "lo": x, "hi": x, "n": 3, "failed": 0, "reason": None}
            for v, x in (("optimized", 5000.0), ("optimized+bf16", 5130.0), ("optimized+bf16-step-graph", 4850.0),
                         ("optimized+cuda-graphs", 5010.0))]
    ratios = pd.DataFrame([{"workload": "resnet50", "before": "optimized", "after": v, "profiler": "timing",
                            "metric": "throughput", "median": m, "lo": m, "hi": m, "n": 3, "status": s}
                           for v, m, s in (("optimized+bf16", 1.03, "gain"), ("optimized+bf16-step-graph", 0.97, "loss"),
                                           ("optimized+cuda-graphs", 1.0, "not established"))])
    text = sections.tuning_section(pd.DataFrame(rows), ratios, "resnet50",
                                   ["optimized+bf16", "optimized+bf16-step-graph", "optimized+cuda-graphs"],
                                   {"optimized+bf16": "no GradScaler", "optimized+bf16-step-graph": "one graph"})
    lines = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in text.splitlines()[2:]}
    assert text.startswith("| variant | predicts | throughput")
    assert (lines["optimized+bf16"][0], lines["optimized+bf16"][3]) == ("no GradScaler", "yes")
    assert lines["optimized+bf16-step-graph"][3] == "no: slower"
    assert (lines["optimized+cuda-graphs"][0], lines["optimized+cuda-graphs"][3]) == ("(none stated)", "not established")
    assert "predicts" not in sections.tuning_section(pd.DataFrame(rows), ratios, "resnet50", ["optimized+bf16"])


def test_a_host_call_listed_by_several_nsys_runs_of_a_variant_is_one_row_their_median(tmp_path):
    """The same H200 capture as a second run, its calls three times as long: each call once, at the
    median of the two runs, with how many runs listed it."""
    from analysis import sections
    record = Path(__file__).parent / "data" / "h200-captures" / "resnet50-bf16-graphs-nsys" / "metrics.json"
    again = json.loads(record.read_text())
    again["keys"] = {**again["keys"], "rep": 1}
    for c in again["nsys"]["api_calls"]:
        c["ms_per_step"] *= 3
    (tmp_path / "again.json").write_text(json.dumps(again))
    tables([record, tmp_path / "again.json"], [], tmp_path / "h200")
    section = sections.host_calls_section(pd.read_csv(tmp_path / "h200" / "api_calls.csv"), "resnet50")
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| optimized+bf16-graphs |")]
    top = max(json.loads(record.read_text())["nsys"]["api_calls"], key=lambda c: c["ms_per_step"])
    assert len(rows) == 5 and rows[0][5] == num(2 * top["ms_per_step"]) and rows[0][6] == "2 |"


@pytest.mark.parametrize("x,lo,hi,unit,kind,said", [
    (16.3, 13.1, 18.1, "x", "reduction", "16.3x down [13.1, 18.1]"), (0.5, 0.4, 0.625, "x", "reduction", "2x up [1.6, 2.5]"),
    (-3.23, -16.1, 41.4, "ms/step", "difference", "3.23 ms/step lost [-41.4, 16.1]"),
    (4.07, 4.03, 4.42, "x", "ratio", "4.07x [4.03, 4.42]")])
def test_a_claims_interval_is_turned_the_way_its_value_is(x, lo, hi, unit, kind, said):
    """The machines page gives each test's interval: a reduction that went up, or a difference that
    was lost, has its interval's ends turned and swapped with it."""
    from analysis import report
    assert report.measured(x, unit, f"baseline -> after ({kind}; resnet50, timing)", lo, hi) == said


def test_time_per_step_sets_the_timing_runs_mean_step_beside_the_tools_mean():
    """The tool's total is a mean step (its window over its steps), so the timing run's beside it is too."""
    from analysis import views
    def row(profiler, metric, value):
        return {"workload": "w", "variant": "v", "profiler": profiler, "metric": metric, "median": value, "lo": value,
                "hi": value, "n": 3, "status": "ok", "unit": "ms"}
    rows = [row("nsys", f"phase_{p}", 1.0) for p in views.PHASES] + [row("nsys", "profiled_step_time", 9.0),
            row("timing", "step_time", 5.0), row("timing", "step_time_mean", 6.0)]
    phases = views.phases(pd.DataFrame(rows), "w", "nsys")
    assert (phases.total.item(), phases.timed.item()) == (9.0, 6.0)


def test_a_figure_no_longer_drawn_does_not_outlive_its_report(results):
    stale = results / "figures" / "time-nothing-drawn.png"
    stale.parent.mkdir(exist_ok=True)
    stale.write_bytes(b"an old chart")
    report.render(results)
    assert not stale.exists() and (results / "figures" / "speedup-resnet50.png").exists()


def test_the_summary_sets_tf32_beside_the_baseline_and_reads_its_step_alone_from_the_ladder():
    from analysis import summary as first
    def cell(v, x):
        return {"workload": "w", "variant": v, "profiler": "timing", "metric": "throughput", "unit": "samples/s",
                "median": x, "lo": x, "hi": x, "n": 3, "status": "ok"}
    summary = pd.DataFrame([cell("baseline", 100.0), cell("tf32", 150.0), cell("optimized", 900.0)])
    variants = pd.DataFrame([{"workload": "w", "variant": f"ladder-upto-{a}", "kind": "stage", "about": a, "chain": "ladder",
                              "order": o, "side": "step"} for a, o in (("tf32", 1), ("amp", 2))])
    ratios = pd.DataFrame([{"workload": "w", "before": "baseline", "after": a, "profiler": p, "metric": "throughput",
                            "median": m, "lo": m, "hi": m, "n": 3, "status": "gain"}
                           for a, p, m in (("tf32", "timing", 1.5), ("ladder-upto-tf32", "step", 2.0),
                                           ("ladder-upto-amp", "step", 4.0))])
    assert list(first.headline(summary, ratios, variants).variant) == ["baseline", "tf32", "optimized"]
    text = report.headline_table(summary, {"ratios": ratios, "variants": variants})
    tf32 = next(line for line in text.splitlines() if "| tf32 |" in line)
    assert "1.5x" in tf32 and "2x" in tf32 and "`tf32` is the baseline with TF32 on" in text
    assert report.at_step({"ratios": ratios, "variants": variants}, "w", "amp") == ""  # not the ladder's first stage


def test_no_kernels_are_told_apart_without_string_arithmetic_on_an_empty_column():
    """A folder with no traced kernel reads an empty name column as object; pandas 3.0 with pyarrow's
    strings refused to add a str column to it, and the report failed after every record was written."""
    from analysis import sections
    empty = pd.Series([], dtype=object)
    assert sections.told_apart(empty, empty).empty
