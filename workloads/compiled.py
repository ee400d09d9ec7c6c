"""torch.compile's on-disk caches, kept apart per cell configuration, and a check that a compiled
model ran the precision its cell asked for.

Inductor's cache key does not hold all the state that acts while a graph is traced (PyTorch 2.11
keys autocast's on/off but not its dtype: pytorch/pytorch#181564), so a cell could load a graph
compiled for another precision or attention backend. Each combination of the knobs that can change
what is traced (the knob table's `traced`) gets its own cache folder; cells that differ only in the
input pipeline or the host's syncing share compiled graphs.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch

from workloads.knobs import KNOBS

# Knobs that act outside the traced model (the knob table's traced=False); any other knob a spec
# carries, even one the table no longer has, is in the key.
RUNTIME_KNOBS = frozenset(name for name, knob in KNOBS.items() if not knob.traced)
REDUCED = (torch.float16, torch.bfloat16)
CACHE_ENV = "TRAINPERF_COMPILE_CACHE"  # the folder that holds the per-cell cache folders
_STARTED_WITH = os.environ.get("TORCHINDUCTOR_CACHE_DIR")  # before this module points it elsewhere


def cache_key(spec: dict) -> str:
    """The cell's workload and its knobs that can change a traced graph, as a folder name."""
    # the spec's own knobs, not the table's: an older spec lacks the knobs added since, and keeps its key
    traced = {k: v for k, v in sorted(spec["knobs"].items()) if k not in RUNTIME_KNOBS}
    digest = hashlib.sha256(json.dumps([spec["workload"], spec.get("params"), traced],
                                       sort_keys=True, default=str).encode()).hexdigest()
    return f"{spec['workload']}-{digest[:12]}"


def use_cache_for(spec: dict) -> str:
    """Point inductor's caches at this cell's folder and forget what it holds in memory; the key.
    The folders sit in $TRAINPERF_COMPILE_CACHE, else in the TORCHINDUCTOR_CACHE_DIR the process
    started with, else in inductor's default folder."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    base = os.environ.get(CACHE_ENV) or _STARTED_WITH or default_cache_dir()
    key = cache_key(spec)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(base) / key)
    from torch._inductor.utils import clear_caches
    clear_caches()
    return key


def cache_counts() -> tuple[int, int]:
    """This process's compiled graphs since dynamo's counters were last cleared: (loaded from
    inductor's cache, compiled)."""
    c = torch._dynamo.utils.counters["inductor"]
    return c["fxgraph_cache_hit"], c["fxgraph_cache_miss"]


def graphs_built() -> int:
    """Graphs this process has captured, compiled or loaded so far (a count that grows while
    torch.compile is still at work)."""
    c = torch._dynamo.utils.counters
    return c["stats"]["unique_graphs"] + sum(cache_counts()) + c["inductor"]["fxgraph_cache_bypass"]


def check_output_dtype(out, dtype: torch.dtype | None) -> None:
    """Under autocast a model's floating-point output is in autocast's dtype or in float32; in the
    other 16-bit type it ran a graph made for another precision."""
    if dtype is None or not isinstance(out, torch.Tensor):
        return
    if out.dtype in REDUCED and out.dtype != dtype:
        raise RuntimeError(f"the compiled model computed in {out.dtype} under autocast to {dtype}: "
                           "torch.compile served a graph compiled for another precision")
