"""A sweep: the cells of one workload x profiler x repetition, run one after another.

Starting Python, torch and a CUDA context costs seconds; an optimized cell trains for one or two.
So one sweep process imports once and runs its cells in a child forked from it (CUDA is never
touched before the fork). The child runs the cells in order, each with a fresh model, optimizer,
loader and peak-memory count. Isolation where it matters:
- a cell that fails (out of memory, non-finite loss, a CUDA error) is recorded, and the child
  ends: a fresh child takes the remaining cells, so no failure leaks into the next cell;
- a child that dies (a crash, a kill) leaves its cell recorded as failed with the signal;
- a profiler that wraps the process (nsys, ncu) runs each cell as its own process under the tool;
- a data-parallel cell (ddp=N) runs as its own N processes, started by torch.distributed.run.
Every record is written atomically; a sweep run again skips the cells whose record already holds
the same spec, so an interrupted sweep redoes only the cells it had not finished (and a knob added
since a record was made does not void it while the knob keeps the value the record ran with).
"""
from __future__ import annotations

import gc
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from workloads import record

FAILED_CHILD = 3  # a child's exit status after a failed cell: go on with a fresh child


def done(spec: dict, out: Path) -> bool:
    """Has this spec run at `out` (trained or failed)?"""
    return record.latest(spec, out) is not None


def run_cell(spec: dict, out_dir: Path | None = None) -> dict:
    """One cell in this process, under the observer its profiler names."""
    from profiles import OBSERVERS
    from workloads import harness
    return harness.run(spec, OBSERVERS[spec["profiler"]], out_dir=out_dir)


def run_cells(jobs: list[tuple[dict, Path]]) -> int:
    """In the child: run the cells in order; stop after the first that fails."""
    import torch
    from workloads import harness
    for spec, out in jobs:
        result = run_cell(spec, out.parent)
        record.keep(out, result)
        gc.collect()
        torch._dynamo.reset()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        if result["status"] != "ok":
            return FAILED_CHILD
    return 0


def die_with_parent() -> None:
    """Linux: end this child when the sweep that forked it ends (a sweep stopped by a timeout
    must not leave a cell training on the GPU)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def fork_cells(jobs: list[tuple[dict, Path]]) -> int:
    """Run the cells in a forked child; its exit status (a signal as 128 + number)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            die_with_parent()
            code = run_cells(jobs)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    status = os.waitpid(pid, 0)[1]
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def launched(spec: dict) -> bool:
    """Does the cell run as its own process(es): under a profiling tool, or as DDP ranks?"""
    from profiles import OBSERVERS
    from trainperf.matrix import processes
    return OBSERVERS[spec["profiler"]].wraps_process or processes(spec) > 1


def launched_cell(spec: dict, out: Path) -> int:
    """One cell as its own process(es), under its profiling tool if it has one; then the tool's
    output is parsed into the record (or the tool's error becomes the cell's reason)."""
    from profiles import OBSERVERS
    from workloads import ddp
    from trainperf.matrix import processes
    out.parent.mkdir(parents=True, exist_ok=True)
    observer_cls = OBSERVERS[spec["profiler"]]
    observer = observer_cls(spec, False, out.parent) if observer_cls.wraps_process else None
    try:
        prefix = observer.command(spec, out.parent) if observer else []
    except (ValueError, OSError) as e:
        record.keep(out, record.failed(spec, str(e)))
        return 0
    target = observer.staged(out) if observer else out
    cmd = [*prefix, *ddp.launcher(processes(spec)), "trainperf.cli", "run", "--spec", json.dumps(spec), "--out", str(target)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, **(ddp.ENV if processes(spec) > 1 else {})})
    sys.stderr.write(proc.stdout)
    if observer:
        observer.finish(spec, out, proc.returncode, proc.stdout, time.perf_counter() - t0)
    elif proc.returncode and not done(spec, out):
        died(spec, out, proc.returncode, proc.stdout)
    return 0 if done(spec, out) else proc.returncode


def died(spec: dict, out: Path, code: int, output: str = "") -> None:
    reason = f"process died (signal {code - 128})" if code > 128 else f"process exited with status {code}"
    record.keep(out, record.failed(spec, reason, output))


def sweep(jobs: list[tuple[dict, Path]], name: str = "sweep") -> None:
    """Run every job (spec, record path) that has no record yet; never raises for a cell. Each run's
    record names the sweep and this run of it (SWEEP_ENV, "<name>:<run>"): two runs of a pair made
    by two runs of one sweep had a stop between them."""
    from workloads import harness  # noqa: F401  imported once here, inherited by every child
    os.environ[harness.SWEEP_ENV] = f"{name}:{uuid.uuid4().hex[:12]}"
    pending = [(s, Path(o)) for s, o in jobs if not done(s, Path(o))]
    while pending:
        spec, out = pending[0]
        in_child = list(itertools.takewhile(lambda job: not launched(job[0]), pending))
        code = fork_cells(in_child) if in_child else launched_cell(spec, out)
        left = [(s, o) for s, o in pending if not done(s, o)]
        if left and code not in (0, FAILED_CHILD):  # cells run in order: the first left was running
            died(*left[0], code)
            left = left[1:]
        pending = left


def failures(jobs: list[tuple[dict, Path]]) -> list[dict]:
    """The cells whose run of this spec failed: their keys and reason."""
    latest = [record.latest(spec, out) for spec, out in jobs]
    return [{"keys": r["keys"], "reason": r.get("reason")} for r in latest if r and r["status"] != "ok"]
