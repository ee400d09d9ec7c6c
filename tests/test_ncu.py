"""ncu: the kernel choice from the nsys timeline, the bound classification, the permission hint,
a broken report named in the error, and the summary of real H200 ncu records."""
import json
import re
import shutil
from pathlib import Path

import pytest

from analysis import aggregate
from profiles import ncu

DATA = Path(__file__).parent / "data/h200-captures"


@pytest.mark.parametrize("sm,mem,expected", [(82.7, 42.1, "compute"), (40.0, 75.0, "memory"), (70.0, 70.0, "memory"),
                                             (30.0, 45.0, "latency"), (59.9, 0.0, "latency")])
def test_bound_class(sm, mem, expected):
    assert ncu.bound(sm, mem) == expected


def test_the_command_profiles_exactly_the_top_kernels_of_the_cells_nsys_timeline(tmp_path):
    timeline = DATA / "resnet50-optimized-nsys/metrics.json"
    spec = {"timeline": str(timeline), "ncu_kernels": 3, "tools": {"ncu": "ncu"}}
    cmd = ncu.Ncu(spec, True, tmp_path).command(spec, tmp_path)
    chosen = [k["mangled"] for k in json.loads(timeline.read_text())["nsys"]["kernels"][:3]]
    pattern = cmd[cmd.index("--kernel-name") + 1]
    assert pattern.startswith("regex:") and cmd[cmd.index("--clock-control") + 1] == "none"
    regex = re.compile(pattern[len("regex:"):])
    assert all(regex.fullmatch(m) for m in chosen)
    others = [k["mangled"] for k in json.loads(timeline.read_text())["nsys"]["kernels"][3:]]
    assert not any(regex.fullmatch(m) for m in others if m not in chosen)
    assert all(s in cmd for s in ncu.SECTIONS) and "--profile-from-start" in cmd
    # the launch cap counts per kernel and launch configuration: no kernel uses up the others' share
    assert cmd[cmd.index("--filter-mode") + 1] == "per-launch-config"
    assert cmd[cmd.index("--launch-count") + 1] == str(ncu.LAUNCHES_PER_CONFIG)


def test_a_matrix_kernel_joins_the_top_kernels_when_none_of_them_is_one():
    """ResNet-50 with TF32 on the H200: batch norm, a layout transpose and an elementwise kernel
    lead its timeline, the first convolution (a TF32 wgrad) comes fifth: ncu measures it too. Where
    the top kernels hold a convolution (the fp16 `optimized`), the choice is the top kernels alone."""
    tf32 = DATA / "resnet50-tf32-nsys/metrics.json"
    kernels = json.loads(tf32.read_text())["nsys"]["kernels"]
    chosen = ncu.chosen_kernels({"timeline": str(tf32), "ncu_kernels": 3})
    assert chosen[:3] == kernels[:3] and not any(ncu.MATRIX_KERNEL.search(k["name"]) for k in kernels[:3])
    assert len(chosen) == 4 and chosen[3] == next(k for k in kernels if ncu.MATRIX_KERNEL.search(k["name"]))
    assert "tf32" in chosen[3]["name"] and "wgrad" in chosen[3]["name"]
    fp16 = DATA / "resnet50-optimized-nsys/metrics.json"
    assert ncu.chosen_kernels({"timeline": str(fp16), "ncu_kernels": 3}) == json.loads(fp16.read_text())["nsys"]["kernels"][:3]


def test_no_usable_timeline_is_the_cells_error(tmp_path):
    spec = {"timeline": str(tmp_path / "missing.json"), "ncu_kernels": 3}
    with pytest.raises(ValueError, match="no nsys timeline"):
        ncu.chosen_kernels(spec)
    failed = tmp_path / "failed.json"
    failed.write_text(json.dumps({"status": "failed", "reason": "out of memory (batch_size=256)"}))
    with pytest.raises(ValueError, match="out of memory"):
        ncu.chosen_kernels({**spec, "timeline": str(failed)})


def test_missing_counter_permission_fails_the_cell_with_the_way_to_grant_it(tmp_path):
    out = tmp_path / "metrics.json"
    record = json.loads((DATA / "resnet50-optimized-ncu/metrics.json").read_text())
    record.pop("ncu")
    ncu.Ncu.staged(out).write_text(json.dumps(record))
    output = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
    ncu.Ncu(record["spec"], True, tmp_path).finish(record["spec"], out, 0, output, 1.0)
    after = json.loads(out.read_text())
    assert after["status"] == "failed" and "NVreg_RestrictProfilingToAdminUsers=0" in after["reason"]


@pytest.mark.parametrize("content", [b"", b"not an ncu report", None])
def test_a_broken_report_is_an_error_naming_the_file(tmp_path, content):
    path = tmp_path / "ncu.ncu-rep"
    if content is not None:
        path.write_bytes(content if content else b"")
    elif (DATA / "lstm-baseline-nsys/nsys.sqlite").exists():
        shutil.copy(DATA / "lstm-baseline-nsys/nsys.sqlite", path)  # a real file of another tool
    with pytest.raises(ValueError, match=str(path)):
        ncu.parse(path)


