"""Input pipelines: torch DataLoader (images or tokens), DALI (images), and the host-to-device copy.

Every loader yields (input, target) batches forever (the sampler draws as many as the run needs,
so no epoch boundary falls inside the measurement).
"""
from __future__ import annotations

import time
from typing import Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
DALI_QUEUE_DEPTH = 2  # batches a DALI pipeline prepares ahead
# nvJPEG's buffers (bytes) sized for any full-size ImageNet JPEG, so the GPU decoder never
# reallocates them (the values of NVIDIA's ResNet-50 DALI pipelines); DALI's defaults: 16 MB, 8 MB
NVJPEG_BUFFERS = {"device_memory_padding": 211_025_920, "host_memory_padding": 140_544_512}


def image_transform(size: int):
    """The ImageNet training transform: RandomResizedCrop, flip, to float, normalize."""
    from torchvision.transforms import v2
    return v2.Compose([v2.RandomResizedCrop(size, antialias=True), v2.RandomHorizontalFlip(),
                       v2.PILToTensor(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])


def load_rgb(path: str):
    """Decode one image file; a file that does not decode fails the run with its name."""
    from PIL import Image
    try:
        with Image.open(path) as img:
            return img.convert("RGB")
    except OSError as e:
        raise ValueError(f"corrupt image {path}: {e}") from e


class TokenWindows(Dataset):
    """Non-overlapping windows of seq_len + 1 tokens from a .npy stream: (input, next tokens)."""

    def __init__(self, path, seq_len: int):
        self.tokens = np.load(path, mmap_mode="r")
        self.seq_len = seq_len

    def __len__(self):
        return (len(self.tokens) - 1) // self.seq_len

    def __getitem__(self, i):
        w = torch.from_numpy(np.array(self.tokens[i * self.seq_len: (i + 1) * self.seq_len + 1], dtype=np.int64))
        return w[:-1], w[1:]


def torch_loader(dataset: Dataset, batch_size: int, batches: int, knobs: dict, seed: int,
                 shard=None) -> DataLoader:
    """A DataLoader with the variant's worker, pinning and prefetch knobs, drawing `batches` batches.
    With data parallelism (`shard`: rank of world) the ranks draw disjoint slices of one random
    order, as DistributedSampler does, for as many epochs as the run needs."""
    workers, rank, world = knobs["num_workers"], getattr(shard, "rank", 0), getattr(shard, "world", 1)
    sampler = RandomSampler(dataset, num_samples=batch_size * batches * world,
                            generator=torch.Generator().manual_seed(seed))
    if world > 1:
        sampler = list(sampler)[rank::world]
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True,
                      num_workers=workers, pin_memory=knobs["pin_memory"],
                      prefetch_factor=knobs["prefetch_factor"] if workers else None,
                      persistent_workers=knobs["persistent_workers"] and workers > 0)


def dali_loader(root, batch_size: int, size: int, knobs: dict, device: torch.device, seed: int,
                shard=None) -> Iterator:
    """A DALI pipeline over a JPEG folder: decode + random crop (on the GPU with device="mixed"
    when CUDA is used, on the CPU otherwise), resize, flip, normalize. NHWC when channels_last.
    With data parallelism (`shard`) each rank's reader reads its own shard of the files."""
    rank, world = getattr(shard, "rank", 0), getattr(shard, "world", 1)
    try:  # decided where the cell runs (a cluster's login node may lack DALI, its GPU nodes not)
        from nvidia.dali import fn, pipeline_def, types
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
    except ImportError as e:
        raise RuntimeError(f"DALI is not installed where this cell ran (pip install -e '.[dali]'): {e}") from None

    cuda = device.type == "cuda"

    @pipeline_def
    def pipe():
        jpegs, labels = fn.readers.file(file_root=str(root), random_shuffle=True, name="Reader", seed=seed,
                                        shard_id=rank, num_shards=world)
        gpu = {"hw_decoder_load": knobs["dali_hw_decoder_load"]} if cuda else {}
        if cuda and knobs["dali_jpeg_buffers"]:
            gpu.update(NVJPEG_BUFFERS)  # the GPU decoder's settings: its JPEG engines' share, nvJPEG's buffers
        images = fn.decoders.image_random_crop(jpegs, device="mixed" if cuda else "cpu",
                                               output_type=types.RGB, seed=seed, **gpu)
        images = fn.resize(images, resize_x=size, resize_y=size)
        images = fn.crop_mirror_normalize(
            images, dtype=types.FLOAT, output_layout="HWC" if knobs["channels_last"] else "CHW",
            mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD],
            mirror=fn.random.coin_flip(seed=seed))
        return images, labels.gpu() if cuda else labels

    p = pipe(batch_size=batch_size, num_threads=max(1, knobs["num_workers"]),
             device_id=device.index or 0 if cuda else None, seed=seed,
             prefetch_queue_depth=DALI_QUEUE_DEPTH)
    it = DALIGenericIterator([p], ["x", "y"], reader_name="Reader",
                             last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)

    def batches():
        while True:
            for out in it:
                x, y = out[0]["x"], out[0]["y"].squeeze(-1).long()
                yield (x.permute(0, 3, 1, 2) if knobs["channels_last"] else x), y
    return batches()


class SideStreamCopy:
    """Copy batch k+1 to the GPU on a side stream (non_blocking, from pinned memory) while the
    default stream computes on batch k. The compute stream waits on the copy stream before it
    uses a batch, and record_stream keeps the allocator from reusing the memory too early.
    `loader_s`: how long the last call waited for the loader (the rest of it: the copy's)."""

    def __init__(self, batches: Iterator, device: torch.device, prepare):
        self.batches, self.device, self.prepare = batches, device, prepare
        self.stream = torch.cuda.Stream(device)
        self.next, self.loader_s = None, 0.0
        self._load()

    def _load(self):
        t0 = time.perf_counter()
        x, y = next(self.batches)
        self.loader_s = time.perf_counter() - t0
        with torch.cuda.stream(self.stream):
            self.next = self.prepare(x.to(self.device, non_blocking=True)), y.to(self.device, non_blocking=True)

    def __iter__(self):
        return self

    def __next__(self):
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
        x, y = self.next
        x.record_stream(torch.cuda.current_stream(self.device))
        y.record_stream(torch.cuda.current_stream(self.device))
        self._load()
        return x, y


class BlockingCopy:
    """The naive copy: each batch moved to the device when the step asks for it (from pageable
    memory the copy also waits for the GPU's queued work). `loader_s` as in SideStreamCopy."""

    def __init__(self, batches: Iterator, device: torch.device, prepare):
        self.batches, self.device, self.prepare, self.loader_s = batches, device, prepare, 0.0

    def __iter__(self):
        return self

    def __next__(self):
        t0 = time.perf_counter()
        x, y = next(self.batches)
        self.loader_s = time.perf_counter() - t0
        return self.prepare(x.to(self.device)), y.to(self.device)
