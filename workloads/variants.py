"""Variants are data: the baseline's knobs plus the fixes of config.yaml. This module expands them
into named variants and decides, for one workload on one machine, each variant's knobs or why
it is skipped. It is the one place where knob applicability is decided."""
from __future__ import annotations

from dataclasses import dataclass

from workloads.base import Workload

# knob -> values that need a CUDA device to mean anything
CUDA_ONLY = {"precision": {"tf32"}, "cudnn_benchmark": {True}, "pin_memory": {True}, "copy": {"async"},
             "compile": {"reduce-overhead", "max-autotune"},  # these two modes capture CUDA graphs
             "sdpa_backend": {"efficient", "cudnn"}}  # PyTorch's CPU attention has flash and math only
DALI_GPU = ("dali_hw_decoder_load", "dali_jpeg_buffers")  # knobs of DALI's GPU ("mixed") JPEG decoder


@dataclass(frozen=True)
class Machine:
    """What the matrix needs to know about where it runs (gpus: None where it is not known here,
    e.g. the GPU nodes of a cluster)."""
    preset: str
    cuda: bool
    gpus: int | None = None


def fixes(config: dict, preset: str) -> dict[str, dict]:
    """The fixes of config.yaml with the preset's fix_overrides applied."""
    overrides = config["presets"][preset].get("fix_overrides", {})
    return {name: {**knobs, **overrides.get(name, {})} for name, knobs in config["fixes"].items()}


def names(config: dict) -> list[str]:
    """Every variant name in matrix order: baseline, fixes, extras, optimized, tuning levers,
    ablations, stages, data-parallel scaling."""
    fx = list(config["fixes"])
    stages = [f"upto-{f}" for f in config.get("stages", {}).get("fixes", [])]
    return ["baseline", *fx, *config.get("extra_variants", {}), "optimized",
            *(f"optimized+{lever}" for lever in config.get("tuning", {})), *(f"optimized-no-{f}" for f in fx),
            *stages, *(f"ddp{n}" for n in config.get("scaling", {}).get("processes", []))]


def in_scope(config: dict, workload: str, variant: str) -> bool:
    """The stage-by-stage chain (upto-<fix>) and the data-parallel variants (ddp<N>) run for the
    workloads `stages` and `scaling` name; the rest everywhere."""
    for prefix, section in (("upto-", "stages"), ("ddp", "scaling")):
        if variant.startswith(prefix):
            return workload in config.get(section, {}).get("workloads", [])
    return True


def stage_knobs(name: str, base: dict, applicable: dict[str, dict], config: dict) -> dict:
    """upto-<fix>: the baseline with every applicable fix of the chain up to <fix> applied, in order."""
    chain = config["stages"]["fixes"]
    knobs = dict(base)
    for f in chain[: chain.index(name[len("upto-"):]) + 1]:
        knobs.update(applicable.get(f, {}))
    return knobs


def knob_reason(knob: str, value, workload: type[Workload], config: dict, machine: Machine) -> str | None:
    """Why setting `knob` to `value` (away from the baseline) cannot be measured here, or None: the
    workload's own limit first, then what the machine lacks, then what the preset leaves off."""
    if value == config["baseline"][knob]:
        return None
    reason = workload.knob_reason(knob, value, machine.cuda)
    if reason:
        return reason
    if (value in CUDA_ONLY.get(knob, ()) or knob in DALI_GPU) and not machine.cuda:
        return f"{knob}={value} needs a CUDA GPU; this machine has none"
    # a preset's reason is given for every workload: it must not speak of one model
    disabled = config["presets"][machine.preset].get("disabled", {})
    if knob in disabled:
        return f"{knob} is off in the {machine.preset} preset: {disabled[knob]}"
    return None


def _reason(knobs: dict, workload, config, machine) -> str | None:
    return next((r for k, v in knobs.items() if (r := knob_reason(k, v, workload, config, machine))), None)


