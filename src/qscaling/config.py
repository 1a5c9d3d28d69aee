"""Config: merge the scale preset and validate it against the schema, with one-line errors naming the key.

`resolve_config(raw)` is what the Snakefile calls before any job exists.
"""

import copy
import hashlib
import json
from pathlib import Path

import jsonschema
import yaml

from qscaling.shape import ModelShape

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    pass


def deep_merge(base: dict, override: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _key_path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def _one_line(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        where = _key_path(error)
        keys = ", ".join(f"{where}.{k}" if where != "(top level)" else k for k in unknown)
        return f"config key {keys}: unknown key" + (f" (valid here: {', '.join(allowed)})" if allowed else "")
    if error.validator == "required":
        return f"config key {_key_path(error)}: {error.message}"
    return f"config key {_key_path(error)}: {error.message}"


def validate_against_schema(config: dict, schema_path: Path = SCHEMA_PATH) -> None:
    schema = yaml.safe_load(schema_path.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), _key_path(e)))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        raise ConfigError(_one_line(best))


def _check_semantics(config: dict) -> None:
    for name, shape in config["ladder"].items():
        try:
            ModelShape(**shape, vocab_size=config["corpus"]["vocab_size"], seq_len=config["training"]["seq_len"])
        except ValueError as error:
            raise ConfigError(f"config key ladder.{name}: {error}") from error
    check_sizes(config, "learning_curves.sizes", config["learning_curves"]["sizes"])
    curves = config["learning_curves"]
    if curves["first_milestone"] >= curves["total_tokens"]:
        raise ConfigError("config key learning_curves.first_milestone: must be below learning_curves.total_tokens")
    corpus = config["corpus"]
    if corpus["kind"] == "local" and not corpus.get("local_files"):
        raise ConfigError("config key corpus.local_files: kind 'local' needs at least one file pattern")
    if corpus["kind"] == "hf" and not corpus.get("hf_dataset"):
        raise ConfigError("config key corpus.hf_dataset: kind 'hf' needs {name: ...}")


# Methods that read a weight spec, and the granularities each can apply (GPTQ works column by column).
WEIGHT_METHODS = {"rtn": None, "awq": None, "w8a8": None, "gptq": ("tensor", "channel", "group")}


def check_weight_spec(key: str, method: str, text, **fields) -> None:
    """A weight spec (a template filled with `fields`) parses and suits `method`; else ConfigError naming `key`."""
    from qscaling.quant.spec import parse_spec

    if not isinstance(text, str):
        raise ConfigError(f"config key {key}: a quantization spec must be a string, got {text!r}")
    try:
        filled = text.format(**fields)
    except (KeyError, IndexError, ValueError) as error:
        placeholders = ", ".join("{" + name + "}" for name in fields) or "none"
        raise ConfigError(
            f"config key {key}: {text!r} has an unknown placeholder {error} (allowed: {placeholders})"
        ) from None
    try:
        spec = parse_spec(filled)
    except ValueError as error:
        raise ConfigError(f"config key {key}: {error}") from None
    allowed = WEIGHT_METHODS.get(method, ())
    if allowed and spec.granularity not in allowed:
        raise ConfigError(f"config key {key}: {method} needs {', '.join(allowed)} granularity, got '{filled}'")


def check_method_spec(key: str, text, **fields) -> None:
    """'method:spec' (e.g. 'awq:int4:g{group}') with a weight-only PTQ method."""
    method, _, spec = text.partition(":") if isinstance(text, str) else ("", "", text)
    if method not in WEIGHT_METHODS or method == "w8a8":
        valid = ", ".join(m for m in WEIGHT_METHODS if m != "w8a8")
        raise ConfigError(f"config key {key}: {text!r} must read METHOD:SPEC with METHOD one of {valid}")
    check_weight_spec(key, method, spec, **fields)


def check_sizes(config: dict, key: str, names) -> None:
    """`names` (one size or a list) are all sizes of the ladder."""
    for index, name in enumerate([names] if isinstance(names, str) else names):
        if name not in config["ladder"]:
            where = key if isinstance(names, str) else f"{key}.{index}"
            raise ConfigError(
                f"config key {where}: size '{name}' is not in ladder (defined: {', '.join(config['ladder'])})"
            )


def resolve_config(raw: dict) -> dict:
    """The preset named by `scale` merged over the base values, validated; raises ConfigError (one line)."""
    presets = raw.get("presets", {})
    if not isinstance(presets, dict):
        raise ConfigError("config key presets: must be a mapping of scale name -> overrides")
    scale = raw.get("scale", "default")
    if scale not in presets:
        raise ConfigError(f"config key scale: '{scale}' is not a preset (defined: {', '.join(presets) or 'none'})")
    resolved = deep_merge({k: v for k, v in raw.items() if k != "presets"}, presets[scale])
    validate_against_schema(resolved)
    _check_semantics(resolved)
    from qscaling.studies import study_modules

    for study in study_modules(resolved).values():  # every size, spec and grid value a study reads
        study.check_config(resolved)
    return resolved


def corpus_id(config: dict) -> str:
    """Identity of the token data: a hash of the corpus section (what it is made of and how it is split)."""
    canonical = json.dumps(config["corpus"], sort_keys=True, separators=(",", ":"))
    return f"{config['corpus']['kind']}-{hashlib.sha256(canonical.encode()).hexdigest()[:10]}"
