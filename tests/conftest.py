"""Shared fixtures: the cpu preset's config and small real datasets made once per session."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from trainperf import config, matrix
from workloads import data

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="session")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("data") / "cpu"
    data.make_images(root / "images", n=16, classes=2, seed=0, jobs=2)
    data.make_tokens(root / "tokens.npy", n=20_000, seed=0)
    return root.parent


@pytest.fixture()
def cpu_config(datasets):
    """The real config.yaml, cpu preset, pointed at the session's small datasets; 2 measured steps."""
    c = config.load(overrides={"preset": "cpu", "data_root": str(datasets)})
    c["presets"]["cpu"].update(warmup_steps=1, measured_steps=2)
    return matrix.resolve(c)


def spec_of(cfg: dict, workload: str, variant: str) -> dict:
    cell = matrix.cell(cfg, workload, variant)
    assert cell["status"] == "run", cell["reason"]
    return cell["spec"]


ROOT = Path(__file__).resolve().parent.parent
# what `snakemake` reads; profiles/ whole: its workflow profile (profiles/default) alone would
# shadow the installed package of the same name
WORKFLOW = ("Snakefile", "rules", "config", "report", "profiles")


def copy_workflow(dst: Path) -> Path:
    """The project's workflow files in a folder of their own (the code runs from the install)."""
    for part in WORKFLOW:
        (dst / part).parent.mkdir(parents=True, exist_ok=True)
        copy = shutil.copytree if (ROOT / part).is_dir() else shutil.copy
        copy(ROOT / part, dst / part, **({"ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree else {}))
    return dst
