"""The matrix: workloads x variants x profilers x repetitions, each cell a spec to run or a skip."""
from __future__ import annotations

import re
from pathlib import Path

import jsonschema

import workloads
from workloads import compiled, env
from workloads.knobs import KNOBS
from profiles import OBSERVERS
from trainperf import variants
from trainperf.config import ConfigError, digest
from trainperf.variants import Machine


def resolve(config: dict) -> dict:
    """Fill in 'auto' (machine, preset) and 'all' (workloads, variants); check every name."""
    config = dict(config)
    declared = config.get("gpu_jobs", "auto")
    cuda = env.has_cuda() if declared == "auto" else bool(declared)
    config["tools_checked_here"] = declared == "auto"  # else the jobs run elsewhere (a cluster's GPU nodes)
    if config["preset"] == "auto":
        config["preset"] = "gpu" if cuda else "cpu"
    if config["preset"] not in config["presets"]:
        raise ConfigError(f"preset: {config['preset']!r} is not one of the presets: {', '.join(config['presets'])}")
    if config["machine"] == "auto":
        if declared != "auto":
            raise ConfigError("machine: name the GPU nodes' machine (e.g. machine=h200) when gpu_jobs is set")
        config["machine"] = env.machine_slug()
    config["cuda"] = cuda
    config["gpus"] = env.gpu_count() if declared == "auto" else None  # a cluster's nodes: not known here
    known = {"workloads": workloads.names(), "variants": variants.names(config), "profilers": list(OBSERVERS)}
    every = {**known, "variants": config["presets"][config["preset"]].get("variants", known["variants"])}
    for key, names in known.items():
        chosen = every[key] if config[key] == "all" else list(config[key])
        unknown = [n for n in chosen if n not in names]
        if unknown:
            raise ConfigError(f"unknown {key[:-1]} {', '.join(map(repr, unknown))}; known: {', '.join(names)}")
        config[key] = chosen
    for chain, spec in config.get("chains", {}).items():
        _unknown(f"chains.{chain}.fixes", spec["fixes"], list(variants.steps(config)))
        _unknown(f"chains.{chain}.workloads", spec["workloads"], known["workloads"])
        _unknown(f"chains.{chain}.profilers", spec.get("profilers", []), known["profilers"])
    for grid, spec in config.get("grids", {}).items():
        _unknown(f"grids.{grid}.workloads", spec["workloads"], known["workloads"])
        check_values(f"grids.{grid}.knobs", spec["knobs"])
    check_names(config, known)
    check_sizes(config)
    return config


def _unknown(key: str, chosen, known: list[str], what: str = "unknown name") -> None:
    bad = [n for n in ([] if chosen == "all" else chosen) if n not in known]
    if bad:
        raise ConfigError(f"{key}: {what} {', '.join(map(repr, bad))}; {'known' if what == 'unknown name' else 'those'}: "
                          f"{', '.join(known)}")


def check_ncu_follows_nsys(preset: str, profile: dict) -> None:
    """ncu reads its kernels from the same cell's nsys timeline: every cell and repetition ncu
    observes, nsys must observe too."""
    ncu, nsys = profile.get("ncu"), profile.get("nsys", {})
    if ncu is None:
        return
    why = "not observed by nsys too (ncu reads its kernels from the cell's nsys timeline):"
    for key in ("variants", "workloads"):
        theirs = nsys.get(key, "all")
        if theirs != "all":
            ours = ncu.get(key, "all")
            _unknown(f"presets.{preset}.profile.ncu.{key}", ["all"] if ours == "all" else ours, theirs, why)
    ours, theirs = ncu.get("repeat", False), nsys.get("repeat", False)
    if ours is True:  # every workload ncu observes
        ours = ncu.get("workloads", "all")
    if ours and theirs is not True and (ours == "all" or not set(ours) <= set(theirs or [])):
        raise ConfigError(f"presets.{preset}.profile.ncu.repeat: ncu repeats {ours}, nsys {theirs} (ncu reads its "
                          f"kernels from the cell's nsys timeline): let presets.{preset}.profile.nsys.repeat cover it")


def check_values(key: str, lists: dict) -> None:
    """Each value a list gives a knob is one the knob table allows."""
    for knob, values in lists.items():
        for value in values:
            try:
                jsonschema.validate(value, KNOBS[knob].allowed)
            except jsonschema.ValidationError as e:
                raise ConfigError(f"{key}.{knob}: {value!r} is not allowed ({e.message})") from None


