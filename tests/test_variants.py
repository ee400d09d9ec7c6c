"""Variants are expanded from config data; a knob that cannot act makes the cell skipped, with why."""
import re

import pytest

import workloads
from trainperf import config, variants
from trainperf.variants import Machine

GPU, CPU = Machine("gpu", cuda=True), Machine("cpu", cuda=False)


@pytest.fixture(scope="module")
def cfg():
    return config.load()


def resolve(cfg, name, workload, machine=GPU):
    return variants.resolve(name, workloads.get(workload), cfg, machine)


def test_names_follow_the_fixes(cfg):
    names = variants.names(cfg)
    assert names[0] == "baseline" and "optimized" in names
    assert {f"optimized-no-{f}" for f in cfg["fixes"]} <= set(names)


def test_single_fix_changes_only_its_knobs(cfg):
    knobs, reason = resolve(cfg, "amp", "resnet50")
    diff = {k for k in knobs if knobs[k] != cfg["baseline"][k]}
    assert reason is None and diff == {"precision"} and knobs["precision"] == "amp-fp16"


def test_optimized_applies_every_applicable_fix(cfg):
    knobs, _ = resolve(cfg, "optimized", "resnet50")
    for fix in cfg["fixes"].values():
        assert all(knobs[k] == v for k, v in fix.items())
    lstm, _ = resolve(cfg, "optimized", "lstm")
    assert lstm["loader"] == "torch" and lstm["channels_last"] is False and lstm["num_workers"] == 8


@pytest.mark.parametrize("variant,workload,pattern", [
    ("channels-last", "lstm", "channels_last applies to CNNs; lstm is not one"),
    ("channels-last", "vit_b_16", "vit_b_16 is not one"),
    ("dali", "lstm", "DALI decodes images; lstm reads tokens"),
    ("optimized-no-dali", "lstm", "same as optimized: DALI decodes images"),
    ("optimized+hw-jpeg", "lstm", "DALI decodes images; lstm reads tokens"),
    ("optimized+bf16-graphs-hw-jpeg", "transformer_lm", "DALI decodes images; transformer_lm reads tokens"),
    ("optimized+flash-attention", "resnet50", "sdpa_backend applies to models with attention; resnet50 has none"),
    # DALI hands over batches on the GPU, so pinning and the side-stream copy cannot act there
    ("optimized-no-pinned-async", "resnet50", "same as optimized here: pinned-async has no effect"),
])
def test_inapplicable_knob_skips_the_cell(cfg, variant, workload, pattern):
    knobs, reason = resolve(cfg, variant, workload)
    assert knobs is None and pattern in reason


def test_cpu_machine_skips_cuda_knobs_and_preset_disabled_ones(cfg):
    assert "needs a CUDA GPU" in resolve(cfg, "pinned-async", "resnet50", CPU)[1]
    assert "compile is off in the cpu preset" in resolve(cfg, "compile", "resnet50", CPU)[1]
    knobs, _ = resolve(cfg, "optimized", "resnet50", CPU)
    assert knobs["compile"] is False and knobs["copy"] == "blocking" and knobs["num_workers"] == 2


def test_ablation_leaves_exactly_one_fix_out(cfg):
    opt, _ = resolve(cfg, "optimized", "resnet50")
    knobs, _ = resolve(cfg, "optimized-no-amp", "resnet50")
    assert {k for k in opt if opt[k] != knobs[k]} == {"precision"} and knobs["precision"] == "fp32"


def test_an_ablation_that_changes_nothing_says_which_knobs_cannot_act_and_why(cfg):
    knobs, reason = resolve(cfg, "optimized-no-pinned-async", "resnet50")
    assert knobs is None and reason == ("same as optimized here: pinned-async has no effect with the other fixes on "
                                        "(pin_memory, copy: DALI on a GPU hands over batches already there: "
                                        "no host batch to pin or copy)")


def test_unknown_variant_lists_the_known_ones(cfg):
    with pytest.raises(KeyError, match="unknown variant 'fast'; known: baseline, workers"):
        resolve(cfg, "fast", "resnet50")


def test_stages_add_the_fixes_of_the_chain_in_order(cfg):
    chain = cfg["chains"]["stages"]["fixes"]
    knobs, reason = resolve(cfg, f"upto-{chain[2]}", "resnet50")
    expected = dict(cfg["baseline"])
    for f in chain[:3]:
        expected.update(cfg["fixes"][f])
    assert reason is None and knobs == expected
    assert resolve(cfg, f"upto-{chain[0]}", "resnet50") == (None, f"same knobs as {chain[0]} here")
    assert variants.in_scope(cfg, "resnet50", "upto-amp") and not variants.in_scope(cfg, "lstm", "upto-amp")
    assert variants.in_scope(cfg, "lstm", "amp")


