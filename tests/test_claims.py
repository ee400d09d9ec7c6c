"""Claim verdicts: every branch on constructed values, and the registry measured on real H200 records."""
from pathlib import Path

import pandas as pd
import pytest

from analysis import aggregate, claims

H200 = Path(__file__).parent / "data" / "h200-timing"


@pytest.mark.parametrize("kind,measured,effect,expected", [
    ("ratio", (3.1, 2.9, 3.3), 3.0, "holds"),
    ("ratio", (33.0, 30.0, 35.0), 3.0, "holds in direction, different size"),
    ("ratio", (1.02, 0.97, 1.08), 3.0, "does not hold (no change beyond the spread)"),
    ("ratio", (0.8, 0.7, 0.9), 1.25, "does not hold (the opposite)"),
    ("ratio", (1.5, 1.4, 1.6), None, "holds"),
    ("reduction", (10.0, 9.0, 12.0), 13.3, "holds"),
    ("difference", (4.0, 3.0, 5.0), 5.0, "holds"),
    ("difference", (-1.0, -2.0, -0.5), 5.0, "does not hold (the opposite)"),
    ("share", (40.0, 38.0, 42.0), 35.0, "holds"),
    ("share", (90.0, 88.0, 92.0), 35.0, "does not hold"),
])
def test_verdict_branches(kind, measured, effect, expected):
    assert claims.verdict(kind, *measured, effect) == expected


@pytest.mark.parametrize("value,expected", [(62.0, "holds"), (50.0, "holds"),
                                            (37.5, "does not hold (outside the documented range)")])
def test_a_documented_range_decides_a_share(value, expected):
    assert claims.verdict("share", value, value, value, 62.5, [50, 75]) == expected


def test_registry_covers_every_documented_claim():
    ids = {c["id"] for c in claims.load()}
    assert ids == {"resnet50-e2e", "loader-wait", "item-sync", "time-breakdown", "compile-kernels", "amp-kernels",
                   "async-copy", "vit-dali", "tf32-tensor-cores", "channels-last", "occupancy-range",
                   "lstm-shape", "dataloader-knobs"}


def test_registry_on_real_h200_records(tmp_path):
    paths = [H200 / f"resnet50--{v}.json" for v in ("baseline", "workers", "optimized")]
    summary = aggregate.main(paths, [], tmp_path)
    table = claims.evaluate(summary).set_index("id")
    e2e = table.loc["resnet50-e2e"]
    tput = summary[summary.metric == "throughput"].set_index("variant")["median"]
    assert e2e.value == pytest.approx(tput["optimized"] / tput["baseline"])
    assert e2e.verdict == claims.verdict("ratio", e2e.value, e2e.lo, e2e.hi, 2.98)
    assert table.loc["loader-wait"].verdict != "not measurable here"
    assert table.loc["vit-dali"].verdict == "not measurable here" and "not run" in table.loc["vit-dali"].why
    assert table.loc["tf32-tensor-cores"].verdict == "not measurable here"


def test_a_failed_cell_makes_its_claim_not_measurable_with_the_reason():
    summary = pd.DataFrame([{"workload": "resnet50", "variant": "baseline", "profiler": "timing", "metric": None,
                             "status": "failed", "reason": "out of memory (batch_size=256)"}])
    row = claims.evaluate(summary).set_index("id").loc["resnet50-e2e"]
    assert row.verdict == "not measurable here" and "out of memory" in row.why


def test_a_documented_range_is_what_the_report_quotes():
    occupancy = next(c for c in claims.load() if c["id"] == "occupancy-range")
    assert claims._documented(occupancy) == "50-75 % achieved occupancy"


def test_the_tf32_claim_reads_the_tensor_pipe_of_matrix_kernels_only(tmp_path):
    """Real ncu cells of ResNet-50 on the H200: the baseline's top kernels are fp32 convolutions
    (FFMA, a sliver of tensor pipe); with TF32 the convolutions got fast enough to leave the top
    three (layout transposes and batch-norm remain), so the tf32 cell has no matrix kernel to judge
    and the claim is not measurable, not 'the opposite'."""
    captures = Path(__file__).parent / "data" / "h200-captures"
    summary = aggregate.main([captures / f"resnet50-{v}-ncu" / "metrics.json" for v in ("baseline", "tf32")],
                             [], tmp_path)
    matrix = summary[summary.metric == "matrix_tensor_pipe_util"].set_index("variant")["median"]
    overall = summary[summary.metric == "tensor_pipe_util"].set_index("variant")["median"]
    assert list(matrix.index) == ["baseline"] and matrix["baseline"] == pytest.approx(overall["baseline"])
    assert overall["tf32"] < 0.01  # its top kernels: no tensor work at all
    row = claims.evaluate(summary).set_index("id").loc["tf32-tensor-cores"]
    assert row.verdict == "not measurable here"
    assert row.why == "matrix_tensor_pipe_util of resnet50/tf32 (ncu): the cell ran; its record does not give matrix_tensor_pipe_util"
