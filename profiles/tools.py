"""What the profilers that wrap a cell's process (nsys, ncu) share: finding the tool, running the
cell under it, and folding what the tool wrote into the cell's record.

A tool is found through the config's `tools` setting (a name on PATH or a path). A missing tool
makes its cells skipped with that reason; a tool that fails leaves its error in the cell's record.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from workloads import record as records
from workloads.observer import Observer


def find(name: str, setting: str | None = None) -> str | None:
    """The tool's full path, or None."""
    return shutil.which(setting or name)


def version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return version_line(out)


def version_line(banner: str) -> str:
    """The line of a tool's --version banner that names its version (ncu prints a title and a
    copyright first), else its first line."""
    lines = [line.strip() for line in banner.splitlines() if line.strip()]
    return next((line for line in lines if "version" in line.lower()), lines[0] if lines else "unknown")


def tail(text: str, lines: int = 5) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())


class WrappingObserver(Observer):
    """An observer whose cell runs as its own process under a tool. Inside that process it marks
    the measured steps and phases (subclasses); outside, `finish` folds the tool's output into
    the record the process wrote."""
    name = ""
    wraps_process = True
    time_bounded = False  # a profile covers every measured step

    @classmethod
    def unavailable(cls, config: dict, cuda: bool) -> str | None:
        if not cuda:
            return f"{cls.name} needs a CUDA GPU; this machine has none"
        setting = config.get("tools", {}).get(cls.name)
        if config.get("tools_checked_here", True) and not find(cls.name, setting):
            return f"{cls.name} not found (on PATH, or set tools.{cls.name} in config/config.yaml)"
        return None

    @classmethod
    def tool(cls, spec: dict) -> str:
        return find(cls.name, spec.get("tools", {}).get(cls.name)) or cls.name

    def call(self, spec: dict, args: list[str]) -> str:
        proc = subprocess.run([self.tool(spec), *args], capture_output=True, text=True)
        if proc.returncode:
            raise ValueError(f"{self.name} {args[0]} failed: {tail(proc.stdout + proc.stderr)}")
        return proc.stdout

    def metrics(self) -> list[dict]:
        return []  # read after the process ends, by finish()

    def command(self, spec: dict, out_dir: Path) -> list[str]:
        raise NotImplementedError

    def parse_output(self, spec: dict, out_dir: Path) -> dict:
        """{'metrics': [...], and tables such as 'kernels'} from what the tool wrote."""
        raise NotImplementedError

    def failure(self, output: str) -> str:
        """The reason a run under the tool failed, from the tool's output."""
        return f"{self.name} failed: {tail(output)}"

    def refused(self, output: str) -> str | None:
        """A reason the tool gave for not profiling while the run itself went on, or None."""
        return None

    @staticmethod
    def staged(out: Path) -> Path:
        """Where the run under the tool writes its record. The cell's record (`out`) is written only
        once the tool's findings are merged in: a sweep stopped in between (by a time limit) leaves
        the cell to run again, not a record that passes for done without them."""
        return Path(out).with_name("run.json")

    def finish(self, spec: dict, out: Path, returncode: int, output: str, wall_s: float) -> None:
        """Merge the tool's findings into the run's record and write it to `out` (or record why
        there are none)."""
        out, staged = Path(out), self.staged(out)
        try:
            record = json.loads(staged.read_text())
        except (OSError, ValueError):
            record = records.failed(spec, self.failure(output))
        if record["status"] == "ok" and self.refused(output):
            record.update(status="failed", reason=self.refused(output))
        elif record["status"] == "ok":
            try:
                found = self.parse_output(spec, out.parent)
                record["metrics"] += found.pop("metrics") + [
                    {"metric": "profiled_cell_time", "value": wall_s, "unit": "s"}]
                record[self.name] = found
                record.setdefault("tool_versions", {})[f"{self.name}_version"] = version(self.tool(spec))
            except (ValueError, KeyError, OSError) as e:
                record.update(status="failed", reason=f"{self.name}: {e}"[:400])
        elif returncode and record.get("reason") is None:
            record["reason"] = self.failure(output)
        if record["status"] != "ok":
            record.setdefault("log_tail", output.strip().splitlines()[-8:])
        records.keep(out, record)
        staged.unlink(missing_ok=True)
