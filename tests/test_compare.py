"""trainperf compare: two results folders made from real records of two sets of runs on one H100
model (two commits, two physical GPUs): B / A per cell with its interval, paired only where both
hold runs of one GPU on one day, and an exit status that gates on a regression."""
import json
import math
from pathlib import Path

import pytest

from analysis import aggregate, compare
from trainperf import cli

DATA = Path(__file__).parent / "data" / "h100-two-sets"
SETS = ("704eaf57df30", "8c7094d8507c")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from trainperf import config, variants
    out = {}
    for commit in SETS:
        out[commit] = tmp_path_factory.mktemp(commit) / "h100"
        aggregate.main(sorted(DATA.glob(f"*--{commit}.json")), [], out[commit], catalog=variants.catalog(config.load()))
    return out


def test_two_sets_are_compared_unpaired_with_an_interval_and_a_verdict_that_follows_it(folders):
    df = compare.compare(folders[SETS[0]], folders[SETS[1]])
    assert set(df.variant) == {"baseline", "workers", "optimized"} and not df.paired.any() and (df.n == 3).all()
    for r in df.itertuples():
        assert r.lo <= r.ratio <= r.hi and math.isclose(r.ratio, r.b / r.a)
        assert r.verdict == ("regression" if r.hi < 0.95 else "gain" if r.lo > 1.05 else
                             "within noise" if r.lo <= 1 <= r.hi else "changed")
    back = compare.compare(folders[SETS[1]], folders[SETS[0]]).set_index("variant")
    for r in df.itertuples():  # the other way round: the inverse ratio
        assert math.isclose(back.loc[r.variant, "ratio"], 1 / r.ratio)


def test_runs_of_one_gpu_on_one_day_are_paired_by_repetition(folders):
    same = compare.compare(folders[SETS[1]], folders[SETS[1]])
    assert same.paired.all() and (same.ratio == 1).all() and (same.verdict == "within noise").all()


def slower(commit: str, factor: float, out: Path) -> Path:
    """The set's records as a later commit would make them on a machine `factor` times as fast."""
    from trainperf import config, variants
    records = []
    for path in sorted(DATA.glob(f"*--{commit}.json")):
        r = json.loads(path.read_text())
        r["env"] = {**r["env"], "git_commit": "0123456789ab"}
        r["metrics"] = [{**m, "value": m["value"] * factor} if m["metric"] == "throughput" else m for m in r["metrics"]]
        (out / path.name).write_text(json.dumps(r))
        records.append(out / path.name)
    aggregate.main(records, [], out / "h100", catalog=variants.catalog(config.load()))
    return out / "h100"


def test_the_exit_status_gates_on_a_regression_beyond_the_threshold(folders, tmp_path, capsys):
    a, b = (str(folders[c]) for c in SETS)
    assert cli.main(["compare", a, b]) == 0  # two real sets: within the noise
    assert "| resnet50 | optimized | timing |" in capsys.readouterr().out
    worse = str(slower(SETS[1], 0.8, tmp_path))
    assert cli.main(["compare", a, worse, "--threshold", "0.05"]) == 1
    err = capsys.readouterr().err
    assert "trainperf: regression: resnet50/optimized (timing)" in err
    assert cli.main(["compare", a, worse, "--threshold", "0.5"]) == 0  # nothing fell by half


def test_the_machines_page_sets_each_machine_beside_the_others(tmp_path):
    """Two machines' folders (the H200's records of tests/data and the second H100 set): a column
    each, every claim's test a row, the fixes' gains from each machine's own pairs."""
    from analysis import claims, machines, report
    from trainperf import config, variants
    catalog = variants.catalog(config.load())
    aggregate.main(sorted((DATA.parent / "h200-timing").glob("*.json")), [], tmp_path / "h200", catalog=catalog)
    aggregate.main(sorted(DATA.glob(f"*--{SETS[1]}.json")), [], tmp_path / "h100", catalog=catalog)
    (tmp_path / "cpu").mkdir()  # a CPU run's folder is no machine to compare
    (tmp_path / "h100" / "limits.json").write_text(json.dumps({"peak_tflops": {"fp32": 51.6}, "bandwidth_gbps": 2900.0}))
    text = machines.render(tmp_path).read_text()
    assert "| workload | variant | h100 | h200 |" in text and "| cpu" not in text
    assert "| memory bandwidth measured here, a 1 GiB copy (GB/s) | 2,900 |  |" in text  # the h200 set predates it
    assert any(line.startswith("| resnet50 | workers | input |") and "(alone)" in line for line in text.splitlines())
    rows = [line for line in text.split("## The documented claims")[1].splitlines() if line.startswith("| ")]
    assert len(rows) - 2 == sum(len(c["tests"]) for c in claims.load())
    h100 = report.load_tables(tmp_path / "h100")
    speedup = ratio_text_of(h100["ratios"], "optimized")
    assert any(line.startswith("| resnet50 | optimized |") and speedup in line for line in text.splitlines())