def test_profilers_observe_the_cells_the_preset_names_and_ncu_needs_nsys():
    from trainperf import matrix
    cfg = matrix.resolve(config.load(overrides={"preset": "gpu"}))
    cfg.update(cuda=True, tools={"nsys": "true", "ncu": "true"})  # tools found on PATH
    cfg["presets"]["gpu"]["profile"] = {"nsys": {"variants": ["baseline"]}, "ncu": {"variants": ["baseline", "amp"]}}
    cells = {(c["keys"]["workload"], c["keys"]["variant"], c["keys"]["profiler"], c["keys"]["rep"]): c
             for c in matrix.cells(cfg)}
    assert ("lstm", "baseline", "nsys", 0) in cells and ("lstm", "amp", "nsys", 0) not in cells
    assert ("lstm", "baseline", "nsys", 1) not in cells  # profilers observe one repetition
    assert ("lstm", "baseline", "timing", 2) in cells
    assert cells[("lstm", "baseline", "ncu", 0)]["spec"]["timeline"].endswith("lstm/baseline/nsys/rep0/metrics.json")
    assert "nsys timeline" in cells[("lstm", "amp", "ncu", 0)]["reason"]


def test_an_unknown_fix_in_a_chain_is_one_clear_error():
    from trainperf import matrix
    cfg = config.load(overrides={"chains": {"stages": {"workloads": ["resnet50"], "fixes": ["workers", "turbo"]}}})
    with pytest.raises(config.ConfigError, match="chains.stages.fixes: unknown name 'turbo'; known: workers"):
        matrix.resolve(cfg)


def test_an_article_chain_names_its_stages_and_a_step_chain_runs_under_its_profiler_only(cfg):
    """a002's second stage adds the metric read every 10 steps to its first (8 workers, the same
    cell as the `workers` fix); the ladder's stages are step-alone cells, in every repetition."""
    from trainperf import matrix
    knobs, reason = resolve(cfg, "a002-upto-lazy-sync", "resnet50")
    assert reason is None and knobs == {**cfg["baseline"], **cfg["fixes"]["workers"], **cfg["fixes"]["lazy-sync"]}
    assert resolve(cfg, "a002-upto-workers", "resnet50") == (None, "same knobs as workers here")
    assert variants.in_scope(cfg, "resnet50", "ladder-upto-amp", "step")
    assert not variants.in_scope(cfg, "resnet50", "ladder-upto-amp", "timing")
    gpu = matrix.resolve(config.load(overrides={"preset": "gpu", "workloads": ["resnet50"]}))
    ladder = [c["keys"] for c in matrix.cells(gpu) if c["keys"]["variant"] == "ladder-upto-amp"]
    assert {(k["profiler"], k["rep"]) for k in ladder} == {("step", r) for r in range(3)}


def test_a_chain_stage_asked_without_the_variant_it_equals_is_measured_by_that_variant():
    """variants=[baseline, a002-upto-workers]: the stage is the workers cell, which was not asked
    for; each repetition measures workers (once, before the stage's skip), so the chain's first
    step pairs; asked for, workers is not added twice."""
    from trainperf import matrix
    def keys(asked):
        c = matrix.resolve(config.load(overrides={"preset": "headline", "workloads": ["resnet50"], "variants": asked,
                                                  "profilers": ["timing"]}))
        c["cuda"] = True
        return [(x["keys"]["variant"], x["keys"]["rep"], x["status"]) for x in matrix.cells(c)]
    assert keys(["baseline", "a002-upto-workers"])[:3] == [("baseline", 0, "run"), ("workers", 0, "run"),
                                                          ("a002-upto-workers", 0, "skipped")]
    assert [k for k in keys(["baseline", "a002-upto-workers"]) if k[0] == "workers"] == [("workers", r, "run") for r in range(3)]
    assert keys(["workers", "a002-upto-workers"])[:2] == [("workers", 0, "run"), ("a002-upto-workers", 0, "skipped")]


def test_a_tuning_lever_is_measured_on_top_of_optimized(cfg):
    opt, _ = resolve(cfg, "optimized", "resnet50")
    knobs, reason = resolve(cfg, "optimized+cuda-graphs", "resnet50")
    assert reason is None and {k for k in opt if opt[k] != knobs[k]} == {"compile"}
    assert knobs["compile"] == "reduce-overhead"
    assert "needs a CUDA GPU" in resolve(cfg, "optimized+cuda-graphs", "resnet50", Machine("gpu", cuda=False))[1]
    knobs, _ = resolve(cfg, "optimized+fused-sgd", "lstm", CPU)
    assert knobs["fused_optimizer"] is True and knobs["num_workers"] == 2
    # attention kernels: flash and math exist on a CPU, cuDNN's need CUDA
    assert resolve(cfg, "optimized+flash-attention", "vit_b_16", CPU)[0]["sdpa_backend"] == "flash"
    assert "needs a CUDA GPU" in resolve(cfg, "optimized+cudnn-attention", "vit_b_16", CPU)[1]
    assert resolve(cfg, "optimized+cudnn-attention", "transformer_lm")[0]["sdpa_backend"] == "cudnn"


