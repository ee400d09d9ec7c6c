"""Variants are data: the baseline's knobs plus the fixes of config.yaml. This module expands them
into named variants and decides, for one workload on one machine, each variant's knobs or why
it is skipped. It is the one place where knob applicability is decided."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from workloads.base import Workload
from workloads.knobs import INERT, KNOBS


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


def stage_name(chain: str, step: str) -> str:
    """A chain's stage: upto-<step> for the `stages` chain, <chain>-upto-<step> for the others."""
    return f"upto-{step}" if chain == "stages" else f"{chain}-upto-{step}"


def stages(config: dict) -> dict[str, tuple[str, int]]:
    """Every chain stage's variant name -> (its chain, its place in the chain)."""
    return {stage_name(c, s): (c, i) for c, spec in config.get("chains", {}).items() for i, s in enumerate(spec["fixes"])}


def grid_points(config: dict) -> dict[str, tuple[str, dict]]:
    """Every grid's variant name -> (its grid, its point): each combination of the grid's knob values,
    named <grid>-<knob><value>-..., e.g. lstm-shape-batch_size32-seq_len128."""
    points = {}
    for grid, spec in config.get("grids", {}).items():
        for values in itertools.product(*spec["knobs"].values()):
            point = dict(zip(spec["knobs"], values))
            points[f"{grid}-" + "-".join(f"{k}{v}" for k, v in point.items())] = (grid, point)
    return points


def names(config: dict) -> list[str]:
    """Every variant name in matrix order: baseline, fixes, extras, optimized, tuning levers,
    ablations, chain stages, grid points, data-parallel scaling."""
    fx = list(config["fixes"])
    return ["baseline", *fx, *config.get("extra_variants", {}), "optimized",
            *(f"optimized+{lever}" for lever in config.get("tuning", {})), *(f"optimized-no-{f}" for f in fx),
            *stages(config), *grid_points(config), *(f"ddp{n}" for n in config.get("scaling", {}).get("processes", []))]


def in_scope(config: dict, workload: str, variant: str, profiler: str = "timing") -> bool:
    """A chain's stages run for the workloads (and under the profilers, where it names them) of
    its chain, the data-parallel variants for those `scaling` names; the rest everywhere."""
    if variant in stages(config):
        chain = config["chains"][stages(config)[variant][0]]
        return workload in chain["workloads"] and profiler in chain.get("profilers", [profiler])
    if variant in grid_points(config):
        return workload in config["grids"][grid_points(config)[variant][0]]["workloads"]
    if variant.startswith("ddp"):
        return workload in config.get("scaling", {}).get("workloads", [])
    return True


def steps(config: dict) -> dict[str, dict]:
    """What a chain step may name: a fix, an extra variant or a tuning lever (their knobs)."""
    return {**config["fixes"], **config.get("extra_variants", {}), **config.get("tuning", {})}


def stage_knobs(name: str, base: dict, applicable: dict[str, dict], config: dict) -> dict:
    """A chain's stage: the baseline with every applicable step of its chain up to this one applied, in order."""
    chain, i = stages(config)[name]
    knobs = dict(base)
    for step in config["chains"][chain]["fixes"][: i + 1]:
        knobs.update(applicable.get(step, {}))
    return knobs


def knob_reason(knob: str, value, workload: type[Workload], config: dict, machine: Machine) -> str | None:
    """Why setting `knob` to `value` (away from the baseline) cannot be measured here, or None: the
    workload's own limit first, then what the machine lacks, then what the preset leaves off."""
    if value == config["baseline"][knob]:
        return None
    reason = workload.knob_reason(knob, value, machine.cuda)
    if reason:
        return reason
    if KNOBS[knob].needs_cuda(value) and not machine.cuda:
        return f"{knob}={value} needs a CUDA GPU; this machine has none"
    # a preset's reason is given for every workload: it must not speak of one model
    disabled = config["presets"][machine.preset].get("disabled", {})
    if knob in disabled:
        return f"{knob} is off in the {machine.preset} preset: {disabled[knob]}"
    return None


def _reason(knobs: dict, workload, config, machine) -> str | None:
    return next((r for k, v in knobs.items() if (r := knob_reason(k, v, workload, config, machine))), None)


def effective(knobs: dict, baseline: dict, machine: Machine) -> dict:
    """The knobs with the ones that cannot act (the table's `acts`) reset to the baseline, to find
    identical variants."""
    return {name: value if KNOBS[name].acts(knobs, machine.cuda) else baseline[name]
            for name, value in knobs.items()}


