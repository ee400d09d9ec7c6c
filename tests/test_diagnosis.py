"""Each diagnosis rule on constructed summaries that reach its branch, and the verdict on the
prescribed variant's measured speedup."""
import pandas as pd
import pytest

from analysis import diagnosis

COLS = ["workload", "variant", "profiler", "metric", "unit", "median", "lo", "hi", "n", "status", "reason"]


def summary(rows, speedup=None, fix=None):
    out = [("w", "baseline", p, m, "", v, v, v, 1, "ok", None) for p, m, v in rows]
    if fix:
        out.append(("w", fix, "timing", "speedup", "x", *speedup, 1, "ok", None))
    return pd.DataFrame(out, columns=COLS)


NO_KERNELS = pd.DataFrame(columns=["workload", "variant", "profiler", "share", "bound"])


@pytest.mark.parametrize("rows,expected", [
    ([("timing", "input_wait_share", 80.0), ("nsys", "gpu_busy", 20.0)], "input-bound"),
    ([("timing", "input_wait_share", 5.0), ("nsys", "gpu_busy", 60.0), ("nsys", "sync_calls_per_step", 3.0),
      ("nsys", "kernel_mean_duration", 400.0)], "sync-bound"),
    ([("timing", "input_wait_share", 5.0), ("torch", "gpu_busy_share", 50.0), ("torch", "kernel_mean_duration", 6.0)],
     "launch-bound"),
    ([("timing", "input_wait_share", 5.0), ("nsys", "gpu_busy", 95.0), ("nsys", "sync_calls_per_step", 3.0)],
     "compute-bound kernels"),
    ([("timing", "input_wait_share", 5.0)], "unknown"),
    # no timeline: NVML's utilization tells a busy GPU, but not why an idle one idles
    ([("timing", "input_wait_share", 5.0), ("timing", "gpu_util", 93.0)], "compute-bound kernels"),
    ([("timing", "input_wait_share", 5.0), ("timing", "gpu_util", 50.0)], "unknown"),
])
def test_each_rule(rows, expected):
    assert diagnosis.classify(summary(rows), NO_KERNELS, "w")[0] == expected


def test_ncu_classes_weighted_by_kernel_time_decide_a_busy_gpu():
    kernels = pd.DataFrame([("w", "baseline", "ncu", 40.0, "memory"), ("w", "baseline", "ncu", 25.0, "compute"),
                            ("w", "baseline", "ncu", 20.0, "compute")], columns=NO_KERNELS.columns)
    label, evidence = diagnosis.classify(summary([("nsys", "gpu_busy", 95.0)]), kernels, "w")
    assert label == "compute-bound kernels" and "ncu" in evidence
    kernels.loc[0, "share"] = 50.0
    assert diagnosis.classify(summary([("nsys", "gpu_busy", 95.0)]), kernels, "w")[0] == "memory-bound kernels"


@pytest.mark.parametrize("spread,verdict", [((5.5, 5.2, 5.8), "confirmed"), ((1.1, 0.98, 1.2), "not confirmed")])
def test_the_prescription_is_verified_by_its_measured_speedup(spread, verdict):
    s = summary([("timing", "input_wait_share", 80.0)], spread, "workers")
    row = diagnosis.diagnose(s, NO_KERNELS).iloc[0]
    assert (row["prescribed"], row["verdict"]) == ("workers", verdict)


def test_a_prescription_without_its_variant_is_not_measurable():
    row = diagnosis.diagnose(summary([("timing", "input_wait_share", 80.0)]), NO_KERNELS).iloc[0]
    assert row["verdict"] == "not measurable here"


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
