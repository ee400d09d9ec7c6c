"""Energy, power, clocks and throttling over a cell's measured window.

On a GPU: NVML's total-energy counter read at the window's start and end (mJ since the driver
loaded), and a sampling process (every `period` s) of power, utilization, SM and memory clocks, temperature
and the clock-event reasons; the power samples, integrated, cross-check the counter, and stand in
for it where the GPU has none. On a CPU: the host's RAPL counters where they are readable, else
nothing, with why. The energy per sample follows in the tables from the mean power and the
throughput (J/sample = W / samples/s).
"""
from __future__ import annotations

import json
import select
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

RAPL = Path("/sys/class/powercap")
SAMPLER = Path(__file__).with_name("nvml_sampler.py")
READY_S = 10.0  # how long a cell waits for its sampling process to start sampling
# NVML's clock-event reasons that mean the GPU was held below its clocks by power or heat
THROTTLING = {"sw_power_cap": 0x4, "hw_slowdown": 0x8, "sw_thermal": 0x20, "hw_thermal": 0x40, "hw_power_brake": 0x80}


def integrate(t: list[float], watts: list[float]) -> float:
    """Joules from power samples (s, W): the trapezoid rule."""
    return sum((t[i + 1] - t[i]) * (watts[i] + watts[i + 1]) / 2 for i in range(len(t) - 1))


def summarize(samples: list[dict], seconds: float, counter_j: float | None) -> list[dict]:
    """A window's energy metrics from its samples (t, power_w, sm_mhz, mem_mhz, temp_c, reasons)
    and the energy counter's difference (None where the GPU has no counter); the counter alone
    where no sample fell in the window, nothing with neither counter nor two samples."""
    sampled = integrate([s["t"] for s in samples], [s["power_w"] for s in samples])
    span = samples[-1]["t"] - samples[0]["t"] if samples else 0.0
    energy = counter_j if counter_j is not None else sampled * seconds / span if span else None
    if energy is None or not seconds:
        return []
    out = [{"metric": "energy", "value": energy, "unit": "J"},
           {"metric": "mean_power", "value": energy / seconds, "unit": "W"},
           {"metric": "energy_counter", "value": 1.0 if counter_j is not None else 0.0, "unit": "1: NVML counter, 0: sampled power"}]
    if counter_j is not None and span:  # the sampled power over the same window, as a cross-check (%)
        out.append({"metric": "energy_sampled_vs_counter", "value": 100 * (sampled / span) / (counter_j / seconds) - 100,
                    "unit": "%"})
    if not samples:
        return out
    for key, name, unit in (("sm_mhz", "sm_clock", "MHz"), ("mem_mhz", "mem_clock", "MHz"), ("temp_c", "temperature", "C")):
        values = [s[key] for s in samples]
        out += [{"metric": f"{name}_min", "value": float(min(values)), "unit": unit},
                {"metric": f"{name}_median", "value": float(statistics.median(values)), "unit": unit}]
    held = sum(1 for s in samples if s["reasons"] & sum(THROTTLING.values()))
    return out + [{"metric": "throttled_share", "value": 100 * held / len(samples), "unit": "%"}]


def window(samples: list[dict], t0: float, t1: float) -> tuple[list[dict], list[float], bool]:
    """The sampling process's samples from t0 to t1 (power, clocks, temperature, reasons), their
    utilizations, and whether any power reading was NVML's 1 s average."""
    inside = [s for s in samples if t0 <= s["t"] <= t1]
    return ([{k: v for k, v in s.items() if k not in ("util", "averaged")} for s in inside],
            [s["util"] for s in inside], any(s["averaged"] for s in inside))


