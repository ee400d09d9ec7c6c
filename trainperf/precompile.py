"""The compile stage: before any cell of the matrix is timed, build every torch.compile cache
folder the matrix will load (one per combination of traced knobs, workloads/compiled.py), several
at once.

Why: a cold compile is tens of seconds of host work per folder (dynamo, AOTAutograd, inductor,
Triton), mostly on one core, and the gpu preset has dozens of folders; one after another, in the
cells' first steps, they cost more than the eager cells (the report's "What the matrix took to
run" gives the figures per machine). Each folder is built by its own process (a fresh CUDA context and
dynamo state), `parallel` at a time; the cells then load their graphs (seconds). A folder whose
build fails is recorded with its reason; its cells compile in their own first step, as without
this stage. A stage stopped by a signal (a time limit) records none of the folders it was
building: their children died of the signal, not of a compile fault, and they are built again.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from workloads.record import write_json

_stopping = threading.Event()  # set by a signal to the stage: its children die of that signal too


def _stop(signum, frame):
    _stopping.set()
    raise KeyboardInterrupt(f"the compile stage got signal {signum}")


def build(spec: dict, out: Path, threads: int) -> dict | None:
    """One cache folder, by a child process; its record (written to `out`, its output beside it),
    or None where the stage was stopped."""
    if _stopping.is_set():  # a queued folder: the stage stopped before it started
        return None
    env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": str(threads)}  # Triton's workers: the host's share
    cmd = [sys.executable, "-m", "trainperf.cli", "compile", "--spec", json.dumps(spec), "--out", str(out)]
    t0 = time.time()
    with open(out.with_suffix(".log"), "w") as log:
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    if code and _stopping.is_set():
        return None
    if code or not out.exists():  # the child died before it could say why
        why = f"process died (signal {-code})" if code < 0 else f"process exited with status {code}"
        cell = {k: spec[k] for k in ("workload", "variant", "profiler", "rep")}
        write_json(out, {"key": out.stem, "cell": cell, "status": "failed", "reason": why, "start_ts": t0,
                         "seconds": time.time() - t0})
    return json.loads(out.read_text())


def stage(jobs: list[tuple[dict, Path]], parallel: int, cores: int) -> list[dict]:
    """Build every folder, `parallel` at a time; the records, in the jobs' order, each with the
    stage's start and wall time (`stage_ts`, `stage_s`: which run of the stage built it)."""
    stage_ts = time.time()
    for _, out in jobs:
        out.parent.mkdir(parents=True, exist_ok=True)
    threads = max(1, cores // max(1, parallel))
    _stopping.clear()
    handlers = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            records = list(pool.map(lambda job: build(*job, threads), jobs))
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    stage_s = time.time() - stage_ts  # the stage's wall time, its children's starts included
    for r, (_, out) in zip(records, jobs):
        r.update(stage_ts=stage_ts, stage_s=stage_s)
        write_json(out, r)
        print(f"{r['key']}: {r['status']} in {r['seconds']:.1f} s" + (f" ({r['reason']})" if r["reason"] else ""),
              file=sys.stderr)
    return records
