"""The knobs: every setting a variant can change, each declared once here.

The config's schema for knobs, the baseline's values, the values that need CUDA, the workloads a
knob acts on, when it can act at all, and the knobs that key torch.compile's cache all come from
this table. A knob takes effect where the harness or the loaders read it, as spec["knobs"][name].
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Collection


def _always(knobs: dict, cuda: bool) -> bool:
    return True


@dataclass(frozen=True)
class Knob:
    default: Any                  # the baseline's value: the naive, slowest setting
    allowed: dict                 # its values, as a JSON-schema fragment
    meaning: str                  # one line
    cuda: Collection | bool = ()  # the values that need a CUDA device (True: all of them)
    traced: bool = True           # can change the graph torch.compile traces: part of the compile-cache key
    needs: str = ""               # what a workload must have for the knob to act: a key of NEEDS
    acts: Callable[[dict, bool], bool] = _always  # can it act, given a variant's knobs and CUDA or not
    side: str = "step"            # what it speeds up: "input" (the loader and the copy) or "step" (the GPU's work)

    def needs_cuda(self, value) -> bool:
        return self.cuda is True or value in self.cuda


# A knob's `needs` -> (does a workload class have it, why a cell is skipped when it does not).
NEEDS: dict[str, tuple[Callable[[type], bool], str]] = {
    "cnn": (lambda w: w.cnn, "{knob} applies to CNNs; {name} is not one"),
    "max_pooling": (lambda w: w.cnn, "{knob} applies to CNNs' max-pooling; {name} has none"),  # the CNNs have it
    "attention": (lambda w: w.attention, "{knob} applies to models with attention; {name} has none"),
    "images": (lambda w: w.data == "images", "DALI decodes images; {name} reads {data}"),
    "tokens": (lambda w: w.data == "tokens", "{knob} applies to sequence models; {name} reads {data}"),
}

BOOL = {"type": "boolean"}


def _torch_workers(knobs: dict, cuda: bool) -> bool:
    return knobs["num_workers"] > 0 and knobs["loader"] != "dali"


def _host_batches(knobs: dict, cuda: bool) -> bool:
    return not (knobs["loader"] == "dali" and cuda)


def _dali_gpu(knobs: dict, cuda: bool) -> bool:
    return knobs["loader"] == "dali" and cuda


# why a knob of each `acts` rule cannot act where the rule says so (the matrix's skip reasons say it)
INERT = {_torch_workers: "only the DataLoader's worker processes have it",
         _host_batches: "DALI on a GPU hands over batches already there: no host batch to pin or copy",
         _dali_gpu: 'only DALI\'s GPU ("mixed") JPEG decoder has it'}


KNOBS: dict[str, Knob] = {
    "precision": Knob("fp32", {"enum": ["fp32", "tf32", "amp-fp16", "amp-bf16"]},
                      "fp32 (TF32 off) | tf32 | amp-fp16 (with GradScaler) | amp-bf16",
                      cuda={"tf32"}),
    "channels_last": Knob(False, BOOL, "NHWC memory format for model and input",
                          needs="cnn"),
    "loader": Knob("torch", {"enum": ["torch", "dali"]}, "torch (DataLoader) | dali (GPU JPEG decode)",
                   traced=False, needs="images", side="input"),
    "num_workers": Knob(0, {"type": "integer", "minimum": 0},
                        "DataLoader worker processes (DALI: its CPU threads, at least 1)",
                        traced=False, side="input"),
    "pin_memory": Knob(False, BOOL, "page-locked host batches",
                       cuda={True}, traced=False, acts=_host_batches, side="input"),
    "prefetch_factor": Knob(2, {"type": "integer", "minimum": 1}, "batches each worker loads ahead",
                            traced=False, acts=_torch_workers, side="input"),
    "persistent_workers": Knob(False, BOOL, "keep workers alive across epochs",
                               traced=False, acts=_torch_workers, side="input"),
    "copy": Knob("blocking", {"enum": ["blocking", "async"]},
                 "blocking | async: non_blocking copy on a side stream, one batch ahead",
                 cuda={"async"}, traced=False, acts=_host_batches, side="input"),
    "compile": Knob(False, {"oneOf": [{"const": False}, {"enum": ["default", "reduce-overhead", "max-autotune",
                                                                  "max-autotune-no-cudagraphs"]}]},
                    "false | a torch.compile mode",
                    cuda={"reduce-overhead", "max-autotune"}),  # these two modes capture CUDA graphs
    "sync_every": Knob(1, {"type": "integer", "minimum": 1}, "read the loss on the host (a GPU sync) every N steps",
                       traced=False),
    "cudnn_benchmark": Knob(False, BOOL, "cuDNN times its algorithms and keeps the fastest",
                            cuda={True}),
    "fused_optimizer": Knob(False, {"enum": [False, True, "guarded"]},
                            "SGD as one fused kernel per parameter group (SGD(fused=True)) | guarded: the same "
                            "kernel, with the GradScaler skipping an overflow step itself, as for the unfused update"),
    "compile_optimizer": Knob(False, BOOL, "torch.compile the optimizer's step too: the update in a few fused kernels"),
    "step_graph": Knob(False, BOOL, "the whole step (forward, backward, update) captured once as one CUDA graph, "
                       "replayed on static input buffers the loader's batches are copied into",
                       cuda={True}, traced=False),  # the graph captures the compiled model as it is
    "eager_pooling": Knob(False, BOOL, "with compile: max-pooling runs eagerly (ATen's kernels), the rest compiled",
                          needs="max_pooling", acts=lambda knobs, cuda: bool(knobs["compile"])),
    "dali_hw_decoder_load": Knob(0.65, {"type": "number", "minimum": 0, "maximum": 1},
                                 "share of the JPEGs DALI's GPU decoder gives the hardware JPEG engines (0.65: DALI's)",
                                 cuda=True, traced=False, needs="images", acts=_dali_gpu, side="input"),
    "dali_jpeg_buffers": Knob(False, BOOL, "DALI's nvJPEG buffers sized once, for any full-size ImageNet JPEG",
                              cuda=True, traced=False, needs="images", acts=_dali_gpu, side="input"),
    "ddp": Knob(0, {"type": "integer", "minimum": 0, "not": {"const": 1}},
                "0: one process; N (2 or more): N processes, one per GPU, with DistributedDataParallel"),
    "sdpa_backend": Knob("auto", {"enum": ["auto", "flash", "efficient", "cudnn", "math"]},
                         "attention kernels: auto (PyTorch picks) | flash | efficient | cudnn | math",
                         cuda={"efficient", "cudnn"}, needs="attention"),  # a CPU has flash and math only
    # sizes: the compile-cache key holds them through the cell's params
    "batch_size": Knob(0, {"type": "integer", "minimum": 0}, "samples per step; 0: the workload's own in the preset",
                       traced=False),
    "seq_len": Knob(0, {"type": "integer", "minimum": 0}, "tokens per sequence; 0: the workload's own in the preset",
                    traced=False, needs="tokens"),
    "batch_scale": Knob(1, {"type": "integer", "minimum": 1},
                        "the workload's batch size times this (the learning rate stays the workload's)"),
}


def defaults() -> dict:
    """Every knob at its default: the baseline."""
    return {name: knob.default for name, knob in KNOBS.items()}
