"""Paired ratios and the claim verdicts built on them: pairs only within one set of runs, an
interval only from three pairs, 'not established' where it holds 1.0, no ratio for a failed cell."""
import pandas as pd
import pytest

from analysis import claims, paired

SET_A = "GPU-a|abc123|2026-12-06"
SET_B = "GPU-b|def456|2026-12-07"


def runs(values: dict[str, list[float]], rset: str = SET_A) -> pd.DataFrame:
    return pd.DataFrame([{"workload": "resnet50", "variant": v, "profiler": "timing", "rep": r, "metric": "throughput",
                          "value": x, "run_set": rset} for v, xs in values.items() for r, x in enumerate(xs)])


def cells_of(df: pd.DataFrame, failed: tuple = ()) -> pd.DataFrame:
    c = df[["workload", "variant", "profiler", "rep", "run_set"]].drop_duplicates().assign(status="ok")
    for variant, rep in failed:
        c.loc[(c.variant == variant) & (c.rep == rep), "status"] = "failed"
    return c


def test_a_clear_gain_has_an_interval_above_one():
    df = runs({"baseline": [100, 102, 98, 101], "amp": [190, 195, 185, 192]})
    r = paired.ratio(df, cells_of(df), "baseline", "amp")
    assert r["status"] == "gain" and r["n"] == 4 and 1.8 < r["lo"] <= r["median"] <= r["hi"] < 2.0


def test_an_interval_that_holds_one_reads_not_established():
    df = runs({"baseline": [100, 102, 98], "amp": [97, 105, 99]})
    r = paired.ratio(df, cells_of(df), "baseline", "amp")
    assert r["lo"] < 1 < r["hi"] and r["status"] == "not established"
    assert claims.verdict("ratio", r, 1.25) == "not established"


def test_runs_of_different_sets_are_never_paired():
    """The baseline's runs come from one day, the fix's from another: no ratio at all."""
    df = pd.concat([runs({"baseline": [100, 101, 99]}, SET_A), runs({"amp": [190, 191, 189]}, SET_B)])
    r = paired.ratio(df, cells_of(df), "baseline", "amp")
    assert r["status"] == "unpaired" and "median" not in r


def test_an_unpaired_run_contributes_no_ratio():
    """Three pairs in one set, a fourth baseline run on another day: the ratio rests on three."""
    df = pd.concat([runs({"baseline": [100, 100, 100], "amp": [200, 200, 200]}), runs({"baseline": [50]}, SET_B)])
    r = paired.ratio(df, cells_of(df), "baseline", "amp")
    assert r["n"] == 3 and r["median"] == 2.0 and r["run_set"] == SET_A


def test_fewer_than_three_pairs_give_no_interval():
    df = runs({"baseline": [100, 101], "amp": [190, 191]})
    r = paired.ratio(df, cells_of(df), "baseline", "amp")
    assert r["status"] == "too few pairs" and "lo" not in r
    assert claims.verdict("ratio", r, 2.0) == "too few pairs"


def test_a_run_from_an_uncommitted_tree_is_never_used():
    df = runs({"baseline": [100, 101, 99], "amp": [190, 191, 189]}, "GPU-a|abc123-dirty|2026-12-06")
    assert paired.ratio(df, cells_of(df), "baseline", "amp")["status"] == "unpaired"


def test_a_cell_that_failed_in_one_run_of_three_gives_no_ratio():
    df = runs({"baseline": [100, 101, 99], "amp": [190, 191]})  # its third run went non-finite
    cells = pd.concat([cells_of(df), pd.DataFrame([{"workload": "resnet50", "variant": "amp", "profiler": "timing",
                                                    "rep": 2, "run_set": SET_A, "status": "failed"}])])
    r = paired.ratio(df, cells, "baseline", "amp")
    assert r["status"] == "failed" and r["why"] == "amp failed in 1 of 3 runs"


@pytest.mark.parametrize("measured,effect,expected", [
    ((1.9, 1.7, 2.1), 1.25, "holds in direction, larger than documented"),  # the old ratio rule called this 'holds'
    ((1.3, 1.2, 1.4), 1.25, "holds"),
    ((3.1, 2.9, 3.3), 3.0, "holds"),
    ((36.7, 30.0, 38.0), 2.98, "holds in direction, larger than documented"),
    ((1.02, 0.97, 1.08), 1.25, "not established"),
    ((0.8, 0.7, 0.9), 1.25, "does not hold (the opposite)"),
    ((1.5, 1.4, 1.6), None, "holds (direction only; no size documented)"),
])
def test_verdicts_judge_gains_not_ratios(measured, effect, expected):
    m = dict(zip(("median", "lo", "hi"), measured), status="gain" if measured[1] > 1 else
             "loss" if measured[2] < 1 else "not established")
    assert claims.verdict("ratio", m, effect) == expected