def ratio_text_of(ratios, variant):
    from analysis.tables import ratio_row, ratio_text
    return ratio_text(ratio_row(ratios, "resnet50", "baseline", variant))


def test_no_machine_folder_gives_a_page_that_says_so(tmp_path):
    from analysis import machines
    assert "No GPU machine's results here yet" in machines.render(tmp_path).read_text()


def test_the_machines_page_counts_sets_of_runs_not_environments(tmp_path):
    """Two records of one set of runs (one GPU, commit, day) whose environments differ (DALI was
    installed between them): env.json lists two environments, the machines page one set of runs."""
    from analysis import machines
    aggregate.main(sorted((DATA.parent / "h100-one-set-two-envs").glob("*.json")), [], tmp_path / "h100")
    assert len(json.loads((tmp_path / "h100" / "env.json").read_text())) == 2
    assert "| sets of runs | 1 |" in machines.render(tmp_path).read_text()


def test_a_cells_throughput_is_one_number_in_the_headline_and_in_its_workloads_table(tmp_path):
    """Two H100 sets of ResNet-50 in one folder: the headline's throughput of baseline and optimized
    spans every run of both sets, as the workload's table does, while the speedup pairs one set."""
    import pandas as pd
    from analysis import report, summary as first
    from trainperf import config, variants
    aggregate.main(sorted(DATA.glob("*.json")), [], tmp_path, catalog=variants.catalog(config.load()))
    t = report.load_tables(tmp_path)
    summary = pd.read_csv(tmp_path / "summary.csv")
    h = first.headline(summary, t["ratios"], t["variants"]).set_index("variant")
    assert h.loc["optimized", "speedup"]["n"] == 3
    table = report.variants_table(summary, t["ratios"], "resnet50", ["baseline", "optimized"])
    for v in ("baseline", "optimized"):
        runs = t["metrics"][(t["metrics"].variant == v) & (t["metrics"].metric == "throughput")
                            & (t["metrics"].profiler == "timing")]
        assert runs.run_set.nunique() == 2 and h.loc[v, "n"] == len(runs) == 6
        assert f"| {v} | {report.fmt(h.loc[v, 'median'], h.loc[v, 'lo'], h.loc[v, 'hi'])} |" in table


def test_each_set_of_runs_names_the_commands_that_make_it_again(folders):
    """A set that ran three of ResNet-50's variants under timing is made again by a command that
    asks for those variants under that profiler, not the whole preset."""
    import pandas as pd
    from analysis import sections
    text = sections.run_sets_section(pd.read_csv(folders[SETS[1]] / "cells.csv"))
    assert ('`snakemake --cores 1 --config preset=headline "workloads=[resnet50]" "variants=[baseline,optimized,workers]" '
            '"profilers=[timing]"`') in text


def test_the_loss_check_compares_each_run_with_the_baseline_of_its_own_set(tmp_path):
    """Two H100 sets of ResNet-50 in one folder: each optimized run's loss is set against the baseline
    run of its own set and repetition (six checks), not a mix of both sets' runs (three)."""
    records = aggregate.load_records(sorted(DATA.glob("*.json")))
    losses = aggregate.step_losses(records)
    checks = aggregate.loss_check(losses)
    mine = checks[checks.variant == "optimized"]
    assert len(mine) == 6 and mine.run_set.nunique() == 2
    one = mine.iloc[0]
    own = losses[(losses.rep == one.rep) & (losses.run_set == one.run_set)].set_index(["variant", "step"]).loss
    common = sorted(set(own["optimized"].index) & set(own["baseline"].index))[-aggregate.LOSS_STEPS:]
    assert one.value == pytest.approx(100 * (own["optimized"][common].mean() / own["baseline"][common].mean() - 1))


def test_the_machines_page_takes_a_machine_whose_records_hold_only_step_alone_cells(tmp_path):
    """An H100 set that ran only ResNet-50's optimized at the step alone (with and without the energy
    meter): the page renders, that machine's column blank where it has no end-to-end throughput."""
    from analysis import machines
    aggregate.main(sorted((DATA.parent / "h200-timing").glob("*.json")), [], tmp_path / "h200")
    aggregate.main(sorted((DATA.parent / "h100-step-only").glob("*.json")), [], tmp_path / "h100")
    text = machines.render(tmp_path).read_text()
    optimized = next(line for line in text.splitlines() if line.startswith("| resnet50 | optimized |"))
    assert optimized.split("|")[3].strip() == "" and "samples/s" in optimized.split("|")[4]