def test_data_parallel_variants_need_as_many_gpus_as_processes(cfg):
    opt, _ = resolve(cfg, "optimized", "resnet50")
    knobs, reason = resolve(cfg, "ddp2", "resnet50", Machine("gpu", cuda=True, gpus=2))
    assert reason is None and knobs == {**opt, "ddp": 2}
    assert resolve(cfg, "ddp4", "resnet50", Machine("gpu", cuda=True, gpus=2)) == (
        None, "ddp4 needs 4 GPUs; this machine has 2")
    assert resolve(cfg, "ddp8", "resnet50", GPU)[1] is None  # a cluster's nodes: not known here
    assert resolve(cfg, "ddp2", "resnet50", CPU)[0]["ddp"] == 2  # gloo processes on the CPU
    assert variants.in_scope(cfg, "resnet50", "ddp2") and not variants.in_scope(cfg, "lstm", "ddp2")


def test_ddp_of_one_process_is_a_config_error():
    bad = config.load()
    bad["baseline"]["ddp"] = 1
    with pytest.raises(config.ConfigError, match="baseline.ddp"):
        config.validate(bad)


def test_a_batch_lever_scales_the_cells_batch_and_nothing_else():
    from trainperf import matrix
    cfg = matrix.resolve(config.load(overrides={"gpu_jobs": True, "machine": "h200", "preset": "gpu"}))
    opt, big = (matrix.cell(cfg, "lstm", v)["spec"] for v in ("optimized", "optimized+bf16-batch2x"))
    assert big["params"] == {**opt["params"], "batch_size": 2 * opt["params"]["batch_size"]}
    assert {k for k in opt["knobs"] if opt["knobs"][k] != big["knobs"][k]} == {"precision", "batch_scale"}


def test_the_ceilings_measure_as_many_steps_as_timing_and_the_tracers_fewer():
    """The loader alone and the step alone are set against timing's throughput: a short window
    (a few 9 ms LSTM steps) would understate them by the queue's fill and the final sync."""
    from trainperf import matrix
    cfg = matrix.resolve(config.load(overrides={"gpu_jobs": True, "machine": "h200", "preset": "gpu"}))
    preset = cfg["presets"]["gpu"]
    steps = {p: matrix.cell(cfg, "resnet50", "optimized", p)["spec"]["measured_steps"]
             for p in ("timing", "input", "step", "torch", "nsys")}
    assert steps == {"timing": preset["measured_steps"], "input": preset["measured_steps"],
                     "step": preset["measured_steps"], "torch": preset["profiled_steps"],
                     "nsys": preset["profiled_steps"]} and preset["profiled_steps"] < preset["measured_steps"]


def test_the_jpeg_buffer_lever_needs_dalis_gpu_decoder(cfg):
    opt, _ = resolve(cfg, "optimized", "resnet50")
    knobs, reason = resolve(cfg, "optimized+jpeg-buffers", "resnet50")
    assert reason is None and {k for k in opt if opt[k] != knobs[k]} == {"dali_jpeg_buffers"}
    assert resolve(cfg, "optimized+jpeg-buffers", "lstm")[1] == "DALI decodes images; lstm reads tokens"
    assert "needs a CUDA GPU" in resolve(cfg, "optimized+jpeg-buffers", "resnet50", CPU)[1]
    # without DALI (optimized-no-dali) the knob cannot act: the same knobs as that variant
    no_dali, _ = resolve(cfg, "optimized-no-dali", "resnet50")
    assert variants.effective({**no_dali, "dali_jpeg_buffers": True}, cfg["baseline"], GPU) == \
        variants.effective(no_dali, cfg["baseline"], GPU)


def test_eager_pooling_needs_a_cnn_and_something_compiled(cfg):
    opt, _ = resolve(cfg, "optimized", "resnet50")
    knobs, reason = resolve(cfg, "optimized+eager-pool", "resnet50")
    assert reason is None and {k for k in opt if opt[k] != knobs[k]} == {"eager_pooling"}
    assert resolve(cfg, "optimized+eager-pool", "vit_b_16")[1] == "eager_pooling applies to CNNs' max-pooling; vit_b_16 has none"
    assert resolve(cfg, "optimized+eager-pool", "resnet50", CPU)[1] == "same knobs as optimized here"  # compile is off there


