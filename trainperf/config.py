"""Load config/config.yaml, validate it against config/schema.yaml (with the knobs of
workloads/knobs.py), resolve 'auto' values."""
from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import jsonschema
import yaml

from workloads.knobs import KNOBS, defaults

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "config.yaml"
SCHEMA = ROOT / "config" / "schema.yaml"


class ConfigError(ValueError):
    """A bad config value; the message names the key and what is allowed."""


def _describe(error: jsonschema.ValidationError) -> str:
    key = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        return f"config error at {key}: unknown key(s) {extra}; allowed: {allowed}"
    if error.validator == "enum":
        return f"config error at {key}: {error.instance!r} is not one of {error.validator_value}"
    if error.validator in ("oneOf", "anyOf") and error.context:
        options = [e.schema.get("enum") or e.schema.get("const") for e in error.context]
        return f"config error at {key}: {error.instance!r} is not allowed; allowed: {options}"
    return f"config error at {key}: {error.message}"


def knob_definitions() -> dict:
    """The schema's definitions made from the knob table: knobs (a set of knob values) and knob
    (a knob's name)."""
    knobs = {"type": "object", "additionalProperties": False,
             "properties": {name: knob.allowed for name, knob in KNOBS.items()}}
    return {"knobs": knobs, "knob": {"enum": list(KNOBS)}}


def schema() -> dict:
    loaded = yaml.safe_load(SCHEMA.read_text())
    loaded["definitions"].update(knob_definitions())
    return loaded


def validate(config: dict) -> dict:
    """Raise ConfigError with one line naming the first bad key; return the config, its baseline
    with every knob (those it leaves out at the table's defaults)."""
    flag = config.get("gpu_jobs")  # `snakemake --config gpu_jobs=true` passes the string 'true'
    if isinstance(flag, str) and flag.lower() in ("true", "false"):
        config = {**config, "gpu_jobs": flag.lower() == "true"}
    if isinstance(config.get("baseline"), dict):
        config = {**config, "baseline": {**defaults(), **config["baseline"]}}
    errors = sorted(jsonschema.Draft7Validator(schema()).iter_errors(config),
                    key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        error = jsonschema.exceptions.best_match(errors)
        raise ConfigError(_describe(error))
    stray = sorted(set(config.get("predictions", {})) - set(config.get("tuning", {})))
    if stray:
        raise ConfigError(f"config error at predictions: {stray} name no lever under tuning; levers: "
                          f"{sorted(config.get('tuning', {}))}")
    return config


def load(path: str | Path = CONFIG, overrides: dict | None = None) -> dict:
    config = yaml.safe_load(Path(path).read_text())
    config.update(copy.deepcopy(overrides or {}))
    return validate(config)


def digest(obj) -> str:
    """A short stable hash of any JSON-able object (the config, a cell's spec)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]
