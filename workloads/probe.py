"""A cell's first steps, each read on the host: where training goes non-finite, and what
torch.compile and GradScaler did by then. For a cell that fails with a NaN loss: which step, whether
the weights or only the forward went bad, whether the compiled graphs came from inductor's cache."""
from __future__ import annotations

import math
from typing import Iterator

import torch

from workloads import compiled
from workloads.trainer import Trainer


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


def first_nonfinite_module(model: torch.nn.Module, run) -> str | None:
    """The first module (in call order) whose output holds a non-finite value while `run()` runs."""
    found: list[str] = []

    def hook(name):
        def check(module, args, out):
            outs = out if isinstance(out, (tuple, list)) else (out,)
            if not found and any(torch.is_tensor(o) and not bool(torch.isfinite(o).all()) for o in outs):
                found.append(name or type(module).__name__)
        return check
    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules()]
    try:
        run()
    finally:
        for h in handles:
            h.remove()
    return found[0] if found else None


def recheck(t: Trainer, x: torch.Tensor, y: torch.Tensor) -> dict:
    """The forward of a batch whose loss came out non-finite, again with the same weights (GradScaler
    skipped the update): through the cell's forward (compiled or not) and eager, module by module.
    A finite eager loss puts the fault in the compiled code; a finite second try, in something that
    changes between runs (a race, memory read before it was written)."""
    with t.precision():
        again = float(t.workload.loss(t.forward(x), y).detach())  # with grad: the training graph, not an inference one
    with torch.no_grad(), t.precision():
        eager = []
        where = first_nonfinite_module(t.model, lambda: eager.append(float(t.workload.loss(t.model(x), y))))
    return {"loss_again": again, "eager_loss": eager[0], "eager_first_nonfinite": where}


def probe(spec: dict, steps: int) -> Iterator[dict]:
    """Train `steps` steps of the cell, syncing after each; one row per step. Stops after the first
    non-finite loss, whose row also holds its `recheck`."""
    t = Trainer(spec)
    start = graph_counts()  # the counters are the process's: count this cell's from here
    for i in range(steps):
        x, y = next(t.batches)
        loss = float(t.step(x, y))
        weights, bad_weights = largest(t.model.parameters())
        grads, bad_grads = largest(p.grad for p in t.model.parameters() if p.grad is not None)
        loaded, built, aot_loaded, aot_built = (now - then for now, then in zip(graph_counts(), start))
        row = {"step": i, "loss": loss, "scale": t.scaler.get_scale() if t.scaler.is_enabled() else None,
               "max_weight": weights, "nonfinite_weights": bad_weights, "max_grad": grads,
               "nonfinite_grads": bad_grads, "graphs_loaded": loaded, "graphs_compiled": built,
               "aot_loaded": aot_loaded, "aot_compiled": aot_built}
        if not math.isfinite(loss):
            yield {**row, "recheck": recheck(t, x, y)}
            return
        yield row
