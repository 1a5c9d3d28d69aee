"""Studies: each paper's grid as runs and evaluations, its tidy table, the laws it fits and the claims it checks.

Every study module exposes the same surface:
  `check_config(config)`                        ConfigError naming the key of any bad size, spec or grid value
  `plan(config, planner) -> list[Evaluation]`   the checkpoints it scores (asking the planner for runs)
  `quantizations(config) -> list[Quantization]` what each checkpoint is quantized with
  `build_table(rows, config) -> DataFrame`      its tidy table from the evaluation rows
  `fit_names(config)` / `fit_laws(table, config) -> dict[name, Fit | reason]`, `claims(table, fits, config)`
"""

from dataclasses import dataclass

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
    """One checkpoint a study scores: run `run` at its `tokens` milestone."""

    study: str
    run: str
    tokens: int


@dataclass(frozen=True)
class Quantization:
    method: str  # rtn | gptq | awq | w8a8
    spec: str  # a qscaling.quant spec string
    splits: tuple = ("val",)  # held-out sets to score the quantized model on

    @property
    def label(self) -> str:
        return f"{self.method}:{self.spec}"


def study_modules() -> dict:
    from qscaling.studies import ahmadian2023, kumar2024, ouyang2024

    return {"kumar2024": kumar2024, "ouyang2024": ouyang2024, "ahmadian2023": ahmadian2023}


def plan_all(config: dict, data_id: str) -> tuple[Planner, dict[str, list[Evaluation]]]:
    """Every run the configuration needs (shared where specs coincide) and each study's evaluations."""
    planner = Planner(config, data_id)
    curves = config["learning_curves"]
    milestones = log_spaced_tokens(curves["first_milestone"], curves["total_tokens"], curves["milestones"])
    for size in curves["sizes"]:
        planner.trunk(size, upto=curves["total_tokens"], milestones=milestones)
    evaluations = {name: module.plan(config, planner) for name, module in study_modules().items()}
    return planner, evaluations


def learning_curve_runs(config: dict, planner: Planner) -> list[str]:
    return [
        planner.trunk(size, upto=config["learning_curves"]["total_tokens"])
        for size in config["learning_curves"]["sizes"]
    ]


def collect_claims(root, config: dict):
    """Every study's claims checked against the tables and fits under `root/results` → the claims frame."""
    import json
    from pathlib import Path

    import pandas as pd

    from qscaling.laws import load_fit
    from qscaling.studies.claims import claims_frame
    from qscaling.studies.ouyang2024 import weight_change_claim

    results, rows = Path(root) / "results", []

    def read_fit(path):
        return None if "error" in json.loads(path.read_text()) else load_fit(path)

    for name, study in study_modules().items():
        table = pd.read_parquet(results / "tables" / f"{name}.parquet")
        fits = {fit: read_fit(results / "fits" / name / f"{fit}.json") for fit in study.fit_names(config)}
        rows.extend(study.claims(table, fits, config))
    rows.append(weight_change_claim(pd.read_parquet(results / "tables" / "ouyang2024_weight_changes.parquet")))
    return claims_frame(rows, config["scale"])