def test_ncu_records_from_the_h200_summarize_into_time_weighted_metrics():
    record = json.loads((DATA / "resnet50-optimized-ncu/metrics.json").read_text())
    kernels = record["ncu"]["kernels"]
    rows = {m["metric"]: m["value"] for m in aggregate.ncu_metrics(record)}
    lo, hi = min(k["tensor_pct"] for k in kernels), max(k["tensor_pct"] for k in kernels)
    assert lo <= rows["tensor_pipe_util"] <= hi
    per_class = {f"{c}_{m}" for c in ("matrix", "other") for m in aggregate.OCCUPANCY}
    assert set(rows) == set(aggregate.NCU_SUMMARY) | {"matrix_tensor_pipe_util"} | per_class
    matrix = [k for k in kernels if ncu.MATRIX_KERNEL.search(k["name"])]
    other = [k for k in kernels if not ncu.MATRIX_KERNEL.search(k["name"])]
    assert matrix and other
    for cls, ks in (("matrix", matrix), ("other", other)):
        for m in ("achieved_occupancy", "theoretical_occupancy"):
            assert min(k[m] for k in ks) <= rows[f"{cls}_{m}"] <= max(k[m] for k in ks)
    assert min(k["tensor_pct"] for k in matrix) <= rows["matrix_tensor_pipe_util"] <= max(k["tensor_pct"] for k in matrix)
    # Hopper's Tensor Core kernels: a low theoretical occupancy by design, which achieved cannot exceed
    assert rows["matrix_achieved_occupancy"] <= rows["matrix_theoretical_occupancy"]
    assert all(k["bound"] == ncu.bound(k["sm_pct"], k["memory_pct"]) for k in kernels)


def test_the_tools_version_is_the_line_that_names_it():
    from profiles.tools import version_line
    ncu_banner = ("NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025 NVIDIA Corporation\n"
                  "Version 2025.3.1.0 (build 36398880) (public-release)\n")
    assert version_line(ncu_banner) == "Version 2025.3.1.0 (build 36398880) (public-release)"
    assert version_line("NVIDIA Nsight Systems version 2025.3.1.0\n") == "NVIDIA Nsight Systems version 2025.3.1.0"
    assert version_line("") == "unknown"


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
def test_the_parser_reads_real_h200_reports_as_the_pipeline_recorded_them(tmp_path, variant):
    """The .ncu-rep files the pipeline wrote on the H200 (xz-compressed here) parse into the kernel
    table the same run recorded: three kernels, with their bound class."""
    import lzma
    folder = DATA / f"resnet50-{variant}-ncu"
    report = tmp_path / "ncu.ncu-rep"
    report.write_bytes(lzma.decompress((folder / "ncu.ncu-rep.xz").read_bytes()))
    recorded = json.loads((folder / "metrics.json").read_text())["ncu"]["kernels"]
    parsed = ncu.parse(report)
    assert [k["mangled"] for k in parsed] == [k["mangled"] for k in recorded] and len(parsed) == 3
    for mine, theirs in zip(parsed, recorded):
        assert mine["launches"] == theirs["launches"] and mine["bound"] == theirs["bound"]
        for m in ("duration_us", "sm_pct", "memory_pct", "dram_pct", "achieved_occupancy", "tensor_pct"):
            assert mine[m] == pytest.approx(theirs[m], rel=1e-9, abs=1e-9)
        assert 0 < mine["achieved_occupancy"] <= mine["theoretical_occupancy"] + 1 <= 101
    # fp32 without TF32 leaves the tensor pipe idle; AMP's convolutions run on it
    convolutions = [k["tensor_pct"] for k in parsed if "implicit_gemm" in k["name"]]
    assert max(convolutions) < 5 if variant == "baseline" else min(convolutions) > 50


def test_a_cell_under_a_tool_is_done_only_once_the_tools_findings_are_in_its_record(tmp_path):
    """The run under ncu writes its own record aside; a sweep stopped before the report was read
    (a time limit) must leave the cell to run again, not a record that passes for done."""
    import lzma
    from trainperf import sweep
    folder = DATA / "resnet50-optimized-ncu"
    recorded = json.loads((folder / "metrics.json").read_text())
    spec = {**recorded["spec"], "timeline": str(DATA / "resnet50-optimized-nsys/metrics.json")}
    ncu_rows = ("ncu_kernels", "ncu_launches", "profiled_cell_time")
    run = {**{k: v for k, v in recorded.items() if k != "ncu"}, "spec": spec,
           "metrics": [m for m in recorded["metrics"] if m["metric"] not in ncu_rows]}
    out = tmp_path / "metrics.json"
    ncu.Ncu.staged(out).write_text(json.dumps(run))
    (tmp_path / "ncu.ncu-rep").write_bytes(lzma.decompress((folder / "ncu.ncu-rep.xz").read_bytes()))
    assert not sweep.done(spec, out)
    ncu.Ncu(spec, True, tmp_path).finish(spec, out, 0, "", 2.0)
    after = json.loads(out.read_text())
    assert after["status"] == "ok" and sweep.done(spec, out) and not ncu.Ncu.staged(out).exists()
    assert [k["mangled"] for k in after["ncu"]["kernels"]] == [k["mangled"] for k in recorded["ncu"]["kernels"]]
    assert {m["metric"] for m in after["metrics"]} >= set(ncu_rows)


def test_the_ncu_report_module_is_found_beside_the_cuda_toolkits_ncu_launcher(tmp_path):
    """CUDA's bin/ncu is a launcher script; the module lives in the toolkit's nsight-compute-* folder."""
    launcher = tmp_path / "cuda/bin/ncu"
    launcher.parent.mkdir(parents=True)
    launcher.write_text('#!/bin/sh\nexec "$(dirname "$0")/../nsight-compute-2025.3.1/ncu" "$@"\n')
    assert ncu.ncu_python_dir(str(launcher)) in (None, *Path("/opt/nvidia/nsight-compute").glob("*/extras/python"))
    shipped = tmp_path / "cuda/nsight-compute-2025.3.1/extras/python"
    shipped.mkdir(parents=True)
    (shipped / "ncu_report.py").write_text("")
    assert ncu.ncu_python_dir(str(launcher)) == shipped
    assert ncu.ncu_python_dir(str(tmp_path / "cuda/nsight-compute-2025.3.1/ncu")) == shipped
