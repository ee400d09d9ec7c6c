"""Energy, power, clocks and throttling over a cell's measured window.

On a GPU: NVML's total-energy counter read at the window's start and end (mJ since the driver
loaded), and a sampler (every `period` s) of power, utilization, SM and memory clocks, temperature
and the clock-event reasons; the power samples, integrated, cross-check the counter, and stand in
for it where the GPU has none. On a CPU: the host's RAPL counters where they are readable, else
nothing, with why. The energy per sample follows in the tables from the mean power and the
throughput (J/sample = W / samples/s).
"""
from __future__ import annotations

import statistics
import threading
import time
from contextlib import contextmanager
from pathlib import Path

RAPL = Path("/sys/class/powercap")
# NVML's clock-event reasons that mean the GPU was held below its clocks by power or heat
THROTTLING = {"sw_power_cap": 0x4, "hw_slowdown": 0x8, "sw_thermal": 0x20, "hw_thermal": 0x40, "hw_power_brake": 0x80}


def integrate(t: list[float], watts: list[float]) -> float:
    """Joules from power samples (s, W): the trapezoid rule."""
    return sum((t[i + 1] - t[i]) * (watts[i] + watts[i + 1]) / 2 for i in range(len(t) - 1))


def summarize(samples: list[dict], seconds: float, counter_j: float | None) -> list[dict]:
    """A window's energy metrics from its samples (t, power_w, sm_mhz, mem_mhz, temp_c, reasons)
    and the energy counter's difference (None where the GPU has no counter)."""
    if not samples:
        return []
    sampled = integrate([s["t"] for s in samples], [s["power_w"] for s in samples])
    span = samples[-1]["t"] - samples[0]["t"]
    energy = counter_j if counter_j is not None else sampled * seconds / span if span else None
    out = [{"metric": "energy", "value": energy, "unit": "J"},
           {"metric": "mean_power", "value": energy / seconds, "unit": "W"},
           {"metric": "energy_counter", "value": 1.0 if counter_j is not None else 0.0, "unit": "1: NVML counter, 0: sampled power"}]
    if counter_j is not None and span:  # the sampled power over the same window, as a cross-check (%)
        out.append({"metric": "energy_sampled_vs_counter", "value": 100 * (sampled / span) / (counter_j / seconds) - 100,
                    "unit": "%"})
    for key, name, unit in (("sm_mhz", "sm_clock", "MHz"), ("mem_mhz", "mem_clock", "MHz"), ("temp_c", "temperature", "C")):
        values = [s[key] for s in samples]
        out += [{"metric": f"{name}_min", "value": float(min(values)), "unit": unit},
                {"metric": f"{name}_median", "value": float(statistics.median(values)), "unit": unit}]
    held = sum(1 for s in samples if s["reasons"] & sum(THROTTLING.values()))
    return out + [{"metric": "throttled_share", "value": 100 * held / len(samples), "unit": "%"}]


def instant_power(nvml, h) -> float | None:
    """The GPU's instantaneous power (W) where the driver gives it (NVML's field
    NVML_FI_DEV_POWER_INSTANT), else None: nvmlDeviceGetPowerUsage averages over the last second on
    Ampere (but GA100) and newer GPUs, which lags a window of a second or two behind the counter."""
    try:
        v = nvml.nvmlDeviceGetFieldValues(h, [nvml.NVML_FI_DEV_POWER_INSTANT])[0]
        if v.nvmlReturn != nvml.NVML_SUCCESS:
            return None
        return float(getattr(v.value, VALUE_FIELDS[v.valueType])) / 1e3  # mW
    except Exception:  # an older driver or binding without the field: the averaged reading stands in
        return None


VALUE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}  # nvmlValueType_t


class GpuSampler:
    """NVML on one GPU: the energy counter at the window's ends, and samples every `period` s."""

    def __init__(self, device_index: int = 0, period: float = 0.05):
        self.device_index, self.period = device_index, period
        self.samples: list[dict] = []
        self.util: list[float] = []
        self.counter_j: float | None = None
        self.seconds = 0.0
        self.why: str | None = None
        self.averaged = False  # a sample fell back to NVML's power reading averaged over the last second
        self._stop = threading.Event()

    def _sample(self, nvml, h) -> None:
        self.util.append(nvml.nvmlDeviceGetUtilizationRates(h).gpu)
        watts = instant_power(nvml, h)
        self.averaged = self.averaged or watts is None
        self.samples.append({"t": time.perf_counter(),
                             "power_w": nvml.nvmlDeviceGetPowerUsage(h) / 1e3 if watts is None else watts,
                             "sm_mhz": nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
                             "mem_mhz": nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM),
                             "temp_c": nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
                             "reasons": nvml.nvmlDeviceGetCurrentClocksEventReasons(h)})

    def _loop(self, nvml, h):
        while not self._stop.is_set():
            self._sample(nvml, h)
            time.sleep(self.period)

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
            yield self
            return
        start, t0 = self._counter(nvml, h), time.perf_counter()
        thread = threading.Thread(target=self._loop, args=(nvml, h), daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()
            end = self._counter(nvml, h)
            self.seconds = time.perf_counter() - t0
            self.counter_j = None if start is None or end is None else end - start
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
