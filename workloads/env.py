"""The environment fingerprint every run records, and the machine's short name."""
from __future__ import annotations

import os
import platform
import re
import subprocess
from importlib import metadata
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
# Environment variables that change what PyTorch, the CUDA libraries or NCCL do (a compile cache
# switched off, an allocator setting, TF32 forced off); the compile cache folder is the suite's own,
# set per cell (workloads/compiled.py), and left out.
SETTINGS = ("TORCH", "PYTORCH_", "CUDA_LAUNCH_BLOCKING", "CUBLAS_", "CUDNN_", "NVIDIA_TF32_OVERRIDE", "NCCL_")
PER_CELL = {"TORCHINDUCTOR_CACHE_DIR"}
KINETO_PAST_ERROR = "5"  # Kineto's levels: 0 verbose, 1 info, 2 warning, 3 stage, 4 error, 5 USDT markers


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> str:
    """The checkout's commit (-dirty with uncommitted changes); TRAINPERF_GIT_COMMIT where the
    code runs from a copy without .git."""
    if os.environ.get("TRAINPERF_GIT_COMMIT"):
        return os.environ["TRAINPERF_GIT_COMMIT"]
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _nvml() -> dict:
    """Driver, clocks and the GPU's UUID through NVML (which physical GPU ran, to tell one machine's
    runs from another's); empty when there is no NVIDIA driver."""
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        info = {"driver": pynvml.nvmlSystemGetDriverVersion(),
                "sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
                "mem_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM),
                "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000,
                "gpu_uuid": pynvml.nvmlDeviceGetUUID(h)}
        pynvml.nvmlShutdown()
        return info
    except Exception:  # no driver, no NVML: the fields are simply absent
        return {}


def has_cuda() -> bool:
    return torch.cuda.is_available()


def quiet_kineto(cuda: bool) -> None:
    """Kineto, torch.profiler's tracer, is built with CUDA: writing a trace, it asks the CUDA runtime
    for the GPUs' properties, and where there is no GPU it logs 'gpuGetDeviceCount failed' as an
    ERROR, once per process. Without CUDA, set its log level past ERROR before the process's first
    profiler reads it (Kineto's own markers, level USDT, still print); a KINETO_LOG_LEVEL of the
    user's own stays."""
    if not cuda:
        os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_PAST_ERROR)


def gpu_count() -> int:
    return torch.cuda.device_count() if has_cuda() else 0


def machine_slug() -> str:
    """'h200' for an NVIDIA H200, the model's last word in general; 'cpu' without a GPU."""
    if not has_cuda():
        return "cpu"
    name = torch.cuda.get_device_name(0).lower().replace("nvidia", "").strip()
    return re.sub(r"[^a-z0-9]+", "-", name.split()[0] if name else "gpu").strip("-") or "gpu"


def settings() -> str:
    """The SETTINGS variables set in this process, as 'NAME=value ...' (empty when none)."""
    return " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith(SETTINGS) and k not in PER_CELL)


def fingerprint() -> dict:
    env = {
        "python": platform.python_version(), "platform": platform.platform(), "host": platform.node(),
        "torch": torch.__version__, "torchvision": _version("torchvision"),
        "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version() if has_cuda() else None,
        "dali": _version("nvidia-dali-cuda130"), "cpu": _cpu_model(), "cpu_count": os.cpu_count(),
        "gpu": torch.cuda.get_device_name(0) if has_cuda() else None,
        "gpu_count": gpu_count(),
        "git_commit": _git_commit(), "settings": settings(),
    }
    if has_cuda():
        env.update(_nvml())
    return env
