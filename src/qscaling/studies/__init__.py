"""Studies: each paper's grid as runs and evaluations, its tidy table, the laws it fits and the claims it checks.

A study is a plug-in: a module with the surface below, registered by its block under `studies:` in the config
(built-in ones are `qscaling.studies.<name>`; any other importable module is named by the block's `module:` key).
Generic code — the workflow's rules and scripts, this package — reads only this surface and names no study:

  STUDY                                            its name (the config block's key)
  check_config(config)                             ConfigError naming the key of any bad size, spec or grid value
  plan(config, planner) -> list[Evaluation]        the checkpoints it scores (asking the planner for runs)
  scoring(config, layout) -> Scoring               how one checkpoint is scored (qscaling.studies.ptq.ptq_scoring
                                                   for post-training quantization)
  jobs(config, evaluations, layout) -> list[Job]   optional: the other tables it builds (inputs of figures/claims)
  build_table(rows, settings) -> DataFrame         its tidy table from the scored rows
  DIVERGED_RULE = "..."                            optional: how build_table leaves out the rows of diverged runs
                                                   (`diverged` True); a study without one stops at such a row
  fit_names(settings) / fit_laws(table, settings)  its fits: {name: Fit | reason it could not be made}
  fit_tables(table, settings) -> {name: DataFrame} optional, with FIT_TABLES naming them: tables made with the fits
  FIT_INPUTS = ("name", ...)                       optional: tables of its jobs the fits also read, passed to
                                                   fit_laws and fit_tables as keyword arguments by name
  SHARED_SETTINGS = ("training",)                  optional: top-level config sections added to `settings`
  claims(tables, fits, settings) -> list[dict]     the paper's claims checked (tables: {"table": its table, …})

`settings` is the study's own config block: library code never receives the whole config. Figures are declared
next to their functions in the study's figure module (`qscaling.figures.<name>`, or the module's `FIGURES`), see
`qscaling.figures.figure`.
"""

import importlib
from dataclasses import dataclass, field

import pandas as pd

from qscaling.plan import Planner, log_spaced_tokens


def try_fit(law_name: str, rows, **options):
    """A Fit, or the one-line reason it could not be made (too few points, non-positive targets, …)."""
    from qscaling.laws import LAWS, fit

    try:
        return fit(LAWS[law_name], rows, **options)
    except ValueError as error:
        return f"{law_name}: {error}"


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
class PartneredPoint:
    """A run trained at `precision` (a `training_precision`) beside its full-precision partner: the same size,
    budget and `recipe` (seed, learning rate), the partner's checkpoint labelled `partner_label`."""

    size: str
    budget: int
    precision: dict
    label: tuple
    partner_label: tuple
    recipe: dict = field(default_factory=dict)


def partnered_evaluations(study: str, block: dict, planner, points) -> list[Evaluation]:
    """Each `PartneredPoint`'s run and its partner, annealed by the study block's `anneal` and
    `cooldown_fraction`: one evaluation per checkpoint with every label it carries (a partner shared by several
    points keeps its first label)."""
    anneal, fraction = block["anneal"], block["cooldown_fraction"]
    labels = {}
    for point in points:
        annealed = (point.size, point.budget, anneal, fraction)
        run = planner.annealed(*annealed, training_precision=point.precision, **point.recipe)
        labels.setdefault((run, point.budget), []).append(point.label)
        partner = planner.annealed(*annealed, **point.recipe)
        labels.setdefault((partner, point.budget), [point.partner_label])
    return [Evaluation(study, run, tokens, tuple(variants)) for (run, tokens), variants in labels.items()]


@dataclass(frozen=True)
class Quantization:
    method: str  # rtn | gptq | awq | w8a8
    spec: str  # a qscaling.quant spec string
    splits: tuple = ("val",)  # held-out sets to score the quantized model on

    @property
    def label(self) -> str:
        return f"{self.method}:{self.spec}"


@dataclass(frozen=True)
class Layout:
    """Where the workflow keeps each artifact, for studies to name their jobs' inputs and outputs."""

    corpus: str

    def data(self, name: str) -> str:
        """A file of the token data: train.bin, val.bin, ood.bin, tokenizer.json, corpus.json."""
        return f"results/data/{self.corpus}/{name}"

    @staticmethod
    def run_summary(run: str) -> str:
        return f"results/runs/{run}/run.json"

    @staticmethod
    def table(study: str, name: str | None = None) -> str:
        return f"results/tables/{study}.parquet" if name is None else f"results/tables/{study}_{name}.parquet"

    @staticmethod
    def fit(study: str, name: str) -> str:
        return f"results/fits/{study}/{name}.json"

    @staticmethod
    def fit_table(study: str, name: str) -> str:
        return f"results/fits/{study}/{name}.parquet"

    @staticmethod
    def scored(study: str, output: str = "table", run: str = "{run}", tokens="{tokens}") -> str:
        """One checkpoint's scoring output: the rows (`table`) or another per-checkpoint table it writes."""
        if output == "table":
            return f"results/ptq/{study}/{run}/{tokens}.parquet"
        return f"results/{study}/{output}/{run}/{tokens}.parquet"


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


