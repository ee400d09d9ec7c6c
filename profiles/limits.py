"""The limits a run is measured against: the model FLOPs of one training step, counted with
torch.utils.flop_counter, and the matrix-multiply peak of this machine per precision, measured
here (not a datasheet figure). MFU = achieved model FLOP/s over that peak."""
from __future__ import annotations

import time

import torch
from torch.utils.flop_counter import FlopCounterMode

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


def matmul_peak(precision: str, device: torch.device, seconds: float = 1.0) -> float:
    """TFLOP/s of a large square matmul in this precision (fp32 means TF32 off)."""
    dtype, tf32 = PRECISIONS[precision]
    n = 8192 if device.type == "cuda" else 1024
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(3):
        a @ b
    sync()
    iters, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            a @ b
        sync()
        iters += 10
    torch.backends.cuda.matmul.allow_tf32 = False
    return 2 * n**3 * iters / (time.perf_counter() - t0) / 1e12


def measure(workloads: dict, device: torch.device) -> dict:
    """{'peak_tflops': {precision: value}, 'flops_per_sample': {workload: value}}; `workloads` maps
    a name to the workload object the cells use."""
    precisions = list(PRECISIONS) if device.type == "cuda" else ["fp32"]
    return {"device": str(device), "peak_tflops": {p: matmul_peak(p, device) for p in precisions},
            "flops_per_sample": {name: flops_per_step(w) / w.params["batch_size"] for name, w in workloads.items()}}
