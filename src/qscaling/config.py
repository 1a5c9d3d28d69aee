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
    _check_sizes(config, "learning_curves.sizes", config["learning_curves"]["sizes"])
    curves = config["learning_curves"]
    if config["training"]["warmup_tokens"] >= curves["total_tokens"]:
        raise ConfigError("config key training.warmup_tokens: must be below learning_curves.total_tokens")
    if curves["first_milestone"] >= curves["total_tokens"]:
        raise ConfigError("config key learning_curves.first_milestone: must be below learning_curves.total_tokens")
    ouyang = config["studies"]["ouyang2024"]
    if ouyang["source"] == "hub" and not ouyang["hub"]:
        raise ConfigError("config key studies.ouyang2024.hub: source 'hub' needs {models:, steps:, tokens_per_step:}")
    corpus = config["corpus"]
    if corpus["kind"] == "local" and not corpus.get("local_files"):
        raise ConfigError("config key corpus.local_files: kind 'local' needs at least one file pattern")
    if corpus["kind"] == "hf" and not corpus.get("hf_dataset"):
        raise ConfigError("config key corpus.hf_dataset: kind 'hf' needs {name: ...}")


# Methods that read a weight spec, and the granularities each can apply (GPTQ works column by column).
WEIGHT_METHODS = {"rtn": None, "awq": None, "w8a8": None, "gptq": ("tensor", "channel", "group")}
RECIPE_FIELDS = ("weight_decay", "grad_clip", "dropout", "precision")
PRECISIONS = ("fp32", "bf16", "fp16")


def _check_weight_spec(key: str, method: str, text, **fields) -> None:
    """A weight spec (a template filled with `fields`) parses and suits `method`; else ConfigError naming `key`."""
    from qscaling.quant.spec import parse_spec

    if not isinstance(text, str):
        raise ConfigError(f"config key {key}: a quantization spec must be a string, got {text!r}")
    try:
        filled = text.format(**fields)
    except (KeyError, IndexError, ValueError) as error:
        placeholders = ", ".join("{" + name + "}" for name in fields) or "none"
        raise ConfigError(f"config key {key}: {text!r} has an unknown placeholder {error} "
                          f"(allowed: {placeholders})") from None
    try:
        spec = parse_spec(filled)
    except ValueError as error:
        raise ConfigError(f"config key {key}: {error}") from None
    allowed = WEIGHT_METHODS.get(method, ())
    if allowed and spec.granularity not in allowed:
        raise ConfigError(f"config key {key}: {method} needs {', '.join(allowed)} granularity, got '{filled}'")


def _check_method_spec(key: str, text, **fields) -> None:
    """'method:spec' (e.g. 'awq:int4:g{group}')."""
    method, _, spec = text.partition(":") if isinstance(text, str) else ("", "", text)
    if method not in WEIGHT_METHODS or method == "w8a8":
        valid = ", ".join(m for m in WEIGHT_METHODS if m != "w8a8")
        raise ConfigError(f"config key {key}: {text!r} must read METHOD:SPEC with METHOD one of {valid}")
    _check_weight_spec(key, method, spec, **fields)


def _check_recipe_value(key: str, name: str, value) -> None:
    """One Ahmadian-style recipe value: weight_decay ≥ 0, grad_clip null or > 0, dropout in [0, 1), a precision."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if name not in RECIPE_FIELDS:
        raise ConfigError(f"config key {key}: unknown recipe field '{name}' (valid: {', '.join(RECIPE_FIELDS)})")
    if name == "precision" and value not in PRECISIONS:
        raise ConfigError(f"config key {key}: precision {value!r} is not one of {', '.join(PRECISIONS)}")
    if name == "weight_decay" and not (number and value >= 0):
        raise ConfigError(f"config key {key}: weight_decay {value!r} must be a number ≥ 0")
    if name == "grad_clip" and not (value is None or (number and value > 0)):
        raise ConfigError(f"config key {key}: grad_clip {value!r} must be null (no clipping) or a number > 0")
    if name == "dropout" and not (number and 0 <= value < 1):
        raise ConfigError(f"config key {key}: dropout {value!r} must be a number in [0, 1)")


def _check_recipe_fields(key: str, fields: dict) -> None:
    for name, value in fields.items():
        _check_recipe_value(f"{key}.{name}", name, value)


def _check_sizes(config: dict, key: str, names) -> None:
    for index, name in enumerate([names] if isinstance(names, str) else names):
        if name not in config["ladder"]:
            where = key if isinstance(names, str) else f"{key}.{index}"
            raise ConfigError(f"config key {where}: size '{name}' is not in ladder "
                              f"(defined: {', '.join(config['ladder'])})")


def _check_studies(config: dict) -> None:
    """Every size, quantization spec and recipe value the studies read, checked before any job is planned."""
    studies = config["studies"]
    kumar = studies["kumar2024"]
    _check_sizes(config, "studies.kumar2024.sizes", kumar["sizes"])
    _check_sizes(config, "studies.kumar2024.schedule_ablation.size", kumar["schedule_ablation"]["size"])
    for method in kumar["methods"]:
        for bits in kumar["bits"]:
            _check_weight_spec("studies.kumar2024.weight_format", method, kumar["weight_format"], bits=bits)
    ouyang = studies["ouyang2024"]
    if ouyang["source"] == "train":
        _check_sizes(config, "studies.ouyang2024.sizes", ouyang["sizes"])
    if ouyang["first_checkpoint"] >= ouyang["last_checkpoint"]:
        raise ConfigError("config key studies.ouyang2024.first_checkpoint: must be below last_checkpoint")
    for bits in ouyang["gptq_bits"]:
        _check_weight_spec("studies.ouyang2024.group_size", "gptq", f"int{bits}:g{{group}}:gptq",
                           group=ouyang["group_size"])
    for index, entry in enumerate(ouyang["compare"]):
        _check_method_spec(f"studies.ouyang2024.compare.{index}", entry, group=ouyang["group_size"])
    ahmadian = studies["ahmadian2023"]
    if ahmadian["source"] == "train":
        _check_sizes(config, "studies.ahmadian2023.size", ahmadian["size"])
        _check_sizes(config, "studies.ahmadian2023.sizes", ahmadian["sizes"])
    _check_weight_spec("studies.ahmadian2023.w8a8_weights", "w8a8", ahmadian["w8a8_weights"])
    _check_weight_spec("studies.ahmadian2023.w4", "rtn", ahmadian["w4"])
    _check_recipe_fields("studies.ahmadian2023.recipe", ahmadian["recipe"])
    _check_recipe_fields("studies.ahmadian2023.outlier_prone", ahmadian["outlier_prone"])
    for factor, ablation in ahmadian["ablations"].items():
        key = f"studies.ahmadian2023.ablations.{factor}"
        for index, value in enumerate(ablation["values"]):
            _check_recipe_value(f"{key}.values.{index}", factor, value)
        _check_recipe_fields(f"{key}.with", ablation.get("with", {}))
        for field, values in (ablation.get("across") or {}).items():
            for index, value in enumerate(values):
                _check_recipe_value(f"{key}.across.{field}.{index}", field, value)


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
    _check_studies(resolved)
    return resolved


def corpus_id(config: dict) -> str:
    """Identity of the token data: a hash of the corpus section (what it is made of and how it is split)."""
    canonical = json.dumps(config["corpus"], sort_keys=True, separators=(",", ":"))
    return f"{config['corpus']['kind']}-{hashlib.sha256(canonical.encode()).hexdigest()[:10]}"
