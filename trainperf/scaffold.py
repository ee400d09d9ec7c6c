"""`trainperf new NAME --kind vision|sequence`: write a workload file and its test from a template."""
from __future__ import annotations

import keyword
import re
from pathlib import Path

# Both kinds end with the knob_reason override: a knob that cannot act on the model must skip
# its cells with why, or they run as something else (a compile variant that trains eagerly).
KNOB_REASON = '''
    @classmethod
    def knob_reason(cls, knob, value, cuda):
        # TODO override when a knob cannot act on this model: return why, and its cells are skipped
        # with that reason instead of measured as something they are not. A model built on nn.LSTM,
        # nn.GRU or nn.RNN: torch.compile does not trace them (dynamo's allow_rnn is off) and they
        # run eager, so skip compile as workloads/lstm.py does, e.g.:
        # if knob == "compile" and value:
        #     return "torch.compile does not trace nn.GRU (dynamo's allow_rnn is off): it would run eager"
        return super().knob_reason(knob, value, cuda)
'''

VISION = '''"""{title}: TODO say what this workload is and why it is in the study."""
import torchvision

from workloads.base import VisionWorkload, register


@register
class {cls}(VisionWorkload):
    name = "{name}"
    cnn = True  # TODO False unless the model is convolutional (channels_last applies to CNNs only)
    # Sizes per preset: the cpu preset must train a step in well under a second on a 2-core CPU.
    defaults = {{
        "cpu": {{"batch_size": 8, "image_size": 64, "lr": 0.002}},
        "gpu": {{"batch_size": 256, "image_size": 224, "lr": 0.02}},
    }}

    def build_model(self):
        # TODO return your model; self.params holds the sizes above plus num_classes (from the data)
        return torchvision.models.resnet18(num_classes=self.params["num_classes"])
''' + KNOB_REASON

SEQUENCE = '''"""{title}: TODO say what this workload is and why it is in the study."""
from torch import nn

from workloads.base import SequenceWorkload, register


class Model(nn.Module):
    """TODO your model: token ids (batch, seq) -> logits (batch, seq, vocab)."""

    def __init__(self, vocab: int, width: int = 512):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.body = nn.Sequential(nn.Linear(width, width), nn.GELU())
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(self.body(self.embed(tokens)))


@register
class {cls}(SequenceWorkload):
    name = "{name}"
    # Sizes per preset: the cpu preset must train a step in well under a second on a 2-core CPU.
    defaults = {{
        "cpu": {{"batch_size": 8, "seq_len": 16, "vocab": 10000, "lr": 0.05}},
        "gpu": {{"batch_size": 128, "seq_len": 128, "vocab": 10000, "lr": 0.05}},
    }}

    def build_model(self):
        # TODO self.params holds the sizes above; vocab covers every token id in the data
        return Model(self.params["vocab"])
''' + KNOB_REASON

TEST = '''"""{name}: what is particular to this workload. (tests/test_registry.py already trains every
registered workload for two steps in the baseline and the optimized variant.)"""
import torch

import workloads


def test_{name}_output_shape():
    cls = workloads.get("{name}")
    params = {{**cls.defaults["cpu"], {extra}}}
    model = cls(params).build_model()
    x = {input}
    assert model(x).shape == {shape}
'''

KINDS = {
    "vision": (VISION, '"num_classes": 3', 'torch.randn(2, 3, params["image_size"], params["image_size"])', "(2, 3)"),
    "sequence": (SEQUENCE, '"seq_len": 16', "torch.randint(0, 100, (2, 16))", '(2, 16, params["vocab"])'),
}


def new(name: str, kind: str, root: str | Path = ".") -> list[Path]:
    """Write workloads/<name>.py and tests/test_workload_<name>.py under root; refuse to overwrite."""
    from workloads import HERE
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise ValueError(f"workload name {name!r}: use lower case letters, digits and _ (a Python module name)")
    if (HERE / f"{name}.py").exists():
        raise ValueError(f"workload name {name!r} is the name of a module of the project; choose another")
    template, extra, x, shape = KINDS[kind]
    cls = "".join(part.capitalize() for part in name.split("_"))
    root = Path(root)
    files = {root / "workloads" / f"{name}.py": template.format(name=name, cls=cls, title=cls),
             root / "tests" / f"test_workload_{name}.py": TEST.format(name=name, extra=extra, input=x, shape=shape)}
    for path in files:
        if path.exists():
            raise FileExistsError(f"{path} exists; choose another name or edit it")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(files)


NEXT_STEPS = """Wrote {files}.
Fill in the TODOs in {workload}: the model in build_model(), the sizes per preset, cnn for vision,
and knob_reason for a knob that cannot act on the model (nn.LSTM, nn.GRU or nn.RNN: skip compile,
which leaves them eager; see workloads/lstm.py).
Then:
  trainperf run {name} baseline --preset cpu        # one cell by hand
  python -m pytest -q tests -k {name}               # its smoke test and the registry walk
  snakemake --cores 1 --config workloads=[{name}]   # every variant of it, against the baseline
"""