def test_a_throughput_ratio_between_machines_is_read_against_the_ratios_of_their_measured_limits():
    """A GPU-bound workload twice as fast where the measured matmul peak is twice as high follows the
    peak; one that moved with neither peak nor bandwidth says so, with what holds it on each machine."""
    import pandas as pd
    from analysis import machines

    def tables(tputs, busy):
        rows = [{"workload": w, "variant": "optimized", "profiler": "timing", "metric": m, "unit": u, "status": "ok",
                 "median": x, "lo": x, "hi": x, "n": 3}
                for w, x in tputs.items() for m, u, x in (("throughput", "samples/s", x), ("gpu_util", "%", busy))]
        variants = pd.DataFrame([{"workload": w, "variant": "optimized", "precision": "amp-bf16"} for w in tputs])
        return {"summary": pd.DataFrame(rows), "variants": variants}

    t = {"h100": tables({"resnet50": 1000.0, "lstm": 1000.0}, 95.0), "h200": tables({"resnet50": 2000.0, "lstm": 1000.0}, 60.0)}
    limits = {"h100": {"peak_tflops": {"amp-bf16": 500.0}, "bandwidth_gbps": 3000.0},
              "h200": {"peak_tflops": {"amp-bf16": 1000.0}, "bandwidth_gbps": 4500.0}}
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in machines.differences_table(t, limits).splitlines()[2:]}
    assert rows["resnet50"][:5] == ["h200 / h100", "2x", "2x (amp-bf16)", "1.5x", "matmul peak"]
    assert rows["lstm"][:5] == ["h200 / h100", "1x", "2x (amp-bf16)", "1.5x", "neither"]
    assert "h200: host: the GPU idles 40%" in rows["lstm"][5]
    assert machines.differences_table({"h100": t["h100"]}, limits) == ""
    del limits["h200"]["bandwidth_gbps"]  # the H200's older sets measured no bandwidth
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in machines.differences_table(t, limits).splitlines()[2:]}
    assert rows["lstm"][3:5] == ["not measured on h200", "not the matmul peak (the only one measured on both)"]


def test_the_readme_headline_is_rewritten_between_its_markers_and_nowhere_else(folders, tmp_path):
    """From a real H100 set: baseline -> optimized with its paired speedup; a README without the
    markers is left as it is."""
    import shutil
    from analysis import machines
    root = tmp_path / "results"
    shutil.copytree(folders[SETS[1]], root / "h100")
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n{machines.BLOCK[0]}\nstale\n{machines.BLOCK[1]}\n\nafter\n")
    machines.render(root)
    text = readme.read_text()
    assert text.startswith("# x\n\nbefore\n") and text.endswith(f"{machines.BLOCK[1]}\n\nafter\n") and "stale" not in text
    row = next(line for line in text.splitlines() if line.startswith("| resnet50 |"))
    assert " -> " in row and "samples/s, " in row and "x [" in row
    readme.write_text("no markers\n")
    machines.render(root)
    assert readme.read_text() == "no markers\n"


def test_a_headline_cell_that_failed_in_any_run_shows_why_not_a_throughput():
    import pandas as pd
    from analysis import machines
    assert machines.failed(pd.Series({"status": "failed", "why": "optimized failed in 2 of 3 runs"}), "optimized") == \
        "failed: optimized failed in 2 of 3 runs"
    assert machines.failed(pd.Series({"status": "failed", "why": "baseline failed in 1 of 3 runs"}), "optimized") is None
    assert machines.failed(pd.Series({"status": "gain", "why": None}), "optimized") is None
    assert machines.failed(None, "optimized") is None


def test_the_machines_headline_keeps_each_workloads_rows_in_one_order_whichever_machine_has_them():
    """tf32 measured on the second machine alone still sits between the baseline and optimized."""
    import pandas as pd
    from analysis import machines
    def tables(variants):
        summary = pd.DataFrame([{"workload": "w", "variant": v, "profiler": "timing", "metric": "throughput",
                                 "unit": "samples/s", "median": 1.0, "lo": 1.0, "hi": 1.0, "n": 3, "status": "ok"}
                                for v in variants])
        return {"summary": summary, "ratios": pd.DataFrame(columns=["workload", "before", "after", "profiler", "metric"]),
                "variants": pd.DataFrame(columns=["workload", "variant", "kind", "about", "chain", "order"])}
    text = machines.headline_table({"a": tables(["baseline", "optimized"]), "b": tables(["baseline", "tf32", "optimized"])})
    assert [line.split("|")[2].strip() for line in text.splitlines()[2:5]] == ["baseline", "tf32", "optimized"]
