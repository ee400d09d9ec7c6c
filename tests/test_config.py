"""A bad config fails with one line naming the key and what is allowed."""
import pytest

from trainperf import config, matrix
from trainperf.config import ConfigError


def _load(**overrides):
    return config.load(overrides=overrides)


def test_shipped_config_is_valid():
    c = _load()
    assert c["baseline"]["precision"] == "fp32" and c["presets"]["gpu"]["repetitions"] >= 3


@pytest.mark.parametrize("overrides,pattern", [
    ({"profilers": ["perf"]}, r"config error at profilers\.0: 'perf' is not one of \['timing'"),
    ({"fixes": {"amp": {"precision": "fp8"}}}, r"at fixes\.amp\.precision: 'fp8' is not one of"),
    ({"fixes": {"amp": {"precison": "amp-fp16"}}}, r"at fixes\.amp: unknown key\(s\) \['precison'\]; allowed: .*'precision'"),
    ({"seed": "zero"}, r"config error at seed: 'zero' is not of type 'integer'"),
    ({"baseline": {"compile": "fast"}}, r"at baseline\.compile: 'fast' is not allowed; allowed: \[False, \['default'"),
    ({"baseline": {"turbo": True}}, r"at baseline: unknown key\(s\) \['turbo'\]; allowed: \['batch_scale'"),
    ({"bogus": 1}, r"config error at \(top level\): unknown key\(s\) \['bogus'\]"),
    ({"predictions": {"bf16-grahps": "faster"}}, r"at predictions: \['bf16-grahps'\] name no lever under tuning; levers: "
                                                  r"\['batch400', 'bf16'"),
    ({"predictions": {"bf16": 1.1}}, r"at predictions\.bf16: 1\.1 is not of type 'string'"),
])
def test_bad_value_names_the_key(overrides, pattern):
    with pytest.raises(ConfigError, match=pattern):
        _load(**overrides)


def test_bad_preset_value_names_the_nested_key():
    c = _load()
    c["presets"]["gpu"]["repetitions"] = 0
    with pytest.raises(ConfigError, match=r"at presets\.gpu\.repetitions: 0 is less than the minimum of 1"):
        config.validate(c)


@pytest.mark.parametrize("key,value,pattern", [
    ("workloads", ["resnet50", "alexnet"], r"unknown workload 'alexnet'; known: lstm, resnet50"),
    ("variants", ["turbo"], r"unknown variant 'turbo'; known: baseline, workers"),
])
def test_unknown_names_list_the_known_ones(key, value, pattern):
    with pytest.raises(ConfigError, match=pattern):
        matrix.resolve(_load(**{key: value}))


def test_missing_or_empty_real_dataset_stops_the_pipeline_before_any_run(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    empty = tmp_path / "empty"
    empty.mkdir()
    root = Path(__file__).resolve().parent.parent
    for path, message in ((tmp_path / "nope", "does not exist"), (empty, "holds no .jpg files")):
        out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--config",
                              f"datasets={{resnet50: {path}}}"], cwd=root, capture_output=True, text=True, timeout=300)
        assert out.returncode != 0 and f"trainperf: dataset {path} {message}" in out.stdout + out.stderr


def test_gpu_jobs_declares_gpu_nodes_behind_a_login_node():
    from trainperf import matrix
    cfg = matrix.resolve(config.load(overrides={"gpu_jobs": True, "machine": "h200", "tools": {"nsys": "not-on-this-host"}}))
    assert cfg["preset"] == "gpu" and cfg["cuda"] is True
    cell = matrix.cell(cfg, "resnet50", "pinned-async", "nsys")  # CUDA-only knobs and tools: for the nodes to run
    assert cell["status"] == "run", cell["reason"]
    with pytest.raises(config.ConfigError, match="machine: name the GPU nodes' machine"):
        matrix.resolve(config.load(overrides={"gpu_jobs": True}))


def test_missing_config_file_is_one_line_naming_it(tmp_path, capsys):
    from trainperf import cli
    missing = tmp_path / "nope.yaml"
    assert cli.main(["matrix", "--config", str(missing)]) == 2
    assert capsys.readouterr().err == f"trainperf: [Errno 2] No such file or directory: '{missing}'\n"


def test_pending_lists_the_cells_without_a_record_each_with_why(tmp_path, monkeypatch):
    """What `aggregate --skipped` takes for a machine whose matrix ran in part: the cells the
    matrix skips there, with their reasons, and the cells with no record yet, with --reason."""
    import json
    from trainperf import cli
    shipped = str(config.CONFIG)  # absolute: the test runs in another folder
    monkeypatch.chdir(tmp_path)
    done = tmp_path / "runs" / "box" / "resnet50" / "baseline" / "timing" / "rep0" / "metrics.json"
    done.parent.mkdir(parents=True)
    done.write_text("{}")
    for folder, variant in (("aside", "lazy-sync"), ("warm", "channels-last")):
        aside = tmp_path / folder / "resnet50" / variant / "timing" / "rep0" / "metrics.json"
        aside.parent.mkdir(parents=True)
        aside.write_text("{}")
    assert cli.main(["pending", "--machine", "box", "--gpus", "0", "--reason", "not run yet",
                     "--aside", "aside", "ran with a stale cache", "--aside", "warm", "timed a compile",
                     "--config", shipped, "--out", "pending.json"]) == 0
    pending = json.loads((tmp_path / "pending.json").read_text())
    reasons = {tuple(c["keys"][k] for k in ("workload", "variant", "profiler", "rep")): c["reason"] for c in pending}
    assert sorted(c["keys"]["variant"] for c in pending if c.get("status") == "set aside") == ["channels-last", "lazy-sync"]
    assert reasons[("resnet50", "channels-last", "timing", 0)] == "timed a compile"
    assert ("resnet50", "baseline", "timing", 0) not in reasons
    assert reasons[("resnet50", "workers", "timing", 0)] == "not run yet"
    assert reasons[("resnet50", "lazy-sync", "timing", 0)] == "ran with a stale cache"
    assert reasons[("lstm", "dali", "timing", 0)] == "DALI decodes images; lstm reads tokens"
    assert reasons[("resnet50", "compile", "timing", 0)].startswith("compile is off in the cpu preset")


