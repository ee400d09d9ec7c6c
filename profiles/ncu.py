"""The 'ncu' observer: Nsight Compute on the top kernels of one cell.

The kernels come from the nsys timeline of the same cell (the N with the most GPU time per step,
N = `ncu_kernels` in the config), and the timeline's first matrix-product kernel where none of
those N is one (with TF32, ResNet-50's convolutions fall behind batch norm and layout transposes,
and whether matrix work runs on the Tensor Cores is read on matrix kernels). The cell runs under
`ncu --clock-control none --profile-from-start off`, and the harness opens profiling for one
measured step only; within it ncu profiles at most LAUNCHES_PER_CONFIG launches of each chosen
kernel per launch configuration (grid, block, shared memory: `--filter-mode per-launch-config`),
so every chosen kernel is measured (a kernel launched a hundred times a step cannot use up a
global launch cap) and the replays (dozens of passes each) stay bounded.
The report is read with the `ncu_report` module (no GPU needed), one row per kernel: duration,
SM / memory / DRAM throughput (% of peak), achieved and theoretical occupancy, registers per
thread, tensor-pipe utilization, and a bound class from the speed-of-light numbers.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from profiles.tools import WrappingObserver

SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "ComputeWorkloadAnalysis", "LaunchStats")
TENSOR = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"
METRICS = {  # column -> ncu metric
    "duration_us": "gpu__time_duration.sum",
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "achieved_occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy": "sm__maximum_warps_per_active_cycle_pct",
    "registers": "launch__registers_per_thread",
    "tensor_pct": TENSOR,
}
# Matrix-product kernels by name: cuBLAS (gemm, nvjet), cuDNN convolutions (conv, fprop, dgrad,
# wgrad, xmma), CUTLASS.
MATRIX_KERNEL = re.compile(r"gemm|nvjet|conv|fprop|dgrad|wgrad|xmma|cutlass", re.IGNORECASE)
HIGH = 60.0  # % of peak from which a unit counts as the limiter (ncu's own rules use 60-80)
LAUNCHES_PER_CONFIG = 2  # launches profiled per kernel and launch configuration
PERMISSION_HINT = ("ncu may not read the GPU's performance counters (ERR_NVGPUCTRPERM): run it as root, or "
                   "let all users profile with the nvidia module option NVreg_RestrictProfilingToAdminUsers=0 "
                   "(https://developer.nvidia.com/ERR_NVGPUCTRPERM)")


def bound(sm_pct: float, memory_pct: float) -> str:
    """compute / memory when that unit is near its peak (the busier one), latency when neither is."""
    if max(sm_pct, memory_pct) < HIGH:
        return "latency"
    return "memory" if memory_pct >= sm_pct else "compute"


def ncu_python_dir(tool: str | None) -> Path | None:
    """The folder of the `ncu_report.py` that Nsight Compute ships (extras/python): beside the real
    ncu binary; or, where `tool` is the CUDA toolkit's `bin/ncu` launcher script, in the toolkit's
    `nsight-compute-*` folder or in the standalone install (/opt/nvidia/nsight-compute/<version>)."""
    if not tool:
        return None
    real = Path(os.path.realpath(tool))
    homes = [real.parent, real.parent.parent, *sorted(real.parent.parent.glob("nsight-compute*"), reverse=True),
             *sorted(Path("/opt/nvidia/nsight-compute").glob("*"), reverse=True)]
    return next((h / "extras/python" for h in homes if (h / "extras/python/ncu_report.py").is_file()), None)


def ncu_report_module(tool: str | None = None):
    """The `ncu_report` module: the installed package, or the one Nsight Compute ships."""
    try:
        import ncu_report
        return ncu_report
    except ImportError:
        found = ncu_python_dir(tool)
        if not found:
            raise ValueError("the ncu_report module is missing: pip install ncu-report") from None
        sys.path.insert(0, str(found))
        import ncu_report
        return ncu_report


def parse(path: str | Path, tool: str | None = None) -> list[dict]:
    """One row per distinct kernel (mangled name): its metrics averaged over the profiled launches."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        raise ValueError(f"{path}: no such Nsight Compute report")
    ncu_report = ncu_report_module(tool)
    try:
        report = ncu_report.load_report(str(path))
        actions = [report.range_by_idx(r).action_by_idx(a) for r in range(report.num_ranges())
                   for a in range(report.range_by_idx(r).num_actions())]
    except Exception as e:  # the module raises its own types for a truncated or foreign file
        raise ValueError(f"{path}: not a readable Nsight Compute report ({type(e).__name__}: {e})") from e
    if not actions:
        raise ValueError(f"{path}: holds no profiled kernel (truncated, or no chosen kernel ran while profiling)")
    kernels: dict[str, dict] = {}
    for a in actions:
        names = set(a.metric_names())
        row = {col: a.metric_by_name(m).as_double() for col, m in METRICS.items() if m in names}
        k = kernels.setdefault(a.name(ncu_report.IAction.NameBase_MANGLED), {"name": a.name(), "rows": []})
        k["rows"].append(row)
    out = []
    for mangled, k in kernels.items():
        cols = {c for r in k["rows"] for c in r}
        mean = {c: sum(r[c] for r in k["rows"] if c in r) / sum(c in r for r in k["rows"]) for c in cols}
        mean["duration_us"] = mean.get("duration_us", 0.0) / 1e3  # ncu reports ns
        out.append({"name": k["name"], "mangled": mangled, "launches": len(k["rows"]), **mean,
                    "matrix": bool(MATRIX_KERNEL.search(k["name"])),
                    "bound": bound(mean.get("sm_pct", 0.0), mean.get("memory_pct", 0.0))})
    return out


