"""Typed settings: every config block is a pydantic model whose fields carry their type, bounds and description.

The models are the one source of truth for what a config may hold: the JSON schema of `workflow/schemas/` is
generated from them (`config_schema`, checked by a test), a block is validated against its model's schema first
(one line naming the key and the cause, before any job runs) and then built into the typed object the code reads.
The values themselves — the embedded default — live in config.yaml, so a field has a default only where the key
may be left out. Torch-free: the DAG build reads these.
"""

import functools
from typing import Annotated, Any, ClassVar, Literal, TypeVar

import jsonschema
import pydantic
from pydantic import BaseModel, ConfigDict, Field


class ConfigError(ValueError):
    """A bad config value: one line, `config key <dotted key>: <what is wrong>`."""


class Settings(BaseModel):
    """A config block: unknown keys are errors and a built block does not change."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class StudySettings(Settings):
    """A study's block under `studies:`. SHARED names top-level sections (e.g. "training") its analysis reads too:
    fields of the settings filled from the top level (`from_config`), not keys a user writes in the block."""

    SHARED: ClassVar[tuple[str, ...]] = ()
    module: str | None = Field(
        None, description="importable module of a plug-in study outside qscaling (see docs/adding-a-study.md)"
    )

    @classmethod
    def block_schema(cls) -> dict:
        """The JSON schema of the block as written in the config (without the SHARED sections)."""
        schema = dict(schema_of(cls))
        schema["properties"] = {k: v for k, v in schema["properties"].items() if k not in cls.SHARED}
        schema["required"] = [k for k in schema.get("required", ()) if k not in cls.SHARED]
        if not schema["required"]:
            del schema["required"]
        return schema


# Field types used across blocks (constraints live in the schema, descriptions on each field).
PositiveInt = Annotated[int, Field(ge=1)]
Fraction = Annotated[float, Field(gt=0, lt=1)]
Anneal = Literal["wsd", "cosine"]
# A partnered study's quantized runs start from their full-precision partner's trunk after its warmup
# (`Planner.after_warmup`), not from scratch: the pair shares its initialisation and warmup (a declared deviation).
Branched = Annotated[
    bool,
    Field(
        description="true: each quantized run starts from its fp32 partner's WSD trunk after warmup instead of from "
        "scratch (a deviation from the papers; the seed study measures what it does to δ's seed noise)"
    ),
]
Sizes = Annotated[list[str], Field(min_length=1, json_schema_extra={"uniqueItems": True})]
Budgets = Annotated[list[PositiveInt], Field(min_length=2, json_schema_extra={"uniqueItems": True})]
CellBudgets = Annotated[list[PositiveInt], Field(min_length=1, json_schema_extra={"uniqueItems": True})]
Seeds = Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1, json_schema_extra={"uniqueItems": True})]
Bits = Annotated[list[Annotated[int, Field(ge=2, le=8)]], Field(min_length=1, json_schema_extra={"uniqueItems": True})]
WeightFormat = Annotated[str, Field(pattern=r"\{bits\}")]


def unique(item, *, min_items: int = 1):
    """A list type of distinct `item`s, at least `min_items` of them."""
    return Annotated[list[item], Field(min_length=min_items, json_schema_extra={"uniqueItems": True})]


class Calibration(Settings):
    sequences: PositiveInt = Field(description="calibration sequences of seq_len tokens")
    seed: int = Field(description="seed of the calibration windows' offsets")


class LocalModel(Settings):
    """One of your own HF-format checkpoints (docs/your-own-models.md)."""

    label: str = Field(description="the size this model stands for in tables and figures")
    path: str | None = Field(None, description="an HF-format causal-LM directory (config.json + weights)")
    repo: str | None = Field(None, description="a hub id instead of a path (fetched by its job)")
    revision: str | None = Field(None, description="the hub revision of `repo` (default main)")
    tokens: PositiveInt = Field(description="training tokens the checkpoint has seen")


@functools.cache
def schema_of(model: type[BaseModel]) -> dict:
    """`model`'s JSON schema (draft 2020-12), as the config is validated against it."""
    return model.model_json_schema()


def _key_path(error: jsonschema.ValidationError, key: str) -> str:
    path = ".".join(str(p) for p in (*[part for part in key.split(".") if part], *error.absolute_path))
    return path or "(top level)"


def _one_line(error: jsonschema.ValidationError, key: str) -> str:
    where = _key_path(error, key)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        keys = ", ".join(f"{where}.{k}" if where != "(top level)" else k for k in unknown)
        return f"config key {keys}: unknown key" + (f" (valid here: {', '.join(allowed)})" if allowed else "")
    return f"config key {where}: {error.message}"


Model = TypeVar("Model", bound=BaseModel)


def check_against_schema(data: Any, schema: dict, key: str = "") -> None:
    """ConfigError naming the first bad key of `data` (at `key` in the config) under `schema`."""
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(data))
    if errors:
        raise ConfigError(_one_line(jsonschema.exceptions.best_match(errors), key))


def build(model: type[Model], data: Any, key: str = "", *, schema: dict | None = None) -> Model:
    """`data` (the block at `key`) checked against `model`'s schema, then built into a `model`."""
    check_against_schema(data, schema or schema_of(model), key)
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as error:  # a validator beyond the schema's reach
        first = error.errors()[0]
        where = ".".join(str(p) for p in (*[part for part in key.split(".") if part], *first["loc"]))
        raise ConfigError(f"config key {where}: {first['msg']}") from None