def ptq_scoring(config: dict, layout, study: str, quantizations) -> Scoring:
    """Post-training quantization of every checkpoint (`score_job`): held-out val (and ood where a quantization
    scores it), calibration windows from the training shard."""
    block = config["studies"][study]
    inputs = {"val": layout.data("val.bin"), "calibration": layout.data("train.bin")}
    if config["evaluation"]["ood_source"] and any("ood" in q.splits for q in quantizations):
        inputs["ood"] = layout.data("ood.bin")
    params = {
        "study": study,
        "quantizations": [q.__dict__ for q in quantizations],
        "calibration": block["calibration"],
        "eval_tokens": block["eval_tokens"],
        "batch_size": config["evaluation"]["batch_size"],
        "gptq_damp": config["ptq"]["gptq_damp"],
    }
    return Scoring("qscaling.studies.ptq:score_job", inputs, params, message="Quantizing and scoring")


def as_trained_scoring(config: dict, layout, study: str) -> Scoring:
    """Every checkpoint evaluated as it trained on the held-out windows (`score_as_trained`): the scoring of a study
    whose δ pairs separately trained runs, with the study block's `eval_tokens`."""
    params = {"eval_tokens": config["studies"][study]["eval_tokens"], "batch_size": config["evaluation"]["batch_size"]}
    return Scoring(
        f"{__name__}:score_as_trained", {"val": layout.data("val.bin")}, params, message="Scoring as trained"
    )


def score_as_trained(checkpoint, inputs: dict, params: dict, labels: list[dict], device: str) -> dict:
    """One checkpoint evaluated as it trained: its loss on every held-out window (what δ is paired over)."""
    _, _, windows, _ = score_windows(checkpoint, inputs["val"], params, device)
    return {"table": with_labels(windows, labels)}


def score_windows(checkpoint, val_path: str, params: dict, device: str):
    """A checkpoint loaded as it trained and evaluated on the held-out windows: (model, held-out tokens, one row
    per window with its loss and the checkpoint's columns, those columns). Per-window rows let a study pair two
    models' losses on the same windows (δ and its standard error) when it builds its table."""
    import numpy as np

    from qscaling.data import load_tokens
    from qscaling.evaluate import evaluate_loss
    from qscaling.quant.as_trained import load_as_trained
    from qscaling.studies.ptq import checkpoint_columns

    model, metadata = load_as_trained(checkpoint)
    model.to(device)
    tokens = load_tokens(val_path)
    seq_len = model.config.max_position_embeddings
    result = evaluate_loss(
        model, tokens, seq_len=seq_len, batch_size=params["batch_size"], max_tokens=params["eval_tokens"]
    )
    columns = checkpoint_columns(model, metadata)
    windows = pd.DataFrame({"window": np.arange(len(result["per_window"])), "loss": result["per_window"].numpy()})
    return model, tokens, windows.assign(**columns)[[*columns, "window", "loss"]], columns


def non_embedding_params(config: dict, size: str) -> int:
    """N of a ladder size, from its shape (no torch)."""
    from qscaling.shape import ModelShape

    return ModelShape(
        **config["ladder"][size], vocab_size=config["corpus"]["vocab_size"], seq_len=config["training"]["seq_len"]
    ).non_embedding_params


def scaled_peak_lr(config: dict, size: str, multiplier: float) -> float:
    """The recipe's peak LR for a ladder size times `multiplier`, rounded as the recipe's is (`qscaling.plan`)."""
    from qscaling.plan import peak_lr

    return float(f"{peak_lr(config['training'], non_embedding_params(config, size)) * multiplier:.3g}")


def with_labels(frame: pd.DataFrame, labels: list[dict]) -> pd.DataFrame:
    """`frame` repeated under each variant label (its columns added); unchanged without labels."""
    if not labels:
        return frame
    labels = pd.DataFrame(labels)
    return frame.merge(labels.drop(columns=[column for column in labels if column in frame]), how="cross")