def stage(name: str, workload, config: dict, machine: Machine, earlier: dict) -> tuple[dict | None, str | None]:
    """A chain's stage, skipped where it has the knobs of an earlier variant (`earlier`, name ->
    knobs) or an earlier stage of its chain, the nearest first; a chain that names its profilers is
    compared within itself only. A step that cannot act here (a reason) is left out."""
    chain, i = stages(config)[name]
    usable = {s: k for s, k in steps(config).items() if not _reason(k, workload, config, machine)}
    knobs = stage_knobs(name, config["baseline"], usable, config)
    before = [stage_name(chain, s) for s in reversed(config["chains"][chain]["fixes"][:i])]
    candidates = {s: stage_knobs(s, config["baseline"], usable, config) for s in before}
    candidates = {"baseline": config["baseline"], **({} if "profilers" in config["chains"][chain] else earlier),
                  **candidates}
    base = config["baseline"]
    same = next((e for e, k in candidates.items() if effective(k, base, machine) == effective(knobs, base, machine)), None)
    return (None, f"same knobs as {same} here") if same else (knobs, None)


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
    if name in stages(config):
        return stage(name, workload, config, machine, {**{f: {**base, **k} for f, k in singles.items()}, "optimized": optimized})
    if name.startswith("optimized+") and name[len("optimized+"):] in config.get("tuning", {}):
        lever = config["tuning"][name[len("optimized+"):]]
        knobs = {**optimized, **lever}
        reason = _reason(lever, workload, config, machine)
        if not reason and effective(knobs, base, machine) == effective(optimized, base, machine):
            reason = "same knobs as optimized here"
        return (None, reason) if reason else (knobs, None)
    if name in grid_points(config):
        grid, point = grid_points(config)[name]
        reason = _reason(point, workload, config, machine)
        on = optimized if config["grids"][grid].get("on", "optimized") == "optimized" else base
        return (None, reason) if reason else ({**on, **point}, None)
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
            why = inert(fx[fix], optimized, machine.cuda)
            return None, f"same as optimized here: {fix} has no effect with the other fixes on" + (f" ({why})" if why else "")
        return knobs, None
    raise KeyError(f"unknown variant {name!r}; known: {', '.join(names(config))}")


def inert(fix: dict, knobs: dict, cuda: bool) -> str:
    """Which of a fix's knobs cannot act among `knobs`, and why: 'pin_memory, copy: <why>'."""
    why: dict[str, list[str]] = {}
    for k in (k for k in fix if not KNOBS[k].acts(knobs, cuda)):
        why.setdefault(INERT.get(KNOBS[k].acts, ""), []).append(k)
    return "; ".join(f"{', '.join(ks)}: {text}" for text, ks in why.items() if text)


def catalog(config: dict) -> list[dict]:
    """Every variant of the config with its kind, its place in the matrix's order and the fix,
    lever or process count it is about: what the tables and the report need of the config."""
    kinds = {"baseline": ("baseline", ""), "optimized": ("optimized", "")}
    kinds |= {f: ("fix", f) for f in config["fixes"]} | {e: ("extra", e) for e in config.get("extra_variants", {})}
    kinds |= {f"optimized+{t}": ("lever", t) for t in config.get("tuning", {})}
    kinds |= {f"optimized-no-{f}": ("ablation", f) for f in config["fixes"]}
    kinds |= {v: ("stage", config["chains"][c]["fixes"][i]) for v, (c, i) in stages(config).items()}
    kinds |= {v: ("grid", " ".join(f"{k}={x}" for k, x in point.items())) for v, (_, point) in grid_points(config).items()}
    kinds |= {f"ddp{n}": ("ddp", str(n)) for n in config.get("scaling", {}).get("processes", [])}
    chain = {v: c for v, (c, _) in stages(config).items()} | {v: g for v, (g, _) in grid_points(config).items()}
    knobs = {**steps(config), **{v: p for v, (_, p) in grid_points(config).items()}}
    predicts = {f"optimized+{t}": p for t, p in config.get("predictions", {}).items()}
    return [{"variant": v, "kind": kinds[v][0], "about": kinds[v][1], "predicts": predicts.get(v, ""),
             "chain": chain.get(v, ""), "order": i,
             "side": side(knobs.get(v if kinds[v][0] == "grid" else kinds[v][1], {}))}
            for i, v in enumerate(names(config))]


def side(knobs: dict) -> str:
    """What a set of knobs speeds up (the knob table's `side`): input, step, both, or '' for none."""
    sides = {KNOBS[k].side for k in knobs}
    return "both" if len(sides) > 1 else next(iter(sides), "")
