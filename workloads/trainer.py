"""A cell's knobs applied: the workload's model, optimizer, GradScaler, input pipeline, torch.compile,
channels_last and precision, in a Trainer that takes one step at a time."""
from __future__ import annotations

import itertools
import math
import os
import time
from contextlib import ExitStack, nullcontext
from pathlib import Path

import numpy as np
import torch
import torch._dynamo
from torch import nn

import workloads
from workloads import compiled, ddp, env, graphed, loaders
from workloads.data import check_dataset

AUTOCAST = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}
SDPA = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION", "math": "MATH"}
WARMUP_CAP = 4  # a warm-up that keeps compiling stops at this many times warmup_steps
READY_S = 0.1  # a batch already queued arrives within this; one that takes longer was not ready


class NonFiniteLoss(RuntimeError):
    pass


def attention_kernels(backend: str):
    """The sdpa_backend knob: scaled_dot_product_attention restricted to one kernel family, or
    PyTorch's own choice ("auto")."""
    if backend == "auto":
        return nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel(getattr(SDPBackend, SDPA[backend]))


def set_backends(knobs: dict) -> None:
    """Global switches: TF32 for matmul and convolutions, cuDNN autotuning."""
    tf32 = knobs["precision"] == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = knobs["cudnn_benchmark"]


def warmup_limit(spec: dict) -> int:
    """The most steps a warm-up takes (protocol.warm_up); the loader is sized for it."""
    return WARMUP_CAP * spec["warmup_steps"]


def prefetch_depth(knobs: dict) -> int:
    """Batches the input pipeline holds ready ahead of the training loop."""
    if knobs["loader"] == "dali":
        return loaders.DALI_QUEUE_DEPTH
    return knobs["num_workers"] * knobs["prefetch_factor"] if knobs["num_workers"] else 0


def drain(batches, depth: int, ready_s: float = READY_S) -> int:
    """Take the batches a pipeline queued during warm-up, so the measured steps see its steady state:
    at most `depth`, ending at the first batch that was not ready (the queue is empty). Returns how many."""
    for k in range(depth):
        t0 = time.perf_counter()
        next(batches)
        if time.perf_counter() - t0 > ready_s:
            return k + 1
    return depth


def input_batches(workload, spec: dict, device: torch.device, shard: ddp.Shard = ddp.Shard()):
    """The variant's input pipeline: (its loader, an iterator of (x, y) batches on `device`),
    reading this rank's shard of the data."""
    knobs, p = spec["knobs"], workload.params
    steps = warmup_limit(spec) + spec["measured_steps"] + prefetch_depth(knobs) + 1
    prepare = (lambda x: x.contiguous(memory_format=torch.channels_last)) if knobs["channels_last"] else (lambda x: x)
    if knobs["loader"] == "dali":
        source = batches = loaders.dali_loader(spec["data"], p["batch_size"], p["image_size"], knobs, device,
                                               spec["seed"], shard)
        if device.type == "cuda":
            return source, batches
    else:
        if workload.data == "images":
            from torchvision import datasets
            dataset = datasets.ImageFolder(spec["data"], transform=loaders.image_transform(p["image_size"]),
                                           loader=loaders.load_rgb)
        else:
            dataset = loaders.TokenWindows(spec["data"], p["seq_len"])
        source = loaders.torch_loader(dataset, p["batch_size"], steps, knobs, spec["seed"], shard)
        batches = iter(source)
    if device.type == "cuda" and knobs["copy"] == "async":
        return source, loaders.SideStreamCopy(batches, device, prepare)
    return source, loaders.BlockingCopy(batches, device, prepare)


def data_params(workload_cls, path: str) -> dict:
    """Sizes that come from the dataset: the number of classes, or the vocabulary."""
    check_dataset(path, workload_cls.data)
    if workload_cls.data == "images":
        return {"num_classes": sum(1 for d in Path(path).iterdir() if d.is_dir())}
    return {"vocab": int(np.load(path, mmap_mode="r").max()) + 1}


def workload_of(spec: dict):
    """The cell's workload object, with the sizes its dataset sets (classes, vocabulary)."""
    cls = workloads.get(spec["workload"])
    workload = cls({**spec["params"], **data_params(cls, spec["data"])})
    if cls.data == "tokens":  # the model must cover every token id the data holds
        workload.params["vocab"] = max(spec["params"].get("vocab", 0), workload.params["vocab"])
    return workload


