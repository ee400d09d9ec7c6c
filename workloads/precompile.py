"""The compile stage: before any cell of the matrix is timed, build every torch.compile cache
folder the matrix will load (one per combination of traced knobs, workloads/compiled.py), several
at once.

Why: a cold compile is tens of seconds of host work per folder (dynamo, AOTAutograd, inductor,
Triton), mostly on one core, and the gpu preset has dozens of folders; one after another, in the
cells' first steps, they cost more than the eager cells (the report's "What the matrix took to
run" gives the figures per machine). Each folder is built by its own process (a fresh CUDA context and
dynamo state), `parallel` at a time; the cells then load their graphs (seconds). A folder whose
build fails is recorded with its reason; its cells compile in their own first step, as without
this stage.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from workloads.cli import write_json


def build(spec: dict, out: Path, threads: int) -> dict:
    """One cache folder, by a child process; its record (written to `out`, its output beside it)."""
    env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": str(threads)}  # Triton's workers: the host's share
    cmd = [sys.executable, "-m", "workloads.cli", "compile", "--spec", json.dumps(spec), "--out", str(out)]
    t0 = time.time()
    with open(out.with_suffix(".log"), "w") as log:
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
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
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        records = list(pool.map(lambda job: build(*job, threads), jobs))
    stage_s = time.time() - stage_ts  # the stage's wall time, its children's starts included
    for r, (_, out) in zip(records, jobs):
        r.update(stage_ts=stage_ts, stage_s=stage_s)
        write_json(out, r)
        print(f"{r['key']}: {r['status']} in {r['seconds']:.1f} s" + (f" ({r['reason']})" if r["reason"] else ""),
              file=sys.stderr)
    return records
