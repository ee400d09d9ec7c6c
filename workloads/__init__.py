"""The registry of workloads: every file in this folder that registers one is found by name.

A workload file that cannot be loaded (a syntax error, a missing piece, no @register) stops
discovery with one error that names the file and what is missing.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from workloads.base import REGISTRY, Workload, WorkloadError

HERE = Path(__file__).resolve().parent


def load_file(path: str | Path) -> list[str]:
    """Import one workload file; return the names it registered."""
    path = Path(path).resolve()
    module = f"workloads.{path.stem}" if path.parent == HERE else f"workloads_user_{path.stem}"
    before = set(REGISTRY)
    try:
        if module in sys.modules:  # imported already (by discovery or a plain import)
            return [n for n, c in REGISTRY.items() if c.__module__ == module]
        spec = importlib.util.spec_from_file_location(module, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[module] = mod
        spec.loader.exec_module(mod)
    except WorkloadError:
        sys.modules.pop(module, None)
        raise
    except Exception as e:
        sys.modules.pop(module, None)
        raise WorkloadError(f"{path}: cannot be imported: {type(e).__name__}: {e}") from e
    added = sorted(set(REGISTRY) - before)
    unregistered = [c.__name__ for c in vars(mod).values() if isinstance(c, type) and issubclass(c, Workload)
                    and c.__module__ == module and c.name and c not in REGISTRY.values()]
    if unregistered:
        sys.modules.pop(module, None)
        raise WorkloadError(f"{path}: defines workload {', '.join(unregistered)} but registers none (decorate it "
                            f"with @register)")
    return added


def _discover() -> None:
    """Every module of this folder; those that register a workload are workloads, the rest helpers."""
    for path in sorted(HERE.glob("*.py")):
        if not path.stem.startswith("_"):
            load_file(path)


def names() -> list[str]:
    _discover()
    return sorted(REGISTRY)


def get(name: str) -> type[Workload]:
    _discover()
    if name not in REGISTRY:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


__all__ = ["Workload", "WorkloadError", "get", "load_file", "names"]
