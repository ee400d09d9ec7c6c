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


def graph_counts() -> tuple[int, int, int, int]:
    """This process's compiled graphs so far: (loaded, compiled) by inductor, then by AOTAutograd's cache."""
    aot = torch._dynamo.utils.counters["aot_autograd"]
    return (*compiled.cache_counts(), aot["autograd_cache_hit"], aot["autograd_cache_miss"])


def probe(spec: dict, steps: int) -> Iterator[dict]:
    """Train `steps` steps of the cell, syncing after each; one row per step. Stops after the first
    non-finite loss."""
    t = harness.Trainer(spec)
    start = graph_counts()  # the counters are the process's: count this cell's from here
    for i in range(steps):
        loss = float(t.step(*next(t.batches)))
        weights, bad_weights = largest(t.model.parameters())
        grads, bad_grads = largest(p.grad for p in t.model.parameters() if p.grad is not None)
        loaded, built, aot_loaded, aot_built = (now - then for now, then in zip(graph_counts(), start))
        yield {"step": i, "loss": loss, "scale": t.scaler.get_scale() if t.scaler.is_enabled() else None,
               "max_weight": weights, "nonfinite_weights": bad_weights, "max_grad": grads,
               "nonfinite_grads": bad_grads, "graphs_loaded": loaded, "graphs_compiled": built,
               "aot_loaded": aot_loaded, "aot_compiled": aot_built}
        if not math.isfinite(loss):
            return
