"""Data parallelism for the `ddp` knob: one process per GPU (NCCL), or per CPU share (gloo),
started by torch.distributed.run, each training a DistributedDataParallel replica on its own
shard of the data. Only rank 0 writes the cell's record; a rank that fails writes its own and
exits non-zero, so the launcher stops the others (they would wait in an all-reduce forever).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

# NVLink SHARP multicast (NVLS) and symmetric-memory multicast need fabric support that
# virtualized multi-GPU hosts often lack; they are off in every process of a DDP cell.
ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}


@dataclass(frozen=True)
class Shard:
    """This process's place: rank of world (world 1: no data parallelism)."""
    rank: int = 0
    world: int = 1


def launcher(processes: int) -> list[str]:
    """The command prefix that runs a Python module (the next argument) as `processes` ranks on
    this host, or as one plain process."""
    if processes <= 1:
        return [sys.executable, "-m"]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}", "-m"]


def init(processes: int, cuda: bool) -> tuple[Shard, torch.device | None]:
    """Join the process group of a DDP cell; (this rank's shard, its device; None: the CPU)."""
    if not processes:
        return Shard(), None
    world = int(os.environ.get("WORLD_SIZE", 0))
    if world != processes:
        raise RuntimeError(f"ddp={processes} needs {processes} processes started by torch.distributed.run "
                           f"(WORLD_SIZE is {world or 'unset'})")
    for k, v in ENV.items():
        os.environ.setdefault(k, v)
    local = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo", device_id=device if cuda else None)
    return Shard(dist.get_rank(), world), device


def wrap(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """DistributedDataParallel with its default gradient buckets (25 MB), gradients as views
    into the buckets (no copy)."""
    from torch.nn.parallel import DistributedDataParallel
    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids, gradient_as_bucket_view=True)


def mean(values: torch.Tensor, shard: Shard) -> torch.Tensor:
    """The mean of a tensor over the ranks (the global loss from each rank's local loss)."""
    if shard.world > 1:
        values = values.clone()
        dist.all_reduce(values)
        values /= shard.world
    return values


def gather(obj, shard: Shard) -> list:
    """Every rank's `obj`, in rank order."""
    if shard.world == 1:
        return [obj]
    out = [None] * shard.world
    dist.all_gather_object(out, obj)
    return out


def finish() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
