"""Adding a workload: the scaffold writes a file that registers, trains and passes its own test;
a malformed workload file fails with one error naming the file and what is missing."""
import sys

import pytest

import workloads
from tests.conftest import spec_of
from trainperf import scaffold
from workloads import harness
from trainperf.sweep import run_cell
from workloads.base import REGISTRY, WorkloadError


@pytest.fixture()
def isolated_registry():
    before = dict(REGISTRY)
    yield
    for name in set(REGISTRY) - set(before):
        module = REGISTRY.pop(name).__module__
        sys.modules.pop(module, None)


@pytest.mark.parametrize("kind", ["vision", "sequence"])
def test_scaffolded_workload_registers_trains_and_passes_its_test(tmp_path, cpu_config, isolated_registry, kind):
    name = f"my_{kind}"
    workload_file, test_file = scaffold.new(name, kind, tmp_path)
    assert workloads.load_file(workload_file) == [name]
    namespace = {}
    exec(compile(test_file.read_text(), str(test_file), "exec"), namespace)
    namespace[f"test_{name}_output_shape"]()
    record = run_cell(spec_of(cpu_config, name, "baseline"))
    assert record["status"] == "ok", record["reason"]


@pytest.mark.parametrize("kind", ["vision", "sequence"])
def test_the_scaffold_prompts_for_knob_reason_and_its_example_skips_compile(tmp_path, isolated_registry, kind):
    """A model on nn.LSTM or nn.GRU inherits compile on a GPU unless knob_reason says it cannot act:
    the file prompts for the override, defers to the base class as written, and its example,
    uncommented, skips compile with its reason."""
    from trainperf import config, variants
    gpu = variants.Machine("gpu", cuda=True)
    as_written, edited = (scaffold.new(f"{kind}_{n}", kind, tmp_path)[0] for n in ("as_written", "edited"))
    text = as_written.read_text()
    assert "def knob_reason(cls, knob, value, cuda):" in text and "TODO override when a knob cannot act" in text
    assert "nn.GRU" in text and "workloads/lstm.py" in text
    edited.write_text(edited.read_text().replace("        # if knob", "        if knob")
                      .replace("        #     return", "            return"))
    (name_as_written,), (name_edited,) = workloads.load_file(as_written), workloads.load_file(edited)
    assert variants.resolve("compile", workloads.get(name_as_written), config.load(), gpu)[1] is None
    knobs, reason = variants.resolve("compile", workloads.get(name_edited), config.load(), gpu)
    assert knobs is None and reason.startswith("torch.compile does not trace nn.GRU")


def test_the_next_steps_name_the_knob_reason_override():
    assert "knob_reason" in scaffold.NEXT_STEPS and "nn.GRU" in scaffold.NEXT_STEPS


def test_scaffold_refuses_to_overwrite_or_shadow(tmp_path):
    scaffold.new("mine", "vision", tmp_path)
    with pytest.raises(FileExistsError, match="mine.py exists"):
        scaffold.new("mine", "vision", tmp_path)
    with pytest.raises(ValueError, match="'harness' is the name of a module of the project"):
        scaffold.new("harness", "vision", tmp_path)
    with pytest.raises(ValueError, match="use lower case letters"):
        scaffold.new("My-Model", "vision", tmp_path)


GOOD = """
from workloads.base import VisionWorkload, register
import torchvision

@register
class Good(VisionWorkload):
    name = "{name}"
    defaults = {{"cpu": {{"batch_size": 2}}, "gpu": {{"batch_size": 2}}}}
    def build_model(self):
        return torchvision.models.resnet18(num_classes=2)
"""


@pytest.mark.parametrize("edit,message", [
    (lambda s: s.replace("    def build_model(self):\n        return torchvision.models.resnet18(num_classes=2)\n", ""),
     "workload class Good is missing: def build_model(self)"),
    (lambda s: s.replace('{"batch_size": 2}}', '{}}'), "defaults['gpu'] needs a batch_size"),
    (lambda s: s.replace("@register\n", ""), "defines workload Good but registers none"),
    (lambda s: s.replace('name = "broken"', 'name = "../evil"'), "name '../evil' is not a Python identifier"),
    (lambda s: s.replace("(VisionWorkload)", "(object)"), "must subclass VisionWorkload or SequenceWorkload"),
    (lambda s: s.replace("def build_model(self):", "def build_model(self)"), "cannot be imported: SyntaxError"),
    (lambda s: s.replace('name = "broken"', 'name = "resnet50"'), "the name 'resnet50' is taken by workloads.resnet50"),
])
def test_malformed_workload_file_names_the_file_and_the_gap(tmp_path, isolated_registry, edit, message):
    path = tmp_path / "broken.py"
    path.write_text(edit(GOOD.format(name="broken")))
    workloads.names()  # the reference workloads are registered first
    with pytest.raises(WorkloadError) as e:
        workloads.load_file(path)
    assert str(path) in str(e.value) and message in str(e.value)