def _folded(text: str) -> str:
    """Lower case, letters and digits only: 'ResNet-50' and 'resnet50' read alike."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


@pytest.mark.parametrize("preset,cuda", [("cpu", False), ("gpu", False), ("gpu", True)])
def test_every_skip_reason_is_about_the_workload_it_skips(preset, cuda):
    """A reason that the preset gives every workload, or a workload its own, names no other
    workload's model (the cpu preset's AMP reason once spoke of ResNet-50 for all four)."""
    from trainperf import matrix
    cfg = matrix.resolve(config.load(overrides={"preset": preset, "gpu_jobs": cuda, "machine": "test"}))
    models = {name: {_folded(name), _folded(workloads.get(name).__name__)} for name in workloads.names()}
    for c in matrix.cells(cfg):
        own = c["keys"]["workload"]
        others = set().union(*(m for name, m in models.items() if name != own)) - models[own]
        named = [m for m in others if c["reason"] and m in _folded(c["reason"])]
        assert not named, f"{own}/{c['keys']['variant']}: {c['reason']!r} names {named}"


def test_what_the_machine_lacks_comes_before_what_the_preset_leaves_off(cfg):
    """tf32 on a CPU: the reason is the missing GPU, not the cpu preset's reason for AMP."""
    assert resolve(cfg, "tf32", "resnet50", CPU)[1] == "precision=tf32 needs a CUDA GPU; this machine has none"
    assert "precision is off in the cpu preset" in resolve(cfg, "amp", "transformer_lm", CPU)[1]


def test_a_grid_is_a_variant_per_combination_on_optimized_with_its_sizes():
    """lstm-shape: one variant per (batch, sequence length), optimized's knobs with those sizes; the
    cell's params carry them (so does the compile-cache key) and only the grid's workloads run it."""
    from trainperf import matrix
    cfg = matrix.resolve(config.load(overrides={"gpu_jobs": True, "machine": "h200", "preset": "gpu"}))
    grid = cfg["grids"]["lstm-shape"]["knobs"]
    points = [v for v in variants.names(cfg) if v.startswith("lstm-shape-")]
    assert len(points) == len(grid["batch_size"]) * len(grid["seq_len"])
    opt = matrix.cell(cfg, "lstm", "optimized")["spec"]
    cell = matrix.cell(cfg, "lstm", "lstm-shape-batch_size32-seq_len512")["spec"]
    assert cell["params"] == {**opt["params"], "batch_size": 32, "seq_len": 512}
    assert {k for k in opt["knobs"] if opt["knobs"][k] != cell["knobs"][k]} == {"batch_size", "seq_len"}
    assert variants.in_scope(cfg, "lstm", points[0]) and not variants.in_scope(cfg, "resnet50", points[0])
    kinds = {c["variant"]: c for c in variants.catalog(cfg)}
    assert kinds[points[0]]["kind"] == "grid" and kinds[points[0]]["chain"] == "lstm-shape"
    assert kinds["lstm-shape-batch_size32-seq_len512"]["about"] == "batch_size=32 seq_len=512"


def test_a_size_knob_acts_where_the_workload_has_that_size():
    cfg = config.load()
    assert "applies to sequence models; resnet50 reads images" in variants.knob_reason(
        "seq_len", 64, workloads.get("resnet50"), cfg, GPU)
    assert variants.knob_reason("seq_len", 64, workloads.get("lstm"), cfg, GPU) is None


@pytest.mark.parametrize("grid,message", [
    ({"workloads": ["lstm"], "knobs": {"batch_size": [32, -1]}}, r"grids.g.knobs.batch_size: -1 is not allowed"),
    ({"workloads": ["lstm"], "knobs": {"precision": ["fp8"]}}, r"grids.g.knobs.precision: 'fp8' is not allowed"),
    ({"workloads": ["gpt"], "knobs": {"batch_size": [32]}}, r"grids.g.workloads: unknown name 'gpt'"),
])
def test_a_bad_grid_is_one_clear_error(grid, message):
    from trainperf import matrix
    with pytest.raises(config.ConfigError, match=message):
        matrix.resolve(config.load(overrides={"grids": {**config.load()["grids"], "g": grid}}))


def test_a_grid_point_larger_than_the_dataset_is_caught_before_anything_runs():
    from trainperf import matrix
    grids = {**config.load()["grids"], "g": {"workloads": ["lstm"], "knobs": {"seq_len": [90000]}}}
    cfg = config.load(overrides={"grids": grids,
                                 "workloads": ["lstm"], "variants": ["g-seq_len90000"]})
    with pytest.raises(config.ConfigError, match=r"\(variant g-seq_len90000\) makes a step of 8 samples, more than the 1"):
        matrix.resolve(cfg)
