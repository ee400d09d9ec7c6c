"""NVML's sampler in a process of its own, so that its Python never takes the training process's
GIL, which a compiled step's launches hold nearly all the time. Run as a script: it says "ready"
once it samples, samples one GPU every `period` s until a line on its stdin other than "pause" or
"resume" (not the pipe's end: a DataLoader worker forked from the training process holds that open
too), then prints the samples as one JSON object; or, where NVML is missing, why, at once.
Standard library and pynvml only."""
from __future__ import annotations

import json
import os
import sys
import threading
import time

VALUE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}  # nvmlValueType_t


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


def sample(nvml, h) -> dict:
    """One sample: time (the monotonic clock every process of the host shares), power, whether it is
    NVML's 1 s average, utilization, clocks, temperature, clock-event reasons."""
    watts = instant_power(nvml, h)
    return {"t": time.perf_counter(), "util": nvml.nvmlDeviceGetUtilizationRates(h).gpu,
            "power_w": nvml.nvmlDeviceGetPowerUsage(h) / 1e3 if watts is None else watts, "averaged": watts is None,
            "sm_mhz": nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
            "mem_mhz": nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM),
            "temp_c": nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
            "reasons": nvml.nvmlDeviceGetCurrentClocksEventReasons(h)}


def commands(stream, on: threading.Event, done: threading.Event) -> None:
    """The parent's lines (on stdin): "pause" and "resume" switch the sampling off and on (a cell
    that measures what sampling costs); any other line, or the stream's end, ends it."""
    for line in iter(stream.readline, ""):
        if line.strip() not in ("pause", "resume"):
            break
        (on.clear if line.strip() == "pause" else on.set)()
    done.set()
    on.set()  # a paused loop wakes to end


def sample_until_done(take, samples: list, period: float, on: threading.Event, done: threading.Event,
                      parent: int) -> None:
    """Append take() to `samples` every `period` s while `on`, asleep while paused, until `done` or
    the parent is gone."""
    while not done.is_set() and os.getppid() == parent:  # a run that died unasked: stop with it
        if not on.wait(1.0) or done.is_set():
            continue
        samples.append(take())
        done.wait(period)


def main(device_index: int, period: float) -> dict:
    try:
        import pynvml as nvml
        nvml.nvmlInit()
        h = nvml.nvmlDeviceGetHandleByIndex(device_index)
    except Exception as e:  # no NVIDIA driver
        return {"why": f"NVML unavailable: {e}"}
    print("ready", flush=True)
    on, done = threading.Event(), threading.Event()
    on.set()
    threading.Thread(target=commands, args=(sys.stdin, on, done), daemon=True).start()
    samples = []
    try:
        sample_until_done(lambda: sample(nvml, h), samples, period, on, done, os.getppid())
    except Exception as e:  # a call the GPU refuses, a GPU lost: the samples so far, and why they end
        return {"samples": samples, "why": f"NVML sampling stopped: {e}"}
    finally:
        nvml.nvmlShutdown()
    return {"samples": samples}


if __name__ == "__main__":
    result = json.dumps(main(int(sys.argv[1]), float(sys.argv[2])))
    try:
        print(result)
    except BrokenPipeError:  # the run ended without asking for them (a cell that failed before its window)
        pass