def check_names(config: dict, known: dict) -> None:
    """Every name a preset lists (its variants, its profile lists, its workload sizes) is known."""
    for preset, p in config["presets"].items():
        _unknown(f"presets.{preset}.variants", p.get("variants", []), known["variants"])
        _unknown(f"presets.{preset}.workloads", list(p.get("workloads", {})), known["workloads"])
        for profiler, chosen in p.get("profile", {}).items():
            for key in ("variants", "workloads"):
                _unknown(f"presets.{preset}.profile.{profiler}.{key}", chosen.get(key, "all"), known[key])
            if isinstance(chosen.get("repeat"), list):  # a workload the profiler does not observe would never repeat
                _unknown(f"presets.{preset}.profile.{profiler}.repeat", chosen["repeat"], known["workloads"])
                if chosen.get("workloads", "all") != "all":
                    _unknown(f"presets.{preset}.profile.{profiler}.repeat", chosen["repeat"], chosen["workloads"],
                             f"not among the workloads {profiler} observes:")
            if "variants" in p:  # a profiled variant the preset does not run would silently never be observed
                _unknown(f"presets.{preset}.profile.{profiler}.variants", chosen.get("variants", "all"),
                         p["variants"], "not among the preset's variants:")
        check_ncu_follows_nsys(preset, p.get("profile", {}))
    _unknown("scaling.workloads", config.get("scaling", {}).get("workloads", []), known["workloads"])


def check_sizes(config: dict) -> None:
    """A workload's sizes in every preset: keys it has, positive numbers of its defaults' types;
    in the preset that runs, a batch the generated dataset can fill."""
    for preset, p in config["presets"].items():
        if p["classes"] > p["images"]:
            raise ConfigError(f"presets.{preset}.classes: {p['classes']} classes need at least as many images, "
                              f"not {p['images']}")
        for name in config["workloads"]:
            workload = workloads.get(name)
            defaults = workload.defaults.get(p.get("sizes", preset), {})
            for key, value in p.get("workloads", {}).get(name, {}).items():
                where = f"presets.{preset}.workloads.{name}.{key}"
                if key not in defaults:
                    raise ConfigError(f"{where}: unknown size; {name} has {', '.join(sorted(defaults))}")
                kind = int if isinstance(defaults[key], int) else float
                if isinstance(value, bool) or not isinstance(value, (int, float)) or kind is int and not isinstance(value, int):
                    raise ConfigError(f"{where}: {value!r} is not {'an integer' if kind is int else 'a number'}")
                if value <= 0:
                    raise ConfigError(f"{where}: {value!r} must be greater than 0")
    _check_batch_fits(config)


def _check_batch_fits(config: dict) -> None:
    """Every chosen variant's step (its batch, times its data-parallel ranks) fits the generated dataset."""
    preset, machine = config["presets"][config["preset"]], Machine(config["preset"], config["cuda"], config.get("gpus"))
    for name in config["workloads"]:
        workload = workloads.get(name)
        if name in config.get("datasets", {}):
            continue  # a user's dataset is checked when it is read
        for v in config["variants"]:
            knobs = variants.resolve(v, workload, config, machine)[0] if variants.in_scope(config, name, v) else None
            p = params(config, workload, knobs)
            batch = p["batch_size"] * max(1, (knobs or {}).get("ddp", 0))
            samples = preset["images"] if workload.data == "images" else (preset["tokens"] - 1) // p.get("seq_len", 1)
            if batch > samples:
                where = (f"presets.{config['preset']}.workloads.{name}.batch_size: {params(config, workload)['batch_size']}"
                         f"{'' if v == 'baseline' else f' (variant {v})'}")
                raise ConfigError(f"{where} makes a step of {batch} samples, more than the {samples} of the generated dataset")


def data_path(config: dict, workload: type[workloads.Workload]) -> Path:
    """The dataset a workload reads: a user's real one, or the generated one of the preset."""
    if workload.name in config.get("datasets", {}):
        return Path(config["datasets"][workload.name])
    root = Path(config["data_root"]) / config["preset"]
    return root / ("images" if workload.data == "images" else "tokens.npy")


def params(config: dict, workload: type[workloads.Workload], knobs: dict | None = None) -> dict:
    """The workload's sizes in this preset; a variant's size knobs (batch_size, seq_len: 0 keeps the
    workload's) replace them, and its batch_scale multiplies the batch."""
    preset, k = config["presets"][config["preset"]], knobs or {}
    p = {**workload.defaults[preset.get("sizes", config["preset"])], **preset.get("workloads", {}).get(workload.name, {})}
    p |= {size: k[size] for size in ("batch_size", "seq_len") if k.get(size)}
    return {**p, "batch_size": p["batch_size"] * k.get("batch_scale", 1)}


def processes(spec: dict) -> int:
    """How many processes a cell trains with (DistributedDataParallel's world size)."""
    return max(1, spec["knobs"].get("ddp", 0))


def compile_key(cell: dict) -> str | None:
    """The torch.compile cache folder the compile stage builds for this cell, or None: a cell not
    run, not compiled, or a data-parallel one, whose ranks compile their own graphs."""
    spec = cell["spec"]
    if cell["status"] != "run" or not spec["knobs"].get("compile") or processes(spec) != 1:
        return None
    return compiled.cache_key(spec)


def record_path(config: dict, workload: str, variant: str, profiler: str, rep: int) -> str:
    """Where a cell's record (metrics.json) and its raw profiler output live."""
    return f"runs/{config['machine']}/{workload}/{variant}/{profiler}/rep{rep}/metrics.json"