class GpuSampler:
    """NVML on one GPU: the energy counter read at the window's ends, and samples every `period` s
    by a process of its own (profiles/nvml_sampler.py), started with the observer so that it samples
    from the window's first moment; the samples inside the window count."""

    def __init__(self, device_index: int = 0, period: float = 0.05):
        self.device_index = device_index
        self.samples: list[dict] = []
        self.util: list[float] = []
        self.counter_j: float | None = None
        self.seconds = 0.0
        self.why: str | None = None
        self.averaged = False  # a sample fell back to NVML's power reading averaged over the last second
        # -P: no module of profiles/ shadows one the sampler imports
        self._child = subprocess.Popen([sys.executable, "-P", str(SAMPLER), str(device_index), str(period)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        # its first line: "ready" once it samples (before the cell's setup, so before its window), or why not
        waiting, _, _ = select.select([self._child.stdout], [], [], READY_S)
        self._first = self._child.stdout.readline() if waiting else ""

    def _collect(self, t0: float, t1: float) -> None:
        """Stop the sampling process; keep its samples from t0 to t1 (or say why there are none)."""
        try:
            text = self._first + self._child.communicate("stop\n", timeout=30)[0]
            out = json.loads(text.removeprefix("ready\n") or "{}")
        except (subprocess.TimeoutExpired, json.JSONDecodeError) as e:
            self._child.kill()
            self._child.communicate()
            out = {"why": f"the sampling process gave no samples: {e}"}
        if not out and self._child.returncode:
            out = {"why": f"the sampling process ended with status {self._child.returncode} and no samples"}
        self.why = self.why or out.get("why")
        self.samples, self.util, self.averaged = window(out.get("samples", []), t0, t1)

    def switch(self, on: bool) -> bool:
        """Resume or pause the sampling process (what sampling costs, measured in one run); False
        where it no longer runs (no NVML, a GPU lost: `why` says)."""
        try:
            if self._child.poll() is None:
                self._child.stdin.write("resume\n" if on else "pause\n")
                self._child.stdin.flush()
                return True
        except (BrokenPipeError, OSError):
            pass
        return False

    def __del__(self):  # a cell that failed before its window never asked for the samples
        if getattr(self, "_child", None) is not None and self._child.poll() is None:
            self._child.kill()
            self._child.communicate()

    @staticmethod
    def _counter(nvml, h) -> float | None:
        try:
            return nvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1e3  # mJ -> J
        except nvml.NVMLError:
            return None  # a GPU older than Volta has no counter: the power samples stand in

    @contextmanager
    def running(self):
        try:
            import pynvml as nvml
            nvml.nvmlInit()
            h = nvml.nvmlDeviceGetHandleByIndex(self.device_index)
        except Exception as e:  # no NVIDIA driver: no samples, the metrics are absent
            self.why = f"NVML unavailable: {e}"
            nvml = None
        start, t0 = (self._counter(nvml, h) if nvml else None), time.perf_counter()
        try:
            yield self
        finally:
            end, t1 = (self._counter(nvml, h) if nvml else None), time.perf_counter()
            self._collect(t0, t1)
            self.seconds = t1 - t0
            self.counter_j = None if start is None or end is None else end - start
            if nvml:
                nvml.nvmlShutdown()

    def metrics(self) -> list[dict]:
        util = [{"metric": "gpu_util", "value": sum(self.util) / len(self.util), "unit": "%"}] if self.util else []
        source = [{"metric": "power_instant", "value": 0.0 if self.averaged else 1.0,
                   "unit": "1: instantaneous power samples, 0: NVML's 1 s average"}] if self.samples else []
        return util + source + summarize(self.samples, self.seconds, self.counter_j)


class RaplMeter:
    """The host's RAPL energy counters (package domains) over the window, where readable."""

    def __init__(self, root: Path = RAPL):
        self.files = sorted(root.glob("intel-rapl:[0-9]*/energy_uj")) if root.is_dir() else []
        self.why = None if self.files else f"no readable RAPL energy counter under {root} on this host"
        self.joules: float | None = None
        self.seconds = 0.0

    def _read(self) -> list[int] | None:
        try:
            return [int(f.read_text()) for f in self.files]
        except (OSError, ValueError) as e:
            self.why = f"RAPL unreadable: {e}"
            return None

    def switch(self, on: bool) -> bool:
        """Nothing to switch: the counters are read at the window's ends only."""
        return True

    def _span(self, f: Path) -> int:
        return int((f.parent / "max_energy_range_uj").read_text())

    @contextmanager
    def running(self):
        start, t0 = (self._read() if self.files else None), time.perf_counter()
        yield self
        end = self._read() if start is not None else None
        self.seconds = time.perf_counter() - t0
        if start is not None and end is not None:  # a counter that wrapped comes round once within a window
            self.joules = sum((b - a) % self._span(f) for f, a, b in zip(self.files, start, end)) / 1e6

    def metrics(self) -> list[dict]:
        if self.joules is None or not self.seconds:
            return []
        return [{"metric": "energy", "value": self.joules, "unit": "J"},
                {"metric": "mean_power", "value": self.joules / self.seconds, "unit": "W"}]
