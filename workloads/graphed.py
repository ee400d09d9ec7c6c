"""The step_graph knob: the whole training step (forward, backward and the optimizer's update) captured
once as one CUDA graph on static input buffers, then replayed: each step copies its batch into the
buffers on the GPU and launches the whole step at once, with no per-kernel launch from the host.

The capture follows PyTorch's whole-network recipe (torch.cuda.graphs): a few eager steps on a side
stream create the optimizer's state and compile what torch.compile compiles, the gradients are set
to None so that the captured backward allocates them in the graph's memory pool, and the loss the
graph writes is copied out after each replay.
"""
from __future__ import annotations

import torch

WARMUP = 3  # eager steps on the first batch before the capture (momentum buffers, compiled kernels)


def unsupported(knobs: dict, device: torch.device) -> str | None:
    """Why the whole step cannot be one graph with these knobs, or None."""
    if device.type != "cuda":
        return "step_graph captures a CUDA graph: it needs a CUDA GPU"
    if knobs["precision"] == "amp-fp16":
        return ("step_graph cannot hold AMP fp16: the GradScaler reads its overflow check on the host every "
                "step (take amp-bf16, which needs no scaler)")
    if knobs["compile"] in ("reduce-overhead", "max-autotune"):
        return f"step_graph captures the step itself; compile={knobs['compile']} captures graphs of its own inside it"
    if knobs["ddp"]:
        return "step_graph is not set up for DistributedDataParallel (its all-reduce hooks)"
    return None


class GraphedStep:
    """step(x, y) -> loss, replaying one captured graph of `update(x, y)` (forward, backward, update)."""

    def __init__(self, update, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor):
        self.x, self.y = x.clone(), y.clone()  # the static buffers keep the loader's layout (channels_last too)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                optimizer.zero_grad(set_to_none=True)
                update(self.x, self.y)
        torch.cuda.current_stream().wait_stream(side)
        optimizer.zero_grad(set_to_none=True)  # the captured backward allocates the gradients in the graph's pool
        self.graph = torch.cuda.CUDAGraph()
        # thread_local: the loader's threads (DALI's, the pin-memory thread) keep calling CUDA meanwhile
        with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self.loss = update(self.x, self.y)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.x.copy_(x, non_blocking=True)
        self.y.copy_(y, non_blocking=True)
        self.graph.replay()
        return self.loss.clone()  # the next replay overwrites the graph's loss
