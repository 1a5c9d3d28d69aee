"""What a study is to the workflow: the `Study` it registers and the plain records its grid hands over.

Torch-free: the DAG build reads all of it. Job-time code (scoring a checkpoint, a study's extra tables) is named by
"module:function" strings in `Scoring` and `Job`, so building the DAG never imports it.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from qscaling.settings import StudySettings


@dataclass(frozen=True)
class Evaluation:
    """One checkpoint a study scores: run `run` at its `tokens` milestone, under the study's variant `labels`
    (one mapping per variant that trained this run, as (column, value) pairs in column order; empty for none)."""

    study: str
    run: str
    tokens: int
    labels: tuple = ()

    def label_records(self) -> list[dict]:
        return [dict(label) for label in self.labels]


def label(**columns) -> tuple:
    """One variant's row labels in the hashable form `Evaluation.labels` holds."""
    return tuple(columns.items())


@dataclass(frozen=True)
class Quantization:
    """One post-training quantization a checkpoint is scored under."""

    method: str  # rtn | gptq | awq | w8a8
    spec: str  # a qscaling.quant spec string
    splits: tuple = ("val",)  # held-out sets to score the quantized model on

    @property
    def label(self) -> str:
        return f"{self.method}:{self.spec}"


@dataclass(frozen=True)
class Scoring:
    """How each checkpoint of a study is scored: `function` ("module:name") is called as
    `function(checkpoint, inputs, params, labels, device) -> {output: DataFrame}` with "table" (the rows) and every
    name in `outputs` (more per-checkpoint tables); `inputs` are files every scoring job reads besides the run."""

    function: str
    inputs: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    outputs: tuple = ()
    message: str = "Scoring"


@dataclass(frozen=True)
class Job:
    """Another table a study builds: rule `<study>_<name>` calls `function(inputs, outputs, params)` ("module:name")
    on named input paths (a path or a list) and writes the named outputs."""

    name: str
    function: str
    inputs: dict
    outputs: dict
    params: dict = field(default_factory=dict)
    message: str = ""


@dataclass(frozen=True)
class Study:
    """A study plug-in: a paper's grid as runs and evaluations, its tidy table, the laws it fits, the claims it
    checks and the module of its figures. A module registers one as `STUDY` (docs/adding-a-study.md).

    Parse time (torch-free), with the study's typed `settings` and the top level's shared sections `common`
    (`qscaling.config.Common`):
      check(settings, common)                         ConfigError naming the key of any bad size, spec or value
      plan(settings, common, planner)                 the checkpoints it scores, asking the planner for runs
      scoring(settings, common, layout) -> Scoring    how one checkpoint is scored
      jobs(settings, common, evaluations, layout)     the other tables it builds (inputs of fits, figures, claims)
    Analysis (jobs that read tables, never checkpoints):
      build_table(rows, settings)                     its tidy table from the scored rows
      fit_names(settings) / fit_laws(table, settings, **fit_inputs)   {fit name: Fit | why it could not be made}
      fit_tables(table, settings, **fit_inputs)       tables made with the fits, named by `fit_table_names`
      claims(tables, fits, settings, noise)           the paper's claims checked ({"table": its table, …}), those
                                                      between trained runs held to noise.sigma (ClaimNoise)
      law_points(table, settings)                     its runs as points of the law comparison: {"training": …,
                                                      "ptq": …} in qscaling.comparison's schemas
    Before any run (`qscaling plan --power`):
      power(planned, settings, noise)                 its claims between trained runs as claims-table rows
                                                      with `expected_effect` (the paper's law on the planned
                                                      grid: `planned` holds each planned checkpoint's labels,
                                                      size, N and D) and `min_detectable` (noise.sigma's floor)
    """

    name: str
    settings: type[StudySettings]
    plan: Callable
    scoring: Callable
    build_table: Callable
    claims: Callable
    check: Callable | None = None
    jobs: Callable | None = None
    fit_names: Callable | None = None
    fit_laws: Callable | None = None
    fit_tables: Callable | None = None
    fit_table_names: tuple[str, ...] = ()
    fit_inputs: tuple[str, ...] = ()  # tables of its jobs the fits read besides its own, passed by name
    figures: tuple[str, ...] = ()  # the modules declaring its figures (`qscaling.figures.figure`)
    diverged_rule: str | None = None  # how build_table leaves out diverged runs; without one such a row stops it
    law_points: Callable | None = None  # its runs for the law comparison (qscaling.comparison)
    power: Callable | None = None  # its claims' power before any run (`qscaling plan --power`)

    def __post_init__(self):
        if bool(self.fit_names) != bool(self.fit_laws) or bool(self.fit_tables) != bool(self.fit_table_names):
            raise TypeError(f"study {self.name}: fit_names goes with fit_laws, fit_tables with fit_table_names")
