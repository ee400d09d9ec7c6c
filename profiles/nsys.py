"""The 'nsys' observer: Nsight Systems around the measured steps of one cell.

The cell runs as its own process under `nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none
--cuda-graph-trace=node --capture-range=cudaProfilerApi` (node: each kernel of a CUDA graph is
traced, not the graph as one launch, whose kernels would otherwise read as GPU idle time): the
harness opens the capture when the measured steps begin and closes it when they end, and marks each step and phase (input, forward, backward, optimizer,
sync: the loss read) with NVTX ranges. The report is exported to SQLite and `parse()` reads it:
GPU busy share, idle gaps, copy time by direction, kernels per step, top kernels, synchronizing
API calls, the training thread's host time in CUDA calls (and in those that wait for the GPU), time
per phase, and the share of kernel time in NCCL collectives (the all-reduce of a
data-parallel cell). A capture of several processes (the ranks of a data-parallel cell) is read
for one of them: the process of the first measured step (all ranks take the same steps).
"""
from __future__ import annotations

import re
import sqlite3
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from profiles import timeline
from profiles.tools import WrappingObserver

PHASES = ("input", "forward", "backward", "optimizer", "sync")
COPY_KINDS = {1: "h2d", 2: "d2h", 8: "d2d"}
GAP_BINS_US = [0, 10, 100, 1_000, 10_000, float("inf")]
GAP_LABELS = ["<10us", "10-100us", "0.1-1ms", "1-10ms", ">=10ms"]
SYNC_CALLS = re.compile(r"Synchronize|^cudaMemcpy(?:_v\d+)?$|^cuMemcpy[DH]to[DH](?:_v\d+)?$")
COPY_CALLS = re.compile(r"memcpy", re.IGNORECASE)  # cudaMemcpy*, cuMemcpy*: the API calls of copies
NCCL = re.compile(r"^nccl", re.IGNORECASE)
LAYOUT = re.compile(r"nchwToNhwc|nhwcToNchw|transpose|permute", re.IGNORECASE)  # kernels that only move a layout
# name -> (the table it needs, the query); `proc`: the process id part of nsys's global ids
QUERIES = {
    "kernels": ("CUPTI_ACTIVITY_KIND_KERNEL",
                "SELECT k.start, k.end, s.value AS name, m.value AS mangled, k.graphNodeId AS graph_node, "
                "k.correlationId AS corr, "
                "k.globalPid >> 24 AS proc "
                "FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                "JOIN StringIds s ON s.id = k.shortName JOIN StringIds m ON m.id = k.mangledName"),
    "copies": ("CUPTI_ACTIVITY_KIND_MEMCPY",
               "SELECT start, end, copyKind AS kind, bytes, correlationId AS corr, globalPid >> 24 AS proc "
               "FROM CUPTI_ACTIVITY_KIND_MEMCPY"),
    "memsets": ("CUPTI_ACTIVITY_KIND_MEMSET", "SELECT start, end, globalPid >> 24 AS proc FROM CUPTI_ACTIVITY_KIND_MEMSET"),
    "runtime": ("CUPTI_ACTIVITY_KIND_RUNTIME",
                "SELECT r.start, r.end, s.value AS name, r.correlationId AS corr, r.globalTid AS tid, "
                "r.globalTid >> 24 AS proc FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"),
    "threads": ("ThreadNames", "SELECT t.globalTid AS tid, s.value AS name, t.globalTid >> 24 AS proc "
                "FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId"),
    "nvtx": ("NVTX_EVENTS",
             "SELECT n.start, n.end, COALESCE(n.text, s.value) AS name, n.globalTid AS tid, n.globalTid >> 24 AS proc "
             "FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId WHERE n.end IS NOT NULL"),
}


def load(path: str | Path) -> dict[str, pd.DataFrame]:
    """The tables the analysis needs, times in ns. A missing table (no copies at all) is empty;
    a file that is not an nsys SQLite export is an error naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such Nsight Systems export")
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "StringIds" not in tables:
                raise ValueError("it has no StringIds table")
            return {name: pd.read_sql_query(q, db) if table in tables else pd.DataFrame(columns=["start", "end", "proc"])
                    for name, (table, q) in QUERIES.items()}
    except (sqlite3.DatabaseError, ValueError, pd.errors.DatabaseError) as e:
        raise ValueError(f"{path}: not a readable Nsight Systems SQLite export ({e})") from e


def first_step(nvtx: pd.DataFrame) -> pd.Series:
    """The NVTX range of the first measured step: its process and thread are the training's."""
    steps = nvtx[nvtx.name == "step"]
    if steps.empty:
        raise ValueError("no NVTX 'step' ranges in the capture: were the measured steps captured?")
    return steps.sort_values("start").iloc[0]


def one_process(t: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The tables of the process that ran the first measured step (rank 0's view of a DDP cell)."""
    proc = first_step(t["nvtx"]).proc
    return {k: v[v.proc == proc] for k, v in t.items()}


def window(nvtx: pd.DataFrame) -> tuple[float, float, int]:
    steps = nvtx[nvtx.name == "step"]
    return steps.start.min(), steps.end.max(), len(steps)


def gap_table(gaps_ns: np.ndarray) -> dict[str, int]:
    counts = pd.cut(gaps_ns / 1e3, GAP_BINS_US, labels=GAP_LABELS, right=False).value_counts()
    return {label: int(counts[label]) for label in GAP_LABELS}


def top_kernels(kernels: pd.DataFrame, steps: int, n: int = 10) -> list[dict]:
    """The n kernels (by mangled name) with the most GPU time; share: % of all kernel time
    (kernels on several streams overlap, so shares of the busy time could sum past 100)."""
    total = float((kernels.end - kernels.start).sum()) or 1.0
    g = kernels.assign(dur=kernels.end - kernels.start).groupby("mangled")
    top = g.agg(name=("name", "first"), total=("dur", "sum"), calls=("dur", "size"))
    top = top.sort_values("total", ascending=False).head(n).reset_index()
    return [{"name": r.name, "mangled": r.mangled, "ms_per_step": r.total / 1e6 / steps,
             "calls_per_step": r.calls / steps, "share": 100 * r.total / total}
            for r in top.itertuples()]


def api_calls(runtime: pd.DataFrame, copies: pd.DataFrame, threads: pd.DataFrame, trainer: int,
              steps: int) -> pd.DataFrame:
    """Host time in CUDA API calls by name and thread (`training`: the thread that marks the steps;
    any other by its name, e.g. `pt_autograd_0`, autograd's backward thread; threads of one name
    together): calls and milliseconds per step, and whether the call waits for the GPU (a
    synchronize, or a copy to the host)."""
    to_host = set(copies["corr"][copies.kind == 2])
    waits = runtime.name.str.contains(SYNC_CALLS) | (runtime.name.str.contains(COPY_CALLS) & runtime["corr"].isin(to_host))
    names = runtime.tid.map(threads.drop_duplicates("tid").set_index("tid").name).fillna("other")
    calls = runtime.assign(thread=names.where(runtime.tid != trainer, "training"), waits=waits,
                           ms=(runtime.end - runtime.start) / 1e6)
    g = calls.groupby(["name", "thread", "waits"]).agg(calls=("ms", "size"), ms=("ms", "sum")).reset_index()
    return g.assign(per_step=g.calls / steps, ms_per_step=g.ms / steps).drop(columns=["calls", "ms"]) \
        .sort_values("ms_per_step", ascending=False)


def sync_calls(runtime: pd.DataFrame, trainer: int, other: bool = False) -> int:
    """Synchronizing CUDA calls of the training thread (the loop's own syncs), or of every other
    thread (DALI's, the loader's, autograd's)."""
    on = (runtime.tid != trainer) if other else (runtime.tid == trainer)
    return int((runtime.name.str.contains(SYNC_CALLS) & on).sum())


def forward_kernels(kernels: pd.DataFrame, runtime: pd.DataFrame, nvtx: pd.DataFrame, trainer: int) -> tuple[float, float]:
    """Kernels per forward pass, and of them the layout kernels (LAYOUT: names that say a transpose
    or an NCHW/NHWC conversion): the kernels whose launch call the training thread made inside a
    `forward` range (a CUDA graph's kernels, by the graph's launch)."""
    forward = nvtx[(nvtx.name == "forward") & (nvtx.tid == trainer)]
    if forward.empty:
        return 0.0, 0.0
    calls = runtime[runtime.tid == trainer]
    inside = np.zeros(len(calls), dtype=bool)
    for lo, hi in zip(forward.start, forward.end):
        inside |= (calls.start.to_numpy() >= lo) & (calls.start.to_numpy() < hi)
    k = kernels[kernels["corr"].isin(set(calls["corr"][inside]))]
    return len(k) / len(forward), int(k.name.str.contains(LAYOUT).sum()) / len(forward)


def nccl_time(kernels: pd.DataFrame) -> float:
    """GPU time (ns) in NCCL's collective kernels (the gradient all-reduce of DDP)."""
    nccl = kernels[kernels.name.str.contains(NCCL)]
    return float((nccl.end - nccl.start).sum())


def parse(path: str | Path) -> dict:
    """{'metrics': [...], 'kernels': top kernels, 'gaps': histogram} of one capture."""
    t = one_process(load(path))
    lo, hi, steps = window(t["nvtx"])
    inside = {k: t[k][(t[k].start >= lo) & (t[k].start < hi)] for k in ("kernels", "copies", "memsets", "runtime")}
    graph_launches = int(inside["runtime"].name.str.startswith("cudaGraphLaunch").sum())
    if graph_launches and not inside["kernels"].graph_node.notna().any():
        raise ValueError(f"{path}: {graph_launches} CUDA graph launches whose kernels the capture did not trace: "
                         "its GPU time would read as idle (capture with nsys --cuda-graph-trace=node)")
    gpu = pd.concat([inside[k][["start", "end"]] for k in ("kernels", "copies", "memsets")])
    merged = timeline.merge(gpu.start, gpu.end.clip(upper=hi))
    busy, span = sum(e - s for s, e in merged), hi - lo
    gaps = timeline.gaps(merged, lo, hi)
    k, c = inside["kernels"], inside["copies"]
    trainer = first_step(t["nvtx"]).tid
    api = api_calls(inside["runtime"], c, t["threads"], trainer, steps)
    on_trainer = api[api.thread == "training"]
    rows = [("profiled_steps", steps, "steps"), ("profiled_step_time", span / 1e6 / steps, "ms"),
            ("gpu_busy", 100 * busy / span, "%"),
            ("gpu_kernel_share", 100 * timeline.union(k.start, k.end) / span, "%"),
            ("idle_gaps_per_step", len(gaps) / steps, "gaps"), ("idle_time", gaps.sum() / 1e6 / steps, "ms/step"),
            ("idle_longest", gaps.max(initial=0) / 1e6, "ms"),
            ("kernels_per_step", len(k) / steps, "kernels"),
            *zip(("kernels_per_forward", "layout_kernels_per_forward"),
                 forward_kernels(k, inside["runtime"], t["nvtx"][(t["nvtx"].start >= lo) & (t["nvtx"].start < hi)], trainer),
                 ("kernels", "kernels")),
            ("graph_launches_per_step", graph_launches / steps, "launches"),
            ("kernel_mean_duration", (k.end - k.start).mean() / 1e3 if len(k) else 0.0, "us"),
            ("sync_calls_per_step", sync_calls(inside["runtime"], trainer) / steps, "calls"),
            ("sync_calls_other_threads", sync_calls(inside["runtime"], trainer, other=True) / steps, "calls/step"),
            ("api_time_training_thread", on_trainer.ms_per_step.sum(), "ms/step"),
            ("gpu_wait_training_thread", on_trainer[on_trainer.waits].ms_per_step.sum(), "ms/step"),
            ("allreduce_time", nccl_time(k) / 1e6 / steps, "ms/step"),
            ("allreduce_share", 100 * nccl_time(k) / (float((k.end - k.start).sum()) or 1.0), "%")]
    for code, kind in COPY_KINDS.items():
        d = c[c.kind == code]
        rows.append((f"copy_{kind}_share", 100 * (d.end - d.start).sum() / span, "%"))
    nvtx = t["nvtx"][(t["nvtx"].start >= lo) & (t["nvtx"].start < hi)]
    rows += [(f"phase_{p}", (nvtx[nvtx.name == p].end - nvtx[nvtx.name == p].start).sum() / 1e6 / steps, "ms/step")
             for p in PHASES]
    return {"metrics": [{"metric": m, "value": float(v), "unit": u} for m, v, u in rows],
            "kernels": top_kernels(k, steps), "gaps": gap_table(gaps),
            "api_calls": listed(api).to_dict("records")}


def listed(api: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """The calls a record keeps: the `top` by host time, and every call of the training thread that
    waits for the GPU, however short (its sync calls per step add up from these)."""
    rest = api.iloc[top:]
    return pd.concat([api.head(top), rest[rest.waits & (rest.thread == "training")]])


class Nsys(WrappingObserver):
    name = "nsys"
    FLAGS = ["profile", "-t", "cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--cuda-graph-trace=node",
             "--capture-range=cudaProfilerApi", "--capture-range-end=stop", "--force-overwrite=true"]

    def command(self, spec: dict, out_dir: Path) -> list[str]:
        return [self.tool(spec), *self.FLAGS, "-o", str(Path(out_dir) / "nsys")]

    def phase(self, name: str):
        import torch
        return torch.cuda.nvtx.range(name)

    @contextmanager
    def window(self):
        import torch
        torch.cuda.profiler.start()
        try:
            yield
        finally:
            torch.cuda.profiler.stop()

    def parse_output(self, spec: dict, out_dir: Path) -> dict:
        rep = Path(out_dir) / "nsys.nsys-rep"
        if not rep.is_file():
            raise ValueError(f"nsys wrote no report ({rep.name}): is libdw on the library path?")
        sqlite = rep.with_suffix(".sqlite")
        self.call(spec, ["export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(sqlite), str(rep)])
        return parse(sqlite)
