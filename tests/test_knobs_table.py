"""The knob table (workloads/knobs.py) declares each knob once: the config's baseline and schema,
the values that need CUDA, the workloads a knob acts on and the compile-cache key follow from it."""
import json

import jsonschema
import pytest
import yaml

import workloads
from trainperf import config, variants
from trainperf.variants import Machine
from workloads import compiled
from workloads.knobs import KNOBS, NEEDS, defaults

GPU, NO_GPU = Machine("gpu", cuda=True), Machine("gpu", cuda=False)  # the gpu preset disables nothing


def shipped() -> dict:
    return yaml.safe_load(config.CONFIG.read_text())


def set_values() -> list[tuple[str, object]]:
    """Every (knob, value) the shipped config's variants set away from the default."""
    c = shipped()
    sets = [*c["fixes"].values(), *c["extra_variants"].values(), *c["tuning"].values()]
    return sorted({(k, v) for s in sets for k, v in s.items() if v != KNOBS[k].default}, key=str)


def test_the_configs_baseline_is_the_tables_defaults():
    listed = shipped()["baseline"]
    # as JSON: false and 0 differ
    assert json.dumps(listed) == json.dumps({k: defaults().get(k, "not a knob") for k in listed})
    assert config.load()["baseline"] == defaults()


def test_a_knob_the_baseline_leaves_out_takes_its_default():
    c = shipped()
    c["baseline"] = {"precision": "tf32"}
    assert config.validate(c)["baseline"] == {**defaults(), "precision": "tf32"}


@pytest.mark.parametrize("name", list(KNOBS))
def test_each_knob_is_declared_whole(name):
    knob = KNOBS[name]
    jsonschema.validate(knob.default, knob.allowed)
    for value in () if knob.cuda is True else knob.cuda:
        jsonschema.validate(value, knob.allowed)
    assert knob.needs in ("", *NEEDS) and knob.meaning.strip() and "\n" not in knob.meaning
    assert knob.acts(defaults(), True) in (True, False)


def _names(node) -> set:
    """Every property name, enum value and required key in a schema."""
    if isinstance(node, list):
        return set().union(*map(_names, node)) if node else set()
    if not isinstance(node, dict):
        return set()
    own = {*node.get("properties", {}), *node.get("enum", []), *node.get("required", [])}
    return own.union(*map(_names, node.values()))


def test_the_schema_file_lists_no_knob():
    listed = yaml.safe_load(config.SCHEMA.read_text())
    assert not _names(listed) & set(KNOBS)
    assert _names(config.schema()) >= set(KNOBS)


@pytest.mark.parametrize("name", list(KNOBS))
def test_a_bad_value_of_any_knob_is_one_line_naming_it(name):
    with pytest.raises(config.ConfigError, match=rf"^config error at fixes\.amp\.{name}: 'fast' [^\n]*$"):
        config.load(overrides={"fixes": {"amp": {name: "fast"}}})


def test_a_preset_disables_the_tables_knobs_only():
    c = config.load()
    c["presets"]["cpu"]["disabled"] = {name: "off here" for name in KNOBS}
    config.validate(c)
    c["presets"]["cpu"]["disabled"]["turbo"] = "off here"
    with pytest.raises(config.ConfigError, match=r"at presets\.cpu\.disabled: 'turbo' is not one of \['precision'"):
        config.validate(c)


# The values that needed CUDA before the table (variants.py's list), and some that never did.
NEEDS_CUDA = [("precision", "tf32"), ("cudnn_benchmark", True), ("pin_memory", True), ("copy", "async"),
              ("compile", "reduce-overhead"), ("compile", "max-autotune"), ("sdpa_backend", "efficient"),
              ("sdpa_backend", "cudnn"), ("dali_hw_decoder_load", 1.0), ("dali_jpeg_buffers", True)]
RUNS_ON_A_CPU = [("precision", "amp-bf16"), ("compile", "default"), ("compile", "max-autotune-no-cudagraphs"),
                 ("sdpa_backend", "flash"), ("num_workers", 2), ("fused_optimizer", True), ("batch_scale", 2)]


@pytest.mark.parametrize("knob,value", NEEDS_CUDA + RUNS_ON_A_CPU)
def test_the_values_that_need_cuda(knob, value):
    workload = workloads.get("vit_b_16" if knob == "sdpa_backend" else "resnet50")
    reason = variants.knob_reason(knob, value, workload, config.load(), NO_GPU)
    needs_cuda = (knob, value) in NEEDS_CUDA
    assert reason == (f"{knob}={value} needs a CUDA GPU; this machine has none" if needs_cuda else None)
    assert variants.knob_reason(knob, value, workload, config.load(), GPU) is None


@pytest.mark.parametrize("knob,value", [(k, v) for k, v in set_values() if KNOBS[k].needs])
def test_a_knob_acts_on_the_workloads_that_have_what_it_needs(knob, value):
    need = KNOBS[knob].needs
    for name in workloads.names():
        w = workloads.get(name)
        reason = w.knob_reason(knob, value, cuda=True)
        if not NEEDS[need][0](w):
            assert reason == NEEDS[need][1].format(knob=knob, name=name, data=w.data)
        else:  # whether DALI is installed is decided where the cell runs, not here
            assert reason is None, name


