"""A cell's first steps, each read on the host: where training goes non-finite, and what
torch.compile and GradScaler did by then. For a cell that fails with a NaN loss: which step, whether
the weights or only the forward went bad, whether the compiled graphs came from inductor's cache."""
from __future__ import annotations

import math
from typing import Iterator

import torch

from workloads import compiled, harness


def largest(tensors) -> tuple[float, int]:
    """(the largest finite |value|, how many tensors hold a non-finite value)."""
    top, bad = 0.0, 0
    for t in tensors:
        t = t.detach().float()
        finite = torch.isfinite(t)
        bad += int(not bool(finite.all()))
        if bool(finite.any()):
            top = max(top, float(t[finite].abs().max()))
    return top, bad


def probe(spec: dict, steps: int) -> Iterator[dict]:
    """Train `steps` steps of the cell, syncing after each; one row per step. Stops after the first
    non-finite loss."""
    t = harness.Trainer(spec)
    aot = torch._dynamo.utils.counters["aot_autograd"]
    for i in range(steps):
        loss = float(t.step(*next(t.batches)))
        weights, bad_weights = largest(t.model.parameters())
        grads, bad_grads = largest(p.grad for p in t.model.parameters() if p.grad is not None)
        hits, misses = compiled.cache_counts()
        yield {"step": i, "loss": loss, "scale": t.scaler.get_scale() if t.scaler.is_enabled() else None,
               "max_weight": weights, "nonfinite_weights": bad_weights, "max_grad": grads,
               "nonfinite_grads": bad_grads, "graphs_loaded": hits, "graphs_compiled": misses,
               "aot_loaded": aot["autograd_cache_hit"], "aot_compiled": aot["autograd_cache_miss"]}
        if not math.isfinite(loss):
            return