@pytest.mark.parametrize("where,value,pattern", [
    (("cpu", "workloads", "resnet50"), {"batch_size": -8}, r"presets\.cpu\.workloads\.resnet50\.batch_size: -8 must be greater than 0"),
    (("cpu", "workloads", "resnet50"), {"batch_size": 0}, r"batch_size: 0 must be greater than 0"),
    (("cpu", "workloads", "resnet50"), {"batch_size": 2.5}, r"batch_size: 2\.5 is not an integer"),
    (("cpu", "workloads", "resnet50"), {"batch_sise": 8}, r"batch_sise: unknown size; resnet50 has batch_size, image_size, lr"),
    (("cpu", "workloads", "resnet50"), {"batch_size": 4096}, r"batch_size: 4096 makes a step of 4096 samples, more than the 48"),
    (("cpu", "workloads", "alexnet"), {"batch_size": 8}, r"presets\.cpu\.workloads: unknown name 'alexnet'"),
    (("gpu", "profile", "nsys"), {"variants": ["baseline", "turbo"]}, r"presets\.gpu\.profile\.nsys\.variants: unknown name 'turbo'"),
    (("cpu", "profile", "torch"), {"workloads": ["alexnet"]}, r"presets\.cpu\.profile\.torch\.workloads: unknown name 'alexnet'"),
    # a profiled variant outside the preset's own variants would never be observed
    (("headline", "profile", "ncu"), {"variants": ["amp-bf16"]},
     r"presets\.headline\.profile\.ncu\.variants: not among the preset's variants: 'amp-bf16'"),
    # ncu reads its kernels from the same cell's nsys timeline
    (("gpu", "profile", "ncu"), {"variants": ["amp-bf16"]}, r"presets\.gpu\.profile\.ncu\.variants: not observed by nsys too"),
    (("gpu", "profile", "ncu"), {"variants": ["baseline"], "repeat": True}, r"presets\.gpu\.profile\.ncu\.repeat: ncu repeats"),
    (("headline", "profile", "ncu"), {"variants": ["baseline"], "workloads": ["resnet50", "lstm"], "repeat": ["resnet50", "lstm"]},
     r"presets\.headline\.profile\.ncu\.repeat: ncu repeats \['resnet50', 'lstm'\], nsys \['resnet50'\]"),
    (("headline", "profile", "torch"), {"repeat": ["alexnet"]}, r"presets\.headline\.profile\.torch\.repeat: unknown name 'alexnet'"),
    (("headline", "profile", "torch"), {"workloads": ["resnet50"], "repeat": ["lstm"]},
     r"presets\.headline\.profile\.torch\.repeat: not among the workloads torch observes: 'lstm'"),
])
def test_every_value_a_cell_uses_is_checked_before_anything_runs(where, value, pattern):
    c = _load(preset="cpu")
    preset, section, name = where
    c["presets"][preset].setdefault(section, {})[name] = value
    with pytest.raises(ConfigError, match=pattern):
        matrix.resolve(c)


def test_a_preset_with_more_classes_than_images_is_refused():
    c = _load(preset="cpu")
    c["presets"]["cpu"]["classes"] = 100
    with pytest.raises(ConfigError, match=r"presets\.cpu\.classes: 100 classes need at least as many images, not 48"):
        matrix.resolve(c)


def test_an_unknown_preset_names_the_presets():
    with pytest.raises(ConfigError, match=r"preset: 'tpu' is not one of the presets: cpu, gpu, headline"):
        matrix.resolve(_load(preset="tpu"))



def test_a_profiler_repeats_the_workloads_its_repeat_lists_and_observes_the_others_once():
    """The headline's traces: ResNet-50's in every repetition (claims read their values), the LSTM's once."""
    c = matrix.resolve(config.load(overrides={"gpu_jobs": True, "machine": "h100", "preset": "headline"}))
    reps = {}
    for cell in matrix.cells({**c, "gpus": 1}):
        k = cell["keys"]
        if k["profiler"] in ("nsys", "ncu") and k["variant"] == "baseline":
            reps.setdefault((k["workload"], k["profiler"]), set()).add(k["rep"])
    assert reps[("resnet50", "nsys")] == reps[("resnet50", "ncu")] == {0, 1, 2}
    assert reps[("lstm", "nsys")] == reps[("lstm", "ncu")] == {0}


def test_ncu_may_repeat_every_workload_it_observes_where_nsys_repeats_each_of_them():
    c = _load(preset="cpu")
    c["presets"]["headline"]["profile"]["ncu"]["repeat"] = True  # ncu observes resnet50 and lstm; nsys repeats resnet50
    with pytest.raises(ConfigError, match=r"ncu repeats \['resnet50', 'lstm'\], nsys \['resnet50'\]"):
        matrix.resolve(c)
    c["presets"]["headline"]["profile"]["nsys"]["repeat"] = ["resnet50", "lstm"]
    matrix.resolve(c)
