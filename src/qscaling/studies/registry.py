"""Which study a config block names, and its typed settings.

A block under `studies:` names a built-in study (`qscaling.studies.<name>`) or, with `module:`, any importable
module; either exposes `STUDY`, a `qscaling.studies.study.Study` registered under the block's name. Torch-free.
"""

import functools
import importlib

from qscaling.config import Common
from qscaling.settings import ConfigError, StudySettings, check_against_schema
from qscaling.studies.study import Study

BUILTIN = ("ladder", "kumar2024", "ouyang2024", "ahmadian2023", "chen2025", "sun2025", "kumar2024_training", "noise")


def module_of(name: str, block: dict) -> str:
    """The importable module of the study configured as `studies.<name>`."""
    return block.get("module") or f"qscaling.studies.{name}"


@functools.cache
def load_study(name: str, module_name: str) -> Study:
    """The `Study` that `module_name` registers as `name`; ConfigError naming the block otherwise."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        if module_name == f"qscaling.studies.{name}":
            raise ConfigError(
                f"config key studies.{name}: not a built-in study ({', '.join(BUILTIN)}), and no `module:` names "
                "the plug-in that registers it"
            ) from None
        raise ConfigError(f"config key studies.{name}: no study module {module_name!r} ({error})") from None
    study = getattr(module, "STUDY", None)
    if not isinstance(study, Study):
        raise ConfigError(f"config key studies.{name}: module {module_name} has no STUDY (a qscaling Study)")
    if study.name != name:
        raise ConfigError(f"config key studies.{name}: module {module_name} registers study {study.name!r}")
    return study


def study_settings(study: Study, block, common: Common) -> StudySettings:
    """The study's block checked against its settings' schema, typed, its SHARED sections added from the top
    level, then checked by the study itself (sizes, specs, grid values): ConfigError naming the key otherwise."""
    key = f"studies.{study.name}"
    check_against_schema(block, study.settings.block_schema(), key)
    settings = study.settings.model_validate(
        {**block, **{name: getattr(common, name) for name in study.settings.SHARED}}
    )
    if study.check is not None:
        study.check(settings, common)
    return settings


def settings_params(settings: StudySettings) -> dict:
    """The settings as a rule parameter (plain JSON values), what `configured_from_params` reads back."""
    return settings.model_dump(mode="json", exclude_unset=True)


def configured_from_params(params: dict) -> tuple[Study, StudySettings]:
    """(study, its settings) in a job, from the rule parameter `qscaling.pipeline.ConfiguredStudy.params` wrote
    when the DAG was built."""
    study = load_study(params["study"], params["module"])
    return study, study.settings.model_validate(params["settings"])
