"""Each diagnosis rule on constructed summaries that reach its branch, and the verdict on the
prescribed variant's paired speedup over the baseline (ratios.csv)."""
import pandas as pd
import pytest

from analysis import diagnosis
from analysis.tables import CI, ratio_text

COLS = ["workload", "variant", "profiler", "metric", "unit", "median", "lo", "hi", "n", "status", "reason"]
RATIO_COLS = ["workload", "before", "after", "profiler", "metric", "median", "lo", "hi", "n", "status", "run_set", "why"]


def summary(rows):
    return pd.DataFrame([("w", "baseline", p, m, "", v, v, v, 1, "ok", None) for p, m, v in rows], columns=COLS)


def ratios(fix=None, median=None, lo=None, hi=None, n=3, status=None, why=None, profiler="timing"):
    """ratios.csv with the paired ratio of `fix` over the baseline (none without a fix)."""
    rows = [] if fix is None else [("w", "baseline", fix, profiler, "throughput", median, lo, hi, n, status,
                                    "NVIDIA H200|abc123|2026-12-06", why)]
    return pd.DataFrame(rows, columns=RATIO_COLS)


NO_KERNELS = pd.DataFrame(columns=["workload", "variant", "profiler", "share", "bound"])


@pytest.mark.parametrize("rows,expected", [
    ([("timing", "input_wait_share", 80.0), ("nsys", "gpu_busy", 20.0)], "input-bound"),
    # with the input split: the loader's wait decides, else the copy's (a pageable copy waits for the GPU)
    ([("timing", "input_wait_share", 80.0), ("timing", "loader_wait_share", 70.0), ("timing", "copy_wait_share", 10.0)],
     "input-bound"),
    ([("timing", "input_wait_share", 80.0), ("timing", "loader_wait_share", 5.0), ("timing", "copy_wait_share", 75.0)],
     "copy-bound"),
    ([("timing", "input_wait_share", 35.0), ("timing", "loader_wait_share", 20.0), ("timing", "copy_wait_share", 15.0)],
     "input-bound"),  # neither part alone past the threshold: the larger decides
    ([("timing", "input_wait_share", 5.0), ("nsys", "gpu_busy", 60.0), ("nsys", "sync_calls_per_step", 3.0),
      ("nsys", "kernel_mean_duration", 400.0)], "sync-bound"),
    ([("timing", "input_wait_share", 5.0), ("torch", "gpu_busy_share", 50.0), ("torch", "kernel_mean_duration", 6.0)],
     "launch-bound"),
    ([("timing", "input_wait_share", 5.0), ("nsys", "gpu_busy", 95.0), ("nsys", "sync_calls_per_step", 3.0)],
     "GPU-bound (kernel class not measured)"),
    ([("timing", "input_wait_share", 5.0)], "unknown"),
    # no timeline: NVML's utilization tells a busy GPU, but not why an idle one idles
    ([("timing", "input_wait_share", 5.0), ("timing", "gpu_util", 93.0)], "GPU-bound (kernel class not measured)"),
    ([("timing", "input_wait_share", 5.0), ("timing", "gpu_util", 50.0)], "unknown"),
])
def test_each_rule(rows, expected):
    assert diagnosis.classify(summary(rows), NO_KERNELS, "w")[0] == expected


def test_ncu_classes_weighted_by_kernel_time_decide_a_busy_gpu():
    kernels = pd.DataFrame([("w", "baseline", "ncu", 40.0, "memory"), ("w", "baseline", "ncu", 25.0, "compute"),
                            ("w", "baseline", "ncu", 20.0, "compute")], columns=NO_KERNELS.columns)
    label, evidence = diagnosis.classify(summary([("nsys", "gpu_busy", 95.0)]), kernels, "w")
    assert label == "compute-bound kernels, narrowly" and "ncu" in evidence  # 45 % against 40 %
    kernels.loc[0, "share"] = 70.0
    assert diagnosis.classify(summary([("nsys", "gpu_busy", 95.0)]), kernels, "w")[0] == "memory-bound kernels"
    kernels.loc[0, "share"] = 50.0  # H100's LSTM baseline: memory 25.5 %, compute 20.0 %: narrowly, still amp
    row = diagnosis.diagnose(summary([("nsys", "gpu_busy", 95.0)]), kernels, ratios("amp", 4.58, 4.0, 4.62, 3, "gain")).iloc[0]
    assert (row["baseline bottleneck"], row["prescribed"], row["verdict"]) == ("memory-bound kernels, narrowly", "amp", "confirmed")


INPUT_BOUND = [("timing", "input_wait_share", 80.0)]