def keep_eager(model: nn.Module, kind: type[nn.Module]) -> int:
    """Leave every `kind` layer out of torch.compile's graphs (a graph break around each: it runs,
    forward and backward, with ATen's kernels); returns how many."""
    layers = [m for m in model.modules() if isinstance(m, kind)]
    for m in layers:
        m.forward = torch.compiler.disable(m.forward)
    return len(layers)


def build(spec: dict, device: torch.device):
    workload = workload_of(spec)
    torch.manual_seed(spec["seed"])
    model = workload.build_model().to(device)
    if spec["knobs"]["channels_last"]:
        model = model.to(memory_format=torch.channels_last)
    return workload, model


def sgd(params, lr: float, fused) -> torch.optim.SGD:
    """SGD with momentum, per the fused_optimizer knob. A fused SGD takes the GradScaler's overflow
    check into its kernel, which still advances the momentum on a step the scaler skips (torch 2.11):
    "guarded" hands the check back to the scaler, which skips the whole update, as for the unfused one."""
    optimizer = torch.optim.SGD(params, lr=lr, momentum=0.9, fused=bool(fused) or None)
    if fused == "guarded":
        optimizer._step_supports_amp_scaling = False
    return optimizer


class Trainer:
    """One cell's model, optimizer and input pipeline, with the variant's knobs applied."""

    def __init__(self, spec: dict, device: torch.device | None = None, mark=None, trains: bool = True,
                 one_batch: bool = False):
        self.spec, self.knobs, self.trains = spec, spec["knobs"], trains  # trains=False: the loader alone
        self.one_batch = one_batch
        self.mark = mark or (lambda name: nullcontext())  # marks a step's phases for a profiler
        self.shard, rank_device = ddp.init(self.knobs["ddp"], env.has_cuda())
        self.device = device or rank_device or torch.device("cuda" if env.has_cuda() else "cpu")
        set_backends(self.knobs)
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self.workload, self.model = build(spec, self.device)
        self.optimizer = self.make_optimizer()
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.knobs["precision"] == "amp-fp16")
        self.dtype = AUTOCAST.get(self.knobs["precision"])
        self.forward = self.make_forward()
        self.graphed = None  # the step_graph knob: the whole step, captured at the first step
        if self.knobs["step_graph"] and trains and (why := graphed.unsupported(self.knobs, self.device)):
            raise ValueError(why)
        self.loader, self.batches = input_batches(self.workload, spec, self.device, self.shard)
        if one_batch:  # the step alone: one batch of the loader's, fed again every step
            self.batches = itertools.repeat(next(self.batches))
        self.pending: list[torch.Tensor] = []
        self.losses: dict[int, float] = {}

    def make_optimizer(self) -> torch.optim.SGD:
        optimizer = sgd(self.model.parameters(), self.workload.params.get("lr", 0.01), self.knobs["fused_optimizer"])
        if self.knobs["compile_optimizer"]:  # GradScaler calls it as before: the update, compiled
            optimizer.step = torch.compile(optimizer.step)
        return optimizer

    def make_forward(self):
        """The model as the step calls it: DDP-wrapped across ranks, compiled per the compile knob."""
        mode = self.knobs["compile"]
        self.compile_cache = None
        if mode:
            torch._dynamo.reset()
            torch._dynamo.utils.counters.clear()
            self.compile_cache = compiled.use_cache_for(self.spec)
        if mode and self.knobs["eager_pooling"]:
            keep_eager(self.model, nn.MaxPool2d)
        replica = ddp.wrap(self.model, self.device) if self.shard.world > 1 else self.model
        return torch.compile(replica, mode=mode) if mode else replica

    def precision(self, cache: bool = True) -> ExitStack:
        """The forward's context: the variant's autocast and attention kernels (cache: autocast's
        cast cache, which a captured graph must not keep)."""
        stack = ExitStack()
        if self.dtype:
            stack.enter_context(torch.autocast(self.device.type, dtype=self.dtype, cache_enabled=cache))
        stack.enter_context(attention_kernels(self.knobs["sdpa_backend"]))
        return stack

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """One optimization step under the variant's precision; returns the loss (on the device)."""
        if self.knobs["step_graph"]:
            if self.graphed is None:
                self.graphed = graphed.GraphedStep(self.update, self.optimizer, x, y)
            with self.mark("forward"):  # one launch: forward, backward and update show as the forward
                return self.graphed(x, y)
        with self.mark("forward"), self.precision():
            out = self.forward(x)
            if self.compile_cache:
                compiled.check_output_dtype(out, self.dtype)
            loss = self.workload.loss(out, y)
        with self.mark("backward"):
            self.optimizer.zero_grad(set_to_none=True)
            self.scaler.scale(loss).backward()
        with self.mark("optimizer"):
            self.scaler.step(self.optimizer)
            self.scaler.update()
        return loss.detach()

    def update(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The step as a CUDA graph captures it: no GradScaler, no host read, autocast's cast cache off
        (a cached cast would outlive the capture); the gradients are zeroed by the caller."""
        with self.precision(cache=False):
            loss = self.workload.loss(self.forward(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def sync_losses(self, i: int) -> None:
        """Read the pending losses on the host (a GPU sync; with DDP, their mean over the ranks)
        and check they are finite."""
        local = torch.stack(self.pending).float()
        values = ddp.mean(local, self.shard).tolist()
        if self.shard.world > 1:
            self.last_local_loss = float(local[-1])
        first = i - len(values) + 1
        for k, v in enumerate(values):
            if not math.isfinite(v):
                before = [self.losses[j] for j in sorted(self.losses)[-4:]] + values[:k]
                trend = f" (losses before: {', '.join(f'{x:.3g}' for x in before[-4:])})" if before else ""
                raise NonFiniteLoss(f"loss is {v} at step {first + k}{trend}")
        self.losses.update(zip(range(first, i + 1), values))
        self.pending.clear()

    def timed_step(self, i: int, last: bool) -> dict:
        """Step i; the loss is read (a sync) every sync_every steps and at the last step."""
        t0 = time.perf_counter()
        with self.mark("input"):
            x, y = next(self.batches)
        t1 = time.perf_counter()
        loader_s = getattr(self.batches, "loader_s", None)  # of input_s, the loader's part (the rest: the copy)
        if not self.trains:  # the loader alone: the batch has reached the device, nothing more
            self.synchronize()
        else:
            self.pending.append(self.step(x, y))
            if (i + 1) % self.knobs["sync_every"] == 0 or last:
                with self.mark("sync"):
                    self.sync_losses(i)
        return {"step": i, "input_s": t1 - t0, "wall_s": time.perf_counter() - t0,
                **({} if loader_s is None else {"loader_s": loader_s})}

    def drain(self) -> int:
        return 0 if self.one_batch else drain(self.batches, prefetch_depth(self.knobs))

    def check_compiled(self) -> None:
        """A compile variant whose model ran eager (dynamo captured nothing) must not pass as one."""
        if self.knobs["compile"] and self.trains and not torch._dynamo.utils.counters["stats"]["unique_graphs"]:
            raise RuntimeError("torch.compile captured no graph: the model ran eager")

    def compile_metrics(self) -> list[dict]:
        """Graphs torch.compile captured, loaded from inductor's cache and compiled; for the CUDA-graph
        modes, the graphs that fell back to plain launches (cudagraph_skips)."""
        if not self.knobs["compile"] or not self.trains:
            return []
        counters = torch._dynamo.utils.counters
        hits, misses = compiled.cache_counts()
        rows = [("compiled_graphs", counters["stats"]["unique_graphs"], "graphs"),
                ("compile_cache_hits", hits, "graphs"), ("compile_cache_misses", misses, "graphs")]
        if self.knobs["compile"] in ("reduce-overhead", "max-autotune"):
            rows.append(("cudagraph_skips", counters["inductor"]["cudagraph_skips"], "graphs"))
        return [{"metric": m, "value": float(v), "unit": u} for m, v, u in rows]

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def ranks(self) -> list[dict]:
        """Each rank's view at the end: its own last loss (its shard of the data) and a checksum
        of its weights (DDP keeps the replicas identical)."""
        with torch.no_grad():
            weights = sum(float(p.double().sum()) for p in self.model.parameters())
        mine = {"rank": self.shard.rank, "pid": os.getpid(), "device": str(self.device),
                "last_local_loss": getattr(self, "last_local_loss", None), "weight_sum": weights}
        return ddp.gather(mine, self.shard)
