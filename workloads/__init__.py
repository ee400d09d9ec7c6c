"""The registry of workloads: every module in this folder that registers one is found by name."""
from __future__ import annotations

import importlib
import pkgutil

from workloads.base import REGISTRY, Workload, WorkloadError

_SHARED = {"base", "cli", "config", "data", "harness", "matrix", "variants", "loaders"}


def _discover() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.name not in _SHARED and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


def names() -> list[str]:
    _discover()
    return sorted(REGISTRY)


def get(name: str) -> type[Workload]:
    _discover()
    if name not in REGISTRY:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


__all__ = ["Workload", "WorkloadError", "get", "names"]
