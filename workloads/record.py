"""The run record's contract: how a record is written and read back, and what a failed one holds.

A cell's record is `<rep folder>/metrics.json`. A failed run never replaces a record that trained:
it is kept beside it as `failed.json` (the good record stays what the tables read), and a later
run of the same spec that trains removes it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

KEYS = ("workload", "variant", "profiler", "rep")  # what names a cell
ATTEMPT = "failed.json"  # a failed run kept beside a good record


def write_json(path: str | Path, obj) -> None:
    """Write atomically: a reader sees the old file or the whole new one, never half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str))
    os.replace(tmp, path)


def read(path: str | Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def keys_of(spec: dict) -> dict:
    return {k: spec[k] for k in KEYS}


def failed(spec: dict, reason: str, output: str = "") -> dict:
    """The record of a cell that did not train, with the last lines of its output."""
    record = {"keys": keys_of(spec), "spec": spec, "status": "failed", "reason": reason[:400]}
    return {**record, "log_tail": output.strip().splitlines()[-8:]} if output.strip() else record


def keep(out: str | Path, record: dict) -> Path:
    """Write a cell's record to `out`, unless it failed and `out` holds one that trained: then
    beside it (ATTEMPT). Returns the path written."""
    out = Path(out)
    old = read(out)
    if record.get("status") != "ok" and old and old.get("status") == "ok":
        out = out.with_name(ATTEMPT)
    else:
        out.with_name(ATTEMPT).unlink(missing_ok=True)
    write_json(out, record)
    return out


def latest(spec: dict, out: str | Path) -> dict | None:
    """The record this spec last produced at `out` (the record, or the failed run kept beside
    it), or None: the cell has not run with this spec."""
    for path in (Path(out), Path(out).with_name(ATTEMPT)):
        record = read(path)
        if record and same_run(record.get("spec"), spec):
            return record
    return None


def same_run(recorded: dict | None, spec: dict) -> bool:
    """Does a record's spec describe this cell? (cell_hash is a digest of the spec: not compared.)"""
    return bool(recorded) and {**recorded, "cell_hash": None} == {**spec, "cell_hash": None}
