"""Everything the Snakefile needs before any job exists, built once from the raw config: the typed config, each
configured study with its settings, every planned run and scored checkpoint, every study's jobs, fits and tables,
and every declared figure with its inputs. The rule files read this; no study is named here.
"""

import copy
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from qscaling.atomic import write_text
from qscaling.config import Common, Config, resolve_config
from qscaling.figures import FigureSpec, declared_figures, figure_inputs, figure_modules
from qscaling.figures.common import public_table_figures
from qscaling.layout import LAW_COMPARISON, LEARNING_CURVES, PUBLIC_PREDICTIONS, Layout
from qscaling.noise import NOISE_PATH
from qscaling.plan import Planner, log_spaced_tokens
from qscaling.settings import StudySettings, schema_of
from qscaling.studies.registry import BUILTIN, load_study, module_of, settings_params, study_settings
from qscaling.studies.study import Evaluation, Job, Scoring, Study

CONFIG_PATH = Path(__file__).resolve().parents[2] / "config.yaml"
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


@dataclass(frozen=True)
class ConfiguredStudy:
    """A study as this config runs it: its registration, its typed settings and the module that registers it."""

    study: Study
    settings: StudySettings
    module: str

    @property
    def name(self) -> str:
        return self.study.name

    @property
    def params(self) -> dict:
        """The rule parameters every analysis job of the study reads (`qscaling.studies.registry`)."""
        return {"study": self.name, "module": self.module, "settings": settings_params(self.settings)}


def configured_studies(config: Config) -> dict[str, ConfiguredStudy]:
    """Every configured study in config order, its block checked and typed (ConfigError naming the key)."""
    common = config.common()
    studies = {}
    for name, block in config.studies.items():
        module = module_of(name, block)
        study = load_study(name, module)
        studies[name] = ConfiguredStudy(study, study_settings(study, block, common), module)
    return studies


def study_figure_modules(studies=()) -> list:
    """Every figure module: qscaling.figures' own, every built-in study's (law-only figures are drawn even where
    their study does not run), then those of `studies` (plug-ins)."""
    registered = [load_study(name, module_of(name, {})) for name in BUILTIN] + list(studies)
    return figure_modules([module for study in registered for module in study.figures])


def resolve(raw: dict) -> tuple[Config, dict[str, ConfiguredStudy]]:
    """The config typed and every study block checked: what the Snakefile does before any job exists."""
    config = resolve_config(raw)
    return config, configured_studies(config)


def learning_curve_runs(common: Common, planner: Planner) -> list[str]:
    """The trunks of `learning_curves`, checkpointed at its log-spaced milestones."""
    curves = common.learning_curves
    milestones = log_spaced_tokens(curves.first_milestone, curves.total_tokens, curves.milestones)
    return [planner.trunk(size, upto=curves.total_tokens, milestones=milestones) for size in curves.sizes]


def plan_all(config: Config, studies: dict[str, ConfiguredStudy] | None = None):
    """(planner, {study: its evaluations}): every run the configuration needs (shared where specs coincide)."""
    studies = configured_studies(config) if studies is None else studies
    common = config.common()
    planner = Planner(common, common.corpus_id)
    learning_curve_runs(common, planner)
    evaluations = {name: s.study.plan(s.settings, common, planner) for name, s in studies.items()}
    return planner, evaluations