@pytest.mark.parametrize("knob,value,others,cuda,acts", [
    ("prefetch_factor", 4, {"num_workers": 0}, True, False),
    ("prefetch_factor", 4, {"num_workers": 2}, True, True),
    ("persistent_workers", True, {"num_workers": 2, "loader": "dali"}, False, False),
    ("pin_memory", True, {"loader": "dali"}, True, False),  # DALI hands over batches on the GPU
    ("copy", "async", {"loader": "dali"}, False, True),  # DALI's CPU pipeline does not
    ("eager_pooling", True, {"compile": False}, True, False),
    ("eager_pooling", True, {"compile": "default"}, True, True),
    ("dali_jpeg_buffers", True, {"loader": "torch"}, True, False),
    ("dali_hw_decoder_load", 1.0, {"loader": "dali"}, False, False),
    ("dali_hw_decoder_load", 1.0, {"loader": "dali"}, True, True),
])
def test_a_knob_that_cannot_act_compares_at_its_default(knob, value, others, cuda, acts):
    base, machine = defaults(), Machine("gpu", cuda)
    knobs = {**base, **others, knob: value}
    unset = {**knobs, knob: base[knob]}
    assert (variants.effective(knobs, base, machine) != variants.effective(unset, base, machine)) == acts


# Specs of records in tests/data as they ran (workload, params, knobs), and the compile-cache key the
# code before the knob table gave each: a record's cache folder keeps its name.
SPECS = {
    "lstm-88d40a7f7d55": {  # h200-timing/lstm--baseline.json: 11 knobs
        "workload": "lstm", "params": {"batch_size": 128, "seq_len": 128, "vocab": 10000, "lr": 1.0},
        "knobs": {"precision": "fp32", "channels_last": False, "loader": "torch", "num_workers": 0, "pin_memory": False,
                  "prefetch_factor": 2, "persistent_workers": False, "copy": "blocking", "compile": False,
                  "sync_every": 1, "cudnn_benchmark": False}},
    "resnet50-b44153515234": {  # h200-captures/resnet50-tf32-nsys: every knob of today
        "workload": "resnet50", "params": {"batch_size": 256, "image_size": 224, "lr": 0.02},
        "knobs": {"precision": "tf32", "channels_last": False, "loader": "torch", "num_workers": 0, "pin_memory": False,
                  "prefetch_factor": 2, "persistent_workers": False, "copy": "blocking", "compile": False,
                  "sync_every": 1, "cudnn_benchmark": False, "fused_optimizer": False, "compile_optimizer": False,
                  "eager_pooling": False, "dali_hw_decoder_load": 0.65, "dali_jpeg_buffers": False, "ddp": 0,
                  "sdpa_backend": "auto", "batch_scale": 1}},
    "resnet50-9e92dd8fd884": {  # h200-captures/resnet50-bf16-graphs-nsys: DALI, workers, CUDA graphs
        "workload": "resnet50", "params": {"batch_size": 256, "image_size": 224, "lr": 0.02},
        "knobs": {"precision": "amp-bf16", "channels_last": True, "loader": "dali", "num_workers": 8,
                  "pin_memory": True, "prefetch_factor": 2, "persistent_workers": True, "copy": "async",
                  "compile": "reduce-overhead", "sync_every": 10, "cudnn_benchmark": True, "fused_optimizer": False,
                  "compile_optimizer": False, "dali_hw_decoder_load": 0.65, "ddp": 0, "sdpa_backend": "auto",
                  "batch_scale": 1}},
    "transformer_lm-f877a95cd10d": {  # h200-repeats/transformer_lm--optimized+bf16--rep1.json
        "workload": "transformer_lm", "params": {"batch_size": 128, "seq_len": 128, "vocab": 10000, "lr": 0.05},
        "knobs": {"precision": "amp-bf16", "channels_last": False, "loader": "torch", "num_workers": 8,
                  "pin_memory": True, "prefetch_factor": 2, "persistent_workers": True, "copy": "async",
                  "compile": "default", "sync_every": 10, "cudnn_benchmark": True, "fused_optimizer": False,
                  "dali_hw_decoder_load": 0.65, "ddp": 0, "sdpa_backend": "auto"}},
}


@pytest.mark.parametrize("key", list(SPECS))
def test_a_records_compile_cache_key_is_unchanged(key):
    assert compiled.cache_key(SPECS[key]) == key


def test_a_spec_with_the_knobs_added_since_keys_the_compile_stages_real_folder():
    """The compile stage's record of that cell (tests/data/h200-compiles) is named by the folder it built."""
    spec = SPECS["transformer_lm-f877a95cd10d"]
    key = compiled.cache_key({**spec, "knobs": {**defaults(), **spec["knobs"]}})
    assert key == "transformer_lm-a2818f8f38ca"
    record = json.loads((config.ROOT / "tests" / "data" / "h200-compiles" / f"{key}.json").read_text())
    assert record["key"] == key and record["cell"]["variant"] == "optimized+bf16"
