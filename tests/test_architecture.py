"""One direction of imports: the contracts in pyproject.toml hold, and they catch a forbidden import."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"]


def lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(LINT, cwd=root, capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(root)})


def test_the_import_contracts_hold():
    out = lint(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 kept, 0 broken" in out.stdout


@pytest.mark.parametrize("where,line,broken", [
    ("workloads/harness.py", "from profiles import OBSERVERS", "workloads imports nothing else of the project"),
    ("profiles/nsys.py", "from workloads import harness", "profiles imports only the harness's contracts"),
    ("analysis/report.py", "from trainperf import config", "analysis reads files only"),
])
def test_a_forbidden_import_breaks_its_contract(tmp_path, where, line, broken):
    for part in ("pyproject.toml", "trainperf", "workloads", "profiles", "analysis"):
        (shutil.copytree if (ROOT / part).is_dir() else shutil.copy)(ROOT / part, tmp_path / part)
    path = tmp_path / where
    path.write_text(f"{line}  # noqa\n" + path.read_text())
    out = lint(tmp_path)
    assert out.returncode != 0 and f"{broken}" in out.stdout and "BROKEN" in out.stdout, out.stdout


def test_analysis_never_reads_the_config():
    sources = "".join(p.read_text() for p in (ROOT / "analysis").glob("*.py"))
    assert "config.yaml" not in sources and "CONFIG" not in sources