@dataclass
class Pipeline:
    """The planned workflow. Artifact ids (what figures and claims read): "learning_curves", "<study>" (its
    tidy table) and "<study>/<table>" (a job's or a fit's table)."""

    config: Config
    studies: dict[str, ConfiguredStudy]
    planner: Planner
    evaluations: dict[str, list[Evaluation]]
    layout: Layout
    learning_curve_runs: list[str]
    scoring: dict[str, Scoring] = field(default_factory=dict)
    jobs: dict[str, list[Job]] = field(default_factory=dict)
    fits: dict[str, dict[str, str]] = field(default_factory=dict)  # study -> fit name -> path
    fit_tables: dict[str, dict[str, str]] = field(default_factory=dict)  # study -> fit table name -> path
    artifacts: dict[str, dict[str, str]] = field(default_factory=dict)  # study -> table name ("table", …) -> path
    figures: list = field(default_factory=list)  # (FigureSpec, named inputs)

    @classmethod
    def from_config(cls, raw: dict, public_tables: list[str] = ()) -> "Pipeline":
        """`public_tables`: the published tables shipped beside the workflow (`qscaling.public.public_tables`),
        each drawn in a figure of its own."""
        config, studies = resolve(raw)
        planner, evaluations = plan_all(config, studies)
        layout = Layout(config.corpus_id)
        pipeline = cls(config, studies, planner, evaluations, layout, learning_curve_runs(config.common(), planner))
        for name, configured in studies.items():
            pipeline._add_study(configured, evaluations[name])
        pipeline._add_figures(public_table_figures(public_tables))
        return pipeline

    def _add_study(self, configured: ConfiguredStudy, evaluations: list[Evaluation]) -> None:
        study, settings, common, layout = configured.study, configured.settings, self.config.common(), self.layout
        name = study.name
        self.scoring[name] = study.scoring(settings, common, layout)
        self.jobs[name] = study.jobs(settings, common, evaluations, layout) if study.jobs else []
        fits = study.fit_names(settings) if study.fit_names else []
        self.fits[name] = {fit: layout.fit(name, fit) for fit in fits}
        self.fit_tables[name] = {table: layout.fit_table(name, table) for table in study.fit_table_names}
        tables = {"table": layout.table(name)}
        for job in self.jobs[name]:
            tables.update({key: path for key, path in job.outputs.items() if str(path).endswith(".parquet")})
        self.artifacts[name] = tables | self.fit_tables[name]

    def _add_figures(self, generated: list[FigureSpec]) -> None:
        modules = study_figure_modules([s.study for s in self.studies.values()])
        for spec in [*(spec for module in modules for spec in declared_figures(module)), *generated]:
            inputs = figure_inputs(spec, self.artifact_paths, self.fits)
            if inputs is not None:
                self.figures.append((spec, inputs))

    @property
    def runs(self) -> dict:
        """Runs trained here: run id -> `RunPlan`."""
        return self.planner.runs

    @property
    def hub_runs(self) -> dict:
        """Runs imported from released or local checkpoints: run id -> `HubRun`."""
        return self.planner.hub_runs

    @property
    def artifact_paths(self) -> dict[str, str]:
        """Artifact id -> path (class docstring)."""
        paths = {
            LEARNING_CURVES: self.layout.table(LEARNING_CURVES),
            PUBLIC_PREDICTIONS: self.layout.public_predictions(),
        }
        if self.comparison_inputs:
            paths[LAW_COMPARISON] = self.layout.law_comparison()
        for study, named in self.artifacts.items():
            paths.update({study if key == "table" else f"{study}/{key}": path for key, path in named.items()})
        return paths

    @property
    def comparison_inputs(self) -> dict[str, str]:
        """The tables of the studies that contribute points to the law comparison: study -> its tidy table."""
        return {name: self.layout.table(name) for name, s in self.studies.items() if s.study.law_points}

    def scored_labels(self) -> dict[tuple[str, str, str], list[dict]]:
        """(study, run, tokens) -> the variant labels of that checkpoint's rows."""
        return {(e.study, e.run, str(e.tokens)): e.label_records() for es in self.evaluations.values() for e in es}

    def fit_inputs(self, study: str) -> dict[str, str]:
        """The study's own tables its fits read besides its tidy table."""
        return {name: self.artifacts[study][name] for name in self.studies[study].study.fit_inputs}

    def claim_inputs(self) -> dict[str, str]:
        """Named inputs "<study>.<table>" and "<study>.fit.<name>": exactly the files the claims read; and "noise",
        the seed study's noise model, where a job of this run makes it (`qscaling.noise.ClaimNoise`)."""
        tables = {f"{study}.{name}": path for study, named in self.artifacts.items() for name, path in named.items()}
        fits = {f"{study}.fit.{name}": path for study, named in self.fits.items() for name, path in named.items()}
        return tables | fits | self.noise_input()

    def noise_input(self) -> dict[str, str]:
        """{"noise": the seed study's noise model} where a job of this run makes it, else {}."""
        made = {str(path) for jobs in self.jobs.values() for job in jobs for path in job.outputs.values()}
        return {"noise": NOISE_PATH} if NOISE_PATH in made else {}


def config_schema() -> dict:
    """The JSON schema of a whole config (after its preset is merged in), generated from the settings types: the
    top level with every built-in study's block (workflow/schemas/config.schema.yaml, `make schema`)."""
    schema = copy.deepcopy(schema_of(Config))
    definitions = schema.setdefault("$defs", {})
    blocks = {}
    for name in BUILTIN:
        block = copy.deepcopy(load_study(name, module_of(name, {})).settings.block_schema())
        for key, definition in block.pop("$defs", {}).items():
            if definitions.setdefault(key, definition) != definition:
                raise ValueError(f"config schema: two settings types are both named {key}")
        blocks[name] = block
    studies = schema["properties"]["studies"]
    studies["properties"] = blocks
    studies["additionalProperties"] = {
        "type": "object",
        "required": ["module"],
        "description": "a plug-in study's block, checked by its own settings type",
    }
    return schema


def write_config_schema(path: str | Path = SCHEMA_PATH) -> None:
    text = "# Generated from the settings types by `make schema` (qscaling.pipeline.config_schema): do not edit.\n"
    write_text(path, text + yaml.safe_dump(config_schema(), sort_keys=False, allow_unicode=True, width=120))