def effective(knobs: dict, baseline: dict, machine: Machine) -> dict:
    """The knobs with the ones that cannot act reset to the baseline, to find identical variants."""
    k = dict(knobs)
    if k["num_workers"] == 0 or k["loader"] == "dali":
        k.update(prefetch_factor=baseline["prefetch_factor"], persistent_workers=baseline["persistent_workers"])
    if k["loader"] == "dali" and machine.cuda:  # DALI hands over batches already on the GPU
        k.update(pin_memory=baseline["pin_memory"], copy=baseline["copy"])
    if not k["compile"]:  # nothing is compiled that the pooling could stay out of
        k["eager_pooling"] = baseline.get("eager_pooling")
    if k["loader"] != "dali" or not machine.cuda:  # only DALI's GPU ("mixed") decoder has these knobs
        k.update({knob: baseline.get(knob) for knob in DALI_GPU})
    return k


def resolve(name: str, workload: type[Workload], config: dict, machine: Machine) -> tuple[dict | None, str | None]:
    """(knobs, None) for a variant that runs, (None, reason) for one that is skipped."""
    base, fx = config["baseline"], fixes(config, machine.preset)
    singles = {**fx, **config.get("extra_variants", {})}
    applicable = {f: k for f, k in fx.items() if not _reason(k, workload, config, machine)}
    optimized = {**base, **{k: v for knobs in applicable.values() for k, v in knobs.items()}}
    if name == "baseline":
        return dict(base), None
    if name in singles:
        reason = _reason(singles[name], workload, config, machine)
        knobs = {**base, **singles[name]}
        earlier = ["baseline", *list(singles)[:list(singles).index(name)]]
        same = next((e for e in earlier if effective({**base, **singles.get(e, {})}, base, machine)
                     == effective(knobs, base, machine)), None)
        if not reason and same:
            reason = f"same knobs as {same} here"
        return (None, reason) if reason else (knobs, None)
    if name == "optimized":
        return optimized, None
    if name.startswith("upto-") and name[len("upto-"):] in config.get("stages", {}).get("fixes", []):
        knobs = stage_knobs(name, base, applicable, config)
        chain = config["stages"]["fixes"]
        before = reversed(chain[:chain.index(name[len("upto-"):])])  # the nearest earlier stage first
        earlier = {"baseline": base, **{f: {**base, **k} for f, k in singles.items()}, "optimized": optimized,
                   **{f"upto-{f}": stage_knobs(f"upto-{f}", base, applicable, config) for f in before}}
        same = next((e for e, k in earlier.items() if effective(k, base, machine) == effective(knobs, base, machine)), None)
        return (None, f"same knobs as {same} here") if same else (knobs, None)
    if name.startswith("optimized+") and name[len("optimized+"):] in config.get("tuning", {}):
        lever = config["tuning"][name[len("optimized+"):]]
        knobs = {**optimized, **lever}
        reason = _reason(lever, workload, config, machine)
        if not reason and effective(knobs, base, machine) == effective(optimized, base, machine):
            reason = "same knobs as optimized here"
        return (None, reason) if reason else (knobs, None)
    if name.startswith("ddp") and name[3:].isdigit() and int(name[3:]) in config.get("scaling", {}).get("processes", []):
        n = int(name[3:])
        if machine.cuda and machine.gpus is not None and machine.gpus < n:
            return None, f"{name} needs {n} GPUs; this machine has {machine.gpus}"
        return {**optimized, "ddp": n}, None
    if name.startswith("optimized-no-") and name[len("optimized-no-"):] in fx:
        fix = name[len("optimized-no-"):]
        if fix not in applicable:
            return None, f"same as optimized: {_reason(fx[fix], workload, config, machine)}"
        knobs = {**optimized, **{k: base[k] for k in fx[fix]}}
        if effective(knobs, base, machine) == effective(optimized, base, machine):
            return None, f"same as optimized here: {fix} has no effect with the other fixes on"
        return knobs, None
    raise KeyError(f"unknown variant {name!r}; known: {', '.join(names(config))}")