def chosen_kernels(spec: dict) -> list[dict]:
    """The top kernels of the same cell's nsys timeline, and its first matrix-product kernel if
    none of them is one."""
    path = Path(spec["timeline"])
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"no nsys timeline for this cell ({path}): {e}") from e
    if record.get("status") != "ok" or not record.get("nsys", {}).get("kernels"):
        raise ValueError(f"the nsys run of this cell has no kernels ({record.get('reason')})")
    kernels = record["nsys"]["kernels"]
    top = kernels[: spec["ncu_kernels"]]
    if not any(MATRIX_KERNEL.search(k["name"]) for k in top):
        top += [k for k in kernels if MATRIX_KERNEL.search(k["name"])][:1]
    return top


class Ncu(WrappingObserver):
    name = "ncu"

    def __init__(self, spec: dict, cuda: bool, out_dir: Path):
        super().__init__(spec, cuda, out_dir)
        self.steps = 0

    def command(self, spec: dict, out_dir: Path) -> list[str]:
        kernels = chosen_kernels(spec)
        names = "|".join(re.escape(k["mangled"]) for k in kernels)
        sections = [x for s in SECTIONS for x in ("--section", s)]
        return [self.tool(spec), "--clock-control", "none", "--profile-from-start", "off",
                "--target-processes", "all", "--kernel-name-base", "mangled", "--kernel-name", f"regex:^({names})$",
                "--filter-mode", "per-launch-config", "--launch-count", str(LAUNCHES_PER_CONFIG),
                *sections, "--metrics", TENSOR,
                "-o", str(Path(out_dir) / "ncu"), "-f"]

    def step(self) -> None:
        """Profile the second measured step only (the first may still settle)."""
        import torch
        self.steps += 1
        if self.steps == 1:
            torch.cuda.profiler.start()
        elif self.steps == 2:
            torch.cuda.profiler.stop()

    def failure(self, output: str) -> str:
        return self.refused(output) or super().failure(output)

    def refused(self, output: str) -> str | None:
        return PERMISSION_HINT if "ERR_NVGPUCTRPERM" in output else None

    def parse_output(self, spec: dict, out_dir: Path) -> dict:
        kernels = parse(Path(out_dir) / "ncu.ncu-rep", self.tool(spec))
        share = {k["mangled"]: k for k in chosen_kernels(spec)}
        for k in kernels:
            k["share"] = share.get(k["mangled"], {}).get("share")
        metrics = [{"metric": "ncu_kernels", "value": float(len(kernels)), "unit": "kernels"},
                   {"metric": "ncu_launches", "value": float(sum(k["launches"] for k in kernels)), "unit": "launches"}]
        return {"metrics": metrics, "kernels": kernels}
