"""The limits a run is measured against: the model FLOPs of one training step, counted with
torch.utils.flop_counter, and the matrix-multiply peak of this machine per precision and its memory
bandwidth (a large copy), measured here (not datasheet figures), once per set of runs. MFU =
achieved model FLOP/s over that peak."""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from workloads.record import write_json

PRECISIONS = {"fp32": (torch.float32, False), "tf32": (torch.float32, True),
              "amp-fp16": (torch.float16, False), "amp-bf16": (torch.bfloat16, False)}


def rnn_flops(model: torch.nn.Module, x: torch.Tensor) -> float:
    """Forward + backward FLOPs of the nn.LSTM modules, which the counter does not see into:
    per token, layer and direction 4 gates x 2 x hidden x (input + hidden), x3 for training."""
    total = 0.0
    for m in model.modules():
        if isinstance(m, torch.nn.LSTM):
            dirs, h = 2 if m.bidirectional else 1, m.hidden_size
            for layer in range(m.num_layers):
                inp = m.input_size if layer == 0 else h * dirs
                total += 3 * dirs * 4 * 2 * h * (inp + h)
    return total * x.numel()  # one token per element of the id tensor


def flops_per_step(workload) -> float:
    """Forward + backward FLOPs of one batch: counted on a 2-sample CPU batch, scaled to the batch
    size (every op of these models is linear in the batch)."""
    model = workload.build_model()
    x, y = workload.example_batch(2)
    with FlopCounterMode(display=False) as counter:
        workload.loss(model(x), y).backward()
    return (counter.get_total_flops() + rnn_flops(model, x)) / 2 * workload.params["batch_size"]


def _rates(op, work: float, device: torch.device, repeats: int, seconds: float, batch: int = 1) -> list[float]:
    """`work` per second of `op`, once per repeat: each repeat runs `op` back to back (`batch` calls
    between syncs) for `seconds` or more, so a launch or a thread's wake-up is a sliver of it."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()  # the caller's warm-up ends before the first repeat starts
    out = []
    for _ in range(repeats):
        calls, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(batch):
                op()
            calls += batch
            sync()
        out.append(work * calls / (time.perf_counter() - t0))
    return out


def matmul_peak(precision: str, device: torch.device, repeats: int = 7, seconds: float = 0.3) -> list[float]:
    """TFLOP/s of a large square matmul in this precision (fp32 means TF32 off), once per repeat.
    The best repeat is the peak: other work on the machine only slows one."""
    dtype, tf32 = PRECISIONS[precision]
    n = 8192 if device.type == "cuda" else 1024
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    for _ in range(3):
        a @ b
    out = _rates(lambda: a @ b, 2 * n**3 / 1e12, device, repeats, seconds, 10 if device.type == "cuda" else 1)
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def copy_bandwidth(device: torch.device, repeats: int = 7, seconds: float = 0.3) -> list[float]:
    """GB/s of one large buffer copied on the device, each byte read once and written once, per
    repeat; the best repeat is the memory bandwidth a kernel can reach."""
    n = (1 << 28) if device.type == "cuda" else (1 << 24)  # float32: 1 GiB on a GPU, 64 MiB on a CPU
    src, dst = torch.randn(n, device=device), torch.empty(n, device=device)
    dst.copy_(src)
    return _rates(lambda: dst.copy_(src), 2 * src.nbytes / 1e9, device, repeats, seconds)


def today() -> str:
    return time.strftime("%Y-%m-%d")  # local, as the runs' `started`


def run_set(fingerprint: dict, device: torch.device) -> dict:
    """What a set of runs shares: the machine's environment as every run records it (GPU, CPU,
    host, versions, commit), the device, and the day."""
    return {"env": fingerprint, "device": str(device), "day": today()}


def _same(entry: dict, key: dict) -> bool:
    return all(json.dumps(entry.get(k), sort_keys=True) == json.dumps(v, sort_keys=True) for k, v in key.items())


def peaks(device: torch.device, fingerprint: dict, cache: Path | None = None) -> dict:
    """The matmul peak per precision and the copy bandwidth of this set of runs: taken from `cache`
    (a JSON list of the peaks measured on this machine, one entry per set of runs) where this set
    measured them, else measured now and added there. Every table of one set divides by one peak."""
    precisions = list(PRECISIONS) if device.type == "cuda" else ["fp32"]
    entries = json.loads(cache.read_text()) if cache and cache.is_file() else []
    key = run_set(fingerprint, device)
    entry = next((e for e in entries if _same(e, key)), None)
    if entry is None:
        entry = {**key, "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "peak_tflops": {}, "repeats": {}}
        entries.append(entry)
    missing = [p for p in precisions if p not in entry["peak_tflops"]]
    for p in missing:
        entry["repeats"][p] = matmul_peak(p, device)
        entry["peak_tflops"][p] = max(entry["repeats"][p])
    copied = "bandwidth_gbps" not in entry  # an entry made before the bandwidth was measured gets it now
    if copied:  # the repeats' key `copy`: a peak measured by a copy, not a matmul
        entry["repeats"]["copy"] = copy_bandwidth(device)
        entry["bandwidth_gbps"] = max(entry["repeats"]["copy"])
        entry["bandwidth_measured"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if cache and (missing or copied):
        write_json(cache, entries)
    return {"peak_tflops": {p: entry["peak_tflops"][p] for p in precisions}, "bandwidth_gbps": entry["bandwidth_gbps"],
            "peak": {"measured": entry["measured"], "reused": not missing, "bandwidth_measured": entry["bandwidth_measured"],
                     "repeats": {p: entry["repeats"][p] for p in [*precisions, "copy"]}}}


def measure(workloads: dict, device: torch.device, fingerprint: dict, cache: Path | None = None) -> dict:
    """{'peak_tflops': {precision: value}, 'bandwidth_gbps', 'peak': how they were measured, 'flops_per_sample':
    {workload: value}}; `workloads` maps a name to the workload object the cells use. The FLOPs
    are counted every time (deterministic), the peaks once per set of runs (peaks())."""
    return {"device": str(device), **peaks(device, fingerprint, cache),
            "flops_per_sample": {name: flops_per_step(w) / w.params["batch_size"] for name, w in workloads.items()}}
