"""What a workload is: a model, its data, its loss, its sizes per preset, the knobs it accepts.

A workload file subclasses VisionWorkload or SequenceWorkload, sets a few attributes, writes
`build_model`, and registers itself with `@register`. Everything else (loaders, variants,
measurement) is shared.
"""
from __future__ import annotations

import sys
from typing import Any, ClassVar

import torch
from torch import nn

from workloads.knobs import KNOBS, NEEDS

REGISTRY: dict[str, type["Workload"]] = {}


class WorkloadError(TypeError):
    """A workload file that does not define what a workload needs."""


def register(cls: type["Workload"]) -> type["Workload"]:
    """Class decorator: add a workload to the registry under `cls.name`."""
    module = sys.modules.get(cls.__module__)
    origin = f"{getattr(module, '__file__', None) or cls.__module__}: workload class {cls.__name__}"
    if not (isinstance(cls, type) and issubclass(cls, (VisionWorkload, SequenceWorkload))):
        raise WorkloadError(f"{origin} must subclass VisionWorkload or SequenceWorkload")
    missing = [f"{a} = ..." for a in ("name", "defaults") if not getattr(cls, a, None)]
    if "build_model" not in vars(cls):
        missing.append("def build_model(self)")
    if missing:
        raise WorkloadError(f"{origin} is missing: {', '.join(missing)}")
    if not cls.name.isidentifier():
        raise WorkloadError(f"{origin}: name {cls.name!r} is not a Python identifier (it names folders and "
                            f"config keys: letters, digits and _)")
    for preset in ("cpu", "gpu"):
        if "batch_size" not in cls.defaults.get(preset, {}):
            raise WorkloadError(f"{origin}: defaults['{preset}'] needs a batch_size")
    if cls.name in REGISTRY and REGISTRY[cls.name].__module__ != cls.__module__:
        raise WorkloadError(f"{origin}: the name {cls.name!r} is taken by {REGISTRY[cls.name].__module__}")
    REGISTRY[cls.name] = cls
    return cls


class Workload:
    name: ClassVar[str] = ""
    data: ClassVar[str] = ""          # "images" or "tokens": which generated dataset it reads
    unit: ClassVar[str] = "samples"   # what one batch row is, for throughput
    cnn: ClassVar[bool] = False       # channels_last applies
    attention: ClassVar[bool] = False  # its attention runs through scaled_dot_product_attention (sdpa_backend applies)
    # preset -> sizes and settings: batch_size (required), lr (SGD, momentum 0.9; default 0.01), ...
    defaults: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, params: dict[str, Any]):
        self.params = params

    def build_model(self) -> nn.Module:
        raise NotImplementedError

    def loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(output.flatten(0, -2), target.flatten())

    def units_per_sample(self) -> int:
        """Extra throughput unit per sample (tokens for a sequence model), 1 otherwise."""
        return 1

    def example_batch(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """n random samples shaped like a real batch (for counting FLOPs)."""
        raise NotImplementedError

    @classmethod
    def knob_reason(cls, knob: str, value, cuda: bool) -> str | None:
        """Why a knob value does not apply to this workload (on a machine with or without CUDA),
        or None when it does. Override to add a workload's own limits, calling super()."""
        need = KNOBS[knob].needs
        if need and value != KNOBS[knob].default and not NEEDS[need][0](cls):
            return NEEDS[need][1].format(knob=knob, name=cls.name, data=cls.data)
        return None


class VisionWorkload(Workload):
    """Image classification from a folder of JPEG files (ImageFolder layout).

    params: batch_size, image_size (the RandomResizedCrop side), num_classes (set from the data).
    """
    data = "images"

    def example_batch(self, n):
        s = self.params["image_size"]
        return torch.randn(n, 3, s, s), torch.randint(self.params["num_classes"], (n,))


class SequenceWorkload(Workload):
    """Next-token prediction over a stream of token ids.

    params: batch_size, seq_len, vocab (token ids are < vocab).
    """
    data = "tokens"

    def example_batch(self, n):
        shape = (n, self.params["seq_len"])
        return torch.randint(self.params["vocab"], shape), torch.randint(self.params["vocab"], shape)

    def units_per_sample(self) -> int:
        return int(self.params["seq_len"])