def diverged_rows(summary: dict, tokens: int, labels: list[dict]) -> pd.DataFrame:
    """The rows of a checkpoint its run never wrote because training diverged first (`run.json`'s `diverged`
    record, `qscaling.train`): the columns that say which checkpoint it is, `diverged` True and the reason."""
    from qscaling.quant.precision import run_precision_label
    from qscaling.runspec import RunSpec

    spec = RunSpec.from_dict(summary["spec"])
    row = {
        "run": summary["run_id"],
        "size": spec.size,
        "N": spec.shape.non_embedding_params,
        "D": -(-tokens // spec.tokens_per_step) * spec.tokens_per_step,
        "milestone": tokens,
        "training_precision": run_precision_label(summary["spec"]),
        "diverged": True,
        "diverged_reason": summary["diverged"]["reason"],
    }
    return with_labels(pd.DataFrame([row]), labels)


def build_study_table(module, rows: pd.DataFrame, settings: dict) -> pd.DataFrame:
    """The study's tidy table from its scored rows; rows of diverged runs need the study's DIVERGED_RULE."""
    if "diverged" in rows and rows["diverged"].eq(True).any() and not hasattr(module, "DIVERGED_RULE"):
        runs = sorted(rows.loc[rows["diverged"].eq(True), "run"].unique())
        raise ValueError(
            f"{module.STUDY}: run(s) {', '.join(runs)} diverged and the study has no rule to leave them out"
        )
    return module.build_table(rows, settings)


PARTNER_KEYS = ["size", "N", "D", "seed"]  # a point trained at a precision and its full-precision partner share these


def partnered_table(rows: pd.DataFrame, study: str, variant: list, labels: list, partner_column: str, full: str):
    """One row per checkpoint and variant (`variant`: the columns that tell one point from another besides
    PARTNER_KEYS; `labels`: every label column kept): its loss over the held-out windows and, for a point whose
    `partner_column` is not `full`, δ = its loss − its full-precision partner's, paired over the same windows, with
    standard errors. `budget` is the planned token budget, D the tokens seen. A diverged run keeps a row with
    `diverged` True and no loss; a point without a partner (trained or diverged) is an error."""
    from qscaling.evaluate import standard_error

    keys = PARTNER_KEYS
    rows, diverged = split_diverged(rows)
    per_window = rows.drop_duplicates(["run", "window", *variant, "seed"])
    losses = (
        per_window.groupby([*keys, "milestone", *labels, "run"], sort=False, dropna=False)
        .agg(loss=("loss", "mean"), loss_se=("loss", standard_error), windows=("window", "size"))
        .reset_index()
    )
    is_full = per_window[partner_column] == full
    partners = per_window[is_full][[*keys, "window", "loss"]].drop_duplicates([*keys, "window"])
    points = per_window[~is_full]
    paired = points.merge(partners, on=[*keys, "window"], suffixes=("", "_base"), validate="many_to_one")
    paired["difference"] = paired["loss"] - paired["loss_base"]
    deltas = (
        paired.groupby(["run", *variant, "seed"], sort=False)
        .agg(base_loss=("loss_base", "mean"), delta=("difference", "mean"), delta_se=("difference", standard_error))
        .reset_index()
    )
    table = losses.merge(deltas, on=["run", *variant, "seed"], how="left")
    partnered = {tuple(key) for key in partners[keys].drop_duplicates().to_numpy()}
    partnered |= {tuple(key) for key in diverged.loc[diverged[partner_column] == full, keys].to_numpy()}
    unpartnered = {tuple(key) for key in points[keys].drop_duplicates().to_numpy()} - partnered
    if unpartnered:
        raise ValueError(f"{study}: quantized points without a full-precision partner: {sorted(unpartnered)}")
    table = table.assign(diverged=False, diverged_reason="")
    if not diverged.empty:
        lost = diverged[[*keys, "milestone", *labels, "run", "diverged_reason"]].assign(diverged=True)
        table = pd.concat([table, lost], ignore_index=True)
    return table.rename(columns={"milestone": "budget"})


def trained(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of runs that trained (not diverged)."""
    return table[~table["diverged"].astype(bool)]


def recipe_seed(table: pd.DataFrame) -> int:
    """The seed most points trained with (the recipe's): the `seeds` repeats are a few points at other seeds."""
    return int(table["seed"].mode().min())


def split_diverged(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scored rows, rows of diverged checkpoints), each without the `diverged` columns."""
    if "diverged" not in rows:
        return rows, rows.iloc[:0]
    diverged = rows["diverged"].eq(True)
    columns = ["diverged", "diverged_reason"]
    # Scored rows' columns the diverged rows lack (loss, window, …) go; with none diverged, every column stays.
    lost = rows[diverged].dropna(axis="columns", how="all") if diverged.any() else rows[diverged]
    return rows[~diverged].drop(columns=columns), lost


def check_local_models(key: str, entries) -> None:
    """`source: local` entries ({label, path | repo [revision], tokens}) name HF-format directories or hub ids, one
    checkpoint per (label, tokens); a hub id is fetched by its job, where a hub is reachable."""
    from pathlib import Path

    from qscaling.config import ConfigError

    if not entries:
        raise ConfigError(f"config key {key}: source 'local' needs at least one {{label:, path:, tokens:}}")
    seen = {}
    for index, entry in enumerate(entries):
        if ("path" in entry) == ("repo" in entry):
            raise ConfigError(f"config key {key}.{index}: give either path (a local directory) or repo (a hub id)")
        if "path" in entry and not (Path(entry["path"]) / "config.json").is_file():
            raise ConfigError(f"config key {key}.{index}.path: {entry['path']} is not an HF-format model directory "
                              "(no config.json)")  # fmt: skip
        where = seen.setdefault((entry["label"], entry["tokens"]), index)
        if where != index:
            raise ConfigError(f"config key {key}.{index}: {entry['label']} at {entry['tokens']} tokens is also "
                              f"entry {where}")  # fmt: skip


def local_evaluations(study: str, entries, planner) -> list[Evaluation]:
    """One evaluation per `source: local` entry: your own checkpoints imported as sizes of the study."""
    evaluations = []
    for entry in entries:
        if "path" in entry:
            run = planner.local(entry["label"], entry["tokens"], entry["path"])
        else:
            run = planner.hub(entry["repo"], entry["label"], {entry["tokens"]: entry.get("revision", "main")})
        evaluations.append(Evaluation(study, run, entry["tokens"]))
    return evaluations


def load_study(name: str, block: dict):
    """The module of the study configured as `studies.<name>` (its `module:` key, else qscaling.studies.<name>)."""
    from qscaling.config import ConfigError

    module_name = block.get("module", f"qscaling.studies.{name}") if isinstance(block, dict) else None
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(f"config key studies.{name}: no study module {module_name!r} ({error})") from None
    if getattr(module, "STUDY", None) != name:
        raise ConfigError(
            f"config key studies.{name}: module {module_name} declares STUDY = "
            f"{getattr(module, 'STUDY', None)!r}, not {name!r}"
        )
    return module


def study_modules(config: dict) -> dict:
    """Every configured study, in config order: name -> module."""
    return {name: load_study(name, block) for name, block in config["studies"].items()}


def settings(config: dict, study: str) -> dict:
    """The study's own config block, plus the top-level sections its module names in `SHARED_SETTINGS` (e.g.
    "training", for a claim that depends on the optimizer recipe): what its table, fits and claims read."""
    module = load_study(study, config["studies"][study])
    own = {key: value for key, value in config["studies"][study].items() if key != "module"}
    return {**own, **{section: config[section] for section in getattr(module, "SHARED_SETTINGS", ())}}


def fit_names(module, config: dict) -> list[str]:
    return module.fit_names(settings(config, module.STUDY))


def jobs(module, config: dict, evaluations: list, layout: Layout) -> list[Job]:
    return module.jobs(config, evaluations, layout) if hasattr(module, "jobs") else []


def artifacts(module, study_jobs: list[Job], layout: Layout) -> dict[str, str]:
    """Every table a study makes, by name: "table" (its tidy table), its jobs' outputs and its fit tables."""
    study = module.STUDY
    tables = {"table": layout.table(study)}
    for job in study_jobs:
        tables.update({name: path for name, path in job.outputs.items() if str(path).endswith(".parquet")})
    tables.update({name: layout.fit_table(study, name) for name in getattr(module, "FIT_TABLES", ())})
    return tables


def plan_all(config: dict, data_id: str) -> tuple[Planner, dict[str, list[Evaluation]]]:
    """Every run the configuration needs (shared where specs coincide) and each study's evaluations."""
    planner = Planner(config, data_id)
    curves = config["learning_curves"]
    milestones = log_spaced_tokens(curves["first_milestone"], curves["total_tokens"], curves["milestones"])
    for size in curves["sizes"]:
        planner.trunk(size, upto=curves["total_tokens"], milestones=milestones)
    evaluations = {name: module.plan(config, planner) for name, module in study_modules(config).items()}
    return planner, evaluations


def learning_curve_runs(config: dict, planner: Planner) -> list[str]:
    return [
        planner.trunk(size, upto=config["learning_curves"]["total_tokens"])
        for size in config["learning_curves"]["sizes"]
    ]
