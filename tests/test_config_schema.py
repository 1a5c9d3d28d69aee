"""The config's JSON schema is generated from the settings types, describes every field, and is what the config
is checked against: a stale committed copy, an undescribed field or a type the schema does not say fails here."""

import yaml
from conftest import REPO_ROOT

from qscaling.pipeline import SCHEMA_PATH, config_schema


def properties(schema: dict, where: str = ""):
    """(dotted path, property schema) of every property, through $refs, arrays and maps."""
    definitions = schema.get("$defs", {})

    def walk(node: dict, path: str):
        if "$ref" in node:
            node = {**definitions[node["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
        for key, child in node.get("properties", {}).items():
            yield f"{path}.{key}".lstrip("."), child
            yield from walk(child, f"{path}.{key}")
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                yield from walk(node[key], f"{path}[]")
        for option in node.get("anyOf", []):
            yield from walk(option, path)

    yield from walk(schema, where)


def test_the_committed_schema_is_the_generated_one():
    committed = yaml.safe_load(SCHEMA_PATH.read_text())
    assert committed == config_schema(), "workflow/schemas/config.schema.yaml is stale: run `make schema`"


def test_every_field_has_a_description():
    undescribed = sorted({path for path, field in properties(config_schema()) if not field.get("description")})
    assert undescribed == []


def test_the_schema_accepts_every_committed_preset_and_names_a_bad_key():
    import jsonschema

    from qscaling.config import deep_merge

    raw = yaml.safe_load((REPO_ROOT / "config.yaml").read_text())
    validator = jsonschema.Draft202012Validator(config_schema())
    for scale, preset in raw["presets"].items():
        merged = deep_merge({key: value for key, value in raw.items() if key != "presets"}, preset)
        assert list(validator.iter_errors({**merged, "scale": scale})) == []
    merged["studies"]["sun2025"]["budgetz"] = [1]
    [error] = validator.iter_errors(merged)
    assert list(error.absolute_path) == ["studies", "sun2025"] and "budgetz" in error.message