@pytest.mark.parametrize("ratio,text,verdict", [
    ((5.5, 5.2, 5.8, 3, "gain"), "5.5x [5.2, 5.8]", "confirmed"),
    ((1.1, 0.98, 1.2, 3, "not established"), "1.1x [0.98, 1.2] not established", "not confirmed"),
    ((1.04, 1.02, 1.06, 3, "gain"), "1.04x [1.02, 1.06]", "not confirmed"),  # a gain, but under CONFIRM at its low end
    ((0.8, 0.75, 0.85, 3, "loss"), "0.8x [0.75, 0.85]", "not confirmed"),
])
def test_the_prescription_is_verified_by_its_paired_speedup(ratio, text, verdict):
    row = diagnosis.diagnose(summary(INPUT_BOUND), NO_KERNELS, ratios("workers", *ratio)).iloc[0]
    assert (row["prescribed"], row[f"measured speedup (paired, {CI})"], row["verdict"]) == ("workers", text, verdict)


@pytest.mark.parametrize("ratio,text,verdict", [
    ((5.5, None, None, 2, "too few pairs"), "5.5x (n=2, no interval)", "unverified (too few pairs)"),
    ((None, None, None, 0, "unpaired"), "unpaired", "unverified (unpaired)"),
    ((None, None, None, 0, "failed"), "failed", "unverified (failed)"),
])
def test_a_speedup_without_an_interval_verifies_nothing(ratio, text, verdict):
    """Fewer than three pairs, no set of runs that measured both, a fix that failed: the
    prescription stands, unverified, with what was measured and why it is no verdict."""
    r = ratios("workers", *ratio)
    row = diagnosis.diagnose(summary(INPUT_BOUND), NO_KERNELS, r).iloc[0]
    assert (row["prescribed"], row[f"measured speedup (paired, {CI})"], row["verdict"]) == ("workers", text, verdict)
    assert row[f"measured speedup (paired, {CI})"] == ratio_text(r.iloc[0])


def test_a_prescription_without_its_variant_was_not_run():
    row = diagnosis.diagnose(summary(INPUT_BOUND), NO_KERNELS, ratios()).iloc[0]
    assert (row["prescribed"], row[f"measured speedup (paired, {CI})"], row["verdict"]) == (
        "workers", "", "not run here")


def test_only_the_prescribed_variant_s_paired_speedup_in_the_timing_runs_counts():
    """A clear gain of another variant, or of the prescribed one in the step alone, verifies nothing."""
    other = pd.concat([ratios("amp", 5.5, 5.2, 5.8, 3, "gain"), ratios("workers", 5.5, 5.2, 5.8, 3, "gain", profiler="step")])
    row = diagnosis.diagnose(summary(INPUT_BOUND), NO_KERNELS, other).iloc[0]
    assert row["verdict"] == "not run here"


def test_no_rule_matched_prescribes_nothing():
    row = diagnosis.diagnose(summary([("timing", "input_wait_share", 5.0)]), NO_KERNELS,
                             ratios("workers", 5.5, 5.2, 5.8, 3, "gain")).iloc[0]
    assert (row["baseline bottleneck"], row["prescribed"], row["verdict"]) == ("unknown", "", "no rule matched")


@pytest.mark.parametrize("rows,held", [
    ([("timing", "input_wait_share", 60.0), ("timing", "gpu_util", 84.0)], "input: waits for batches 60%"),
    ([("timing", "input_wait_share", 3.0), ("timing", "gpu_util", 53.0)], "host: the GPU idles 47%"),
    ([("timing", "input_wait_share", 3.0), ("nsys", "gpu_busy", 70.0), ("timing", "gpu_util", 92.0)],
     "host: the GPU idles 30%"),  # the timeline, where it ran, before NVML's samples
    ([("timing", "input_wait_share", 3.0), ("timing", "gpu_util", 92.0), ("step", "step_ceiling_used", 85.0)],
     "GPU work: the GPU is busy 92% of the time; trains at 85% of its step alone"),
    ([("timing", "input_wait_share", 3.0), ("timing", "gpu_util", 92.0), ("step", "step_ceiling_used", 97.0)],
     "its own step: trains at 97% of its step alone; in training the GPU is busy 92% of the time"),
    # CUDA graphs on the H200: the loop sat in the loader's next batch 59% of the time, yet trained
    # at 94% of its step alone: the loader is not what holds it
    ([("timing", "input_wait_share", 59.0), ("timing", "gpu_util", 90.0), ("step", "step_ceiling_used", 94.0)],
     "its own step: trains at 94% of its step alone (its waits for batches, 59% of the time, cost it little)"),
    # the LSTM on the H200: no loader in the way, yet its ~1,500 short kernels a step leave the GPU idle
    ([("timing", "input_wait_share", 3.0), ("timing", "gpu_util", 69.0), ("step", "step_ceiling_used", 99.0)],
     "its own step's host work: trains at 99% of its step alone, and the GPU idles 31% of the time"),
])
def test_what_holds_a_variant(rows, held):
    assert diagnosis.holding(summary(rows), "w", "baseline").startswith(held)