def test_a_difference_is_judged_around_zero():
    m = {"median": 4.0, "lo": 3.0, "hi": 5.0, "status": "gain"}
    assert claims.verdict("difference", m, 5.0) == "holds"
    assert claims.verdict("difference", {**m, "lo": -1.0, "status": "not established"}, 5.0) == "not established"


def test_a_claim_names_its_pair_and_rests_on_paired_runs():
    df = runs({"baseline": [100, 102, 98], "workers": [490, 500, 480]})
    row = claims.evaluate(df, cells_of(df), [{
        "id": "x", "source": "002", "hardware": "A100", "claim": "8 workers", "documented": {"before": 1, "after": 5, "unit": "x"},
        "tests": [{"kind": "ratio", "workload": "resnet50", "before": "baseline", "after": "workers",
                   "metric": "throughput", "effect": 5.0, "why": "differs only by the workers"}]}]).iloc[0]
    assert row.pair == "throughput: baseline -> workers (ratio; resnet50, timing)"
    assert row["why this pair"] == "differs only by the workers" and row.verdict == "holds" and row.n == 3


def test_every_claim_in_the_registry_names_its_pairs_and_why():
    for c in claims.load():
        assert c["tests"], c["id"]
        for t in c["tests"]:
            assert t["why"] and t["kind"] in ("ratio", "reduction", "difference", "share")
            assert t["before"] and (t["kind"] == "share" or t["after"])


def test_undecided_ratios_name_both_cells_for_the_confirming_repetitions():
    """A ratio whose interval holds 1.0, or with too few pairs for one, sends both its cells to the
    confirming repetitions; a gain, a ratio already at the confirming count, or a failed cell does not."""
    df = runs({"baseline": [100, 102, 98], "amp": [190, 195, 185], "workers": [97, 105, 99], "compile": [120],
               "dali": [101, 99, 100], "tf32": [99, 103, 98]})
    cells = cells_of(df, failed=[("dali", 1)])
    table = paired.table(df, cells, [("resnet50", "baseline", v) for v in ["amp", "workers", "compile", "dali", "tf32"]])
    table.loc[table.after == "tf32", "n"] = paired.CONFIRM_PAIRS  # as if confirmed already, and still not established
    chosen = paired.undecided(table)
    assert {c["variant"] for c in chosen} == {"baseline", "workers", "compile"}
    assert all(c["profiler"] == "timing" and c["workload"] == "resnet50" for c in chosen)
    meter = pd.DataFrame([{"workload": "lstm", "before": "optimized", "after": "optimized", "profiler": "timing/bare",
                           "status": "not established", "n": 3}])
    assert paired.undecided(meter) == [{"workload": "lstm", "variant": "optimized", "profiler": p} for p in ["bare", "timing"]]


def test_of_two_sets_with_as_many_pairs_the_later_one_gives_the_ratio():
    """Two sets of one day, three pairs each: the ratio is the set that ran last (not the one whose
    GPU's name sorts first)."""
    early, late = "GPU-a|abc123|2026-12-06", "GPU-b|def456|2026-12-06"
    df = pd.concat([runs({"baseline": [100, 101, 99], "amp": [150, 151, 149]}, early),
                    runs({"baseline": [100, 101, 99], "amp": [190, 191, 189]}, late)])
    cells = cells_of(df).assign(started=lambda c: c.run_set.map({early: "2026-12-06T09:00:00", late: "2026-12-06T21:00:00"}))
    r = paired.ratio(df, cells, "baseline", "amp")
    assert r["run_set"] == late and r["median"] == pytest.approx(1.9, rel=0.01)


@pytest.mark.parametrize("median,lo,hi,shown", [
    (0.998, 0.99758, 1.0014, "0.998x [0.9976, 1.001] not established"),  # 3 digits would print [0.998, 1]
    (0.981, 0.964227, 1.00386, "0.981x [0.9642, 1.004] not established"),
    (1.01, 1.0004, 1.02, "1.01x [1.0004, 1.02]"),
])
def test_a_bound_next_to_one_is_printed_on_its_side_of_it(median, lo, hi, shown):
    from analysis.tables import ratio_text
    status = "gain" if lo > 1 else "not established"
    assert ratio_text({"status": status, "median": median, "lo": lo, "hi": hi, "n": 5}) == shown