def profiled(config: dict, profiler: str, workload: str, variant: str) -> bool:
    """Does `profiler` observe this cell? timing observes every cell; the others the workloads
    and variants the preset's `profile` names for them."""
    if variant in variants.stages(config) and "profilers" in config["chains"][variants.stages(config)[variant][0]]:
        return True  # a chain that names its profilers: in_scope decides
    if profiler == "timing":
        return True
    chosen = config["presets"][config["preset"]].get("profile", {}).get(profiler, {})
    return all(chosen.get(k, "all") == "all" or name in chosen.get(k, [])
               for k, name in (("workloads", workload), ("variants", variant)))


def profiler_reason(config: dict, profiler: str, workload: str, variant: str) -> str | None:
    """Why this profiler cannot observe the cell here, or None."""
    reason = OBSERVERS[profiler].unavailable(config, config["cuda"])
    if reason or profiler != "ncu":
        return reason
    if "nsys" not in config["profilers"] or not profiled(config, "nsys", workload, variant):
        return "ncu takes its kernels from the nsys timeline of the same cell: profile the cell with nsys too"
    nsys = OBSERVERS["nsys"].unavailable(config, config["cuda"])
    return f"ncu takes its kernels from the cell's nsys timeline: {nsys}" if nsys else None


def cell(config: dict, workload_name: str, variant: str, profiler: str = "timing", rep: int = 0) -> dict:
    """One cell of a resolved config: {'keys', 'status': 'run'|'skipped', 'reason', 'spec'}."""
    workload = workloads.get(workload_name)
    keys = {"workload": workload_name, "variant": variant, "profiler": profiler, "rep": rep}
    knobs, reason = variants.resolve(variant, workload, config, Machine(config["preset"], config["cuda"], config.get("gpus")))
    reason = reason or profiler_reason(config, profiler, workload_name, variant)
    if not reason and knobs.get("ddp") and profiler in ("torch", "ncu", "input", "step", "step-bare", "meter-cost"):
        reason = f"{profiler} observes one process; a data-parallel cell is profiled with nsys"
    if reason:
        return {"keys": keys, "status": "skipped", "reason": reason, "spec": None}
    preset = config["presets"][config["preset"]]
    # the tracing profilers measure fewer steps (their traces grow with each); the ceilings (input,
    # step) are compared with timing's throughput, so they measure as many steps as it does
    traced = profiler in ("torch", "nsys", "ncu")
    measured = preset.get("profiled_steps", preset["measured_steps"]) if traced else preset["measured_steps"]
    measured = OBSERVERS[profiler].measured_steps or measured
    spec = {**keys, "preset": config["preset"], "machine": config["machine"], "knobs": knobs,
            "params": params(config, workload, knobs), "data": str(data_path(config, workload)),
            "warmup_steps": preset["warmup_steps"], "measured_steps": measured,
            "max_warmup_s": preset.get("max_warmup_s"), "max_measure_s": preset.get("max_measure_s"),
            "seed": config["seed"], "tools": config.get("tools", {})}
    if profiler == "ncu":
        spec.update(ncu_kernels=config["ncu_kernels"],
                    timeline=record_path(config, workload_name, variant, "nsys", rep))
    spec["cell_hash"] = digest({k: v for k, v in spec.items() if k != "rep"})
    return {"keys": keys, "status": "run", "reason": None, "spec": spec}


def cells(config: dict) -> list[dict]:
    """Every cell, repetition-major so that each repetition sweeps all variants (interleaving).
    Profilers other than timing observe one repetition of the cells the preset names (every one
    where its `profile` entry's `repeat` says so: a ceiling compared in pairs, a claim's value)."""
    preset = config["presets"][config["preset"]]
    chained = {v for v, (c, _) in variants.stages(config).items() if "profilers" in config["chains"][c]}
    out = []
    for c in (cell(config, w, v, p, r) for r in range(preset["repetitions"]) for p in config["profilers"]
              for w in config["workloads"] for v in config["variants"]
              if (r == 0 or repeats(preset, p, w) or v in chained) and profiled(config, p, w, v)
              and variants.in_scope(config, w, v, p)):
        out += [*stand_in(config, c, out), c]
    return out


def stand_in(config: dict, c: dict, so_far: list[dict]) -> list[dict]:
    """The cell that measures a skipped one with another variant's knobs ('same knobs as X here'),
    where X was not asked for: [X's cell] once, else []. A chain's stage asked alone is measured."""
    same = re.match(r"same knobs as (\S+) here$", c["reason"] or "")
    k = c["keys"]
    if not same or same[1] in config["variants"] or any(o["keys"] == {**k, "variant": same[1]} for o in so_far):
        return []
    return [cell(config, k["workload"], same[1], k["profiler"], k["rep"])]


def repeats(preset: dict, profiler: str, workload: str) -> bool:
    """Does `profiler` observe the workload in every repetition (timing always; the others where
    their `profile` entry's `repeat` is true or lists the workload), not only the first?"""
    chosen = True if profiler == "timing" else preset.get("profile", {}).get(profiler, {}).get("repeat", False)
    return chosen is True or (isinstance(chosen, list) and workload in chosen)