def test_a_ladder_gain_names_the_stage_it_is_measured_over():
    """A step-side gain read on the ladder is over the stage before it (amp over +tf32), not over fp32."""
    from analysis import summary as first
    step = lambda before, after: pd.Series({"profiler": "step", "before": before, "after": after})  # noqa: E731
    assert first.basis(step("ladder-upto-tf32", "ladder-upto-amp")) == "step alone, over +tf32"
    assert first.basis(step("baseline", "ladder-upto-tf32")) == "step alone"
    chained = pd.Series({"profiler": "timing", "before": "upto-lazy-sync", "after": "upto-amp"})  # the unnamed chain
    assert first.basis(chained) == "stage by stage, over +lazy-sync"
    assert first.basis(pd.Series({"profiler": "timing", "before": "optimized-no-dali", "after": "optimized"})) == "with the others on"


def started(c: pd.DataFrame, order: list[tuple[str, int]]) -> pd.DataFrame:
    """The cells with start times in the given run order, a minute apart."""
    day = c.run_set.iloc[0].split("|")[2]
    when = {k: f"{day}T10:{i:02d}:00+0000" for i, k in enumerate(order)}
    return c.assign(started=[when[(v, r)] for v, r in zip(c.variant, c.rep)])


def test_pairs_measured_apart_in_their_set_give_no_ratio():
    """Repetitions run as blocks in any order pair; a repetition split by a stop and a rerun (the
    after cell's repetitions 0 and 2 first, the before cell's three later) does not."""
    df = runs({"baseline": [100, 100, 100], "amp": [200, 190, 210]})
    blocks = [("amp", 1), ("baseline", 1), ("baseline", 0), ("amp", 0), ("baseline", 2), ("amp", 2)]
    assert paired.ratio(df, started(cells_of(df), blocks), "baseline", "amp")["status"] == "gain"
    split = [("amp", 0), ("amp", 2), ("baseline", 0), ("baseline", 2), ("baseline", 1), ("amp", 1)]
    r = paired.ratio(df, started(cells_of(df), split), "baseline", "amp")
    assert r["status"] == "unpaired" and "not interleaved" in r["why"] and "median" not in r
    other = runs({"baseline": [100, 100, 100], "amp": [150, 150, 150]}, SET_B)  # a later set, interleaved
    both = pd.concat([df, other])
    assert paired.ratio(both, pd.concat([started(cells_of(df), split), started(cells_of(other), blocks)]),
                        "baseline", "amp")["median"] == 1.5
    assert paired.ratio(both, pd.concat([started(cells_of(df), blocks), started(cells_of(other), split)]),
                        "baseline", "amp")["median"] == 2.0  # the earlier set, now the one interleaved
    failing = started(cells_of(df, failed=[("amp", 1)]), split)
    assert paired.ratio(df, failing, "baseline", "amp")["status"] == "failed"  # failed outranks not interleaved


def test_less_energy_per_sample_reads_as_a_gain():
    df = runs({"baseline": [3.0, 3.1, 2.9], "amp": [1.0, 1.1, 0.9]}).assign(metric="energy_per_sample")
    t = paired.table(df, cells_of(df), [("resnet50", "baseline", "amp")], metric="energy_per_sample",
                     lower_is_better=True)
    assert t.status.tolist() == ["gain"] and t["median"].iloc[0] < 1


def test_a_pair_whose_runs_came_from_two_runs_of_their_sweep_gives_no_ratio():
    """A stop inside repetition 1's sweep, its after cell run again later: the repetitions still
    run as blocks by their start times, but the records name two runs of that sweep."""
    df = runs({"baseline": [100, 100, 100], "amp": [200, 190, 210]})
    blocks = [("baseline", 0), ("amp", 0), ("baseline", 1), ("amp", 1), ("baseline", 2), ("amp", 2)]
    one = started(cells_of(df), blocks).assign(sweep=lambda c: "resnet50.timing.rep" + c.rep.astype(str) + ":a1")
    assert paired.ratio(df, one, "baseline", "amp")["status"] == "gain"
    resumed = one.assign(sweep=[s.replace(":a1", ":b2") if (v, r) == ("amp", 1) else s for s, v, r in zip(one.sweep, one.variant, one.rep)])
    r = paired.ratio(df, resumed, "baseline", "amp")
    assert r["status"] == "unpaired" and "two runs of its sweep" in r["why"] and "repetition 1" in r["why"]
    assert paired.ratio(df, one.assign(sweep=None), "baseline", "amp")["status"] == "gain"  # records that predate it
    own = resumed.assign(sweep=[s.replace("resnet50.", "resnet50+ddp2.") if v == "amp" else s.replace(":b2", ":a1")
                                for s, v in zip(resumed.sweep, resumed.variant)])
    assert paired.ratio(df, own, "baseline", "amp")["status"] == "gain"  # a data-parallel cell's sweep is its own
