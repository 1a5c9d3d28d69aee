"""Every law on the same runs (qscaling.comparison): the points each study contributes, gathered once per run, and
each law fitted on them and scored on held-out sizes and budgets."""

import copy

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO_ROOT

from qscaling.comparison import (
    IN_SAMPLE,
    PAPER_SCHEME,
    SCHEMES,
    compare,
    full_precision,
    gather,
    ptq_frame,
    training_frame,
)
from qscaling.laws import LAWS
from qscaling.layout import LAW_COMPARISON
from qscaling.pipeline import Pipeline, resolve

SMOKE_TABLES = REPO_ROOT / "reference" / "smoke" / "results" / "tables"


def chinchilla_runs(noise=0.0, seed=0) -> pd.DataFrame:
    """Full-precision runs on a 4 × 4 grid of N and D whose loss follows known Chinchilla constants."""
    law = LAWS["chinchilla"]
    truth = {"A": 40.0, "alpha": 0.3, "B": 60.0, "beta": 0.3, "E": 2.0}
    N, D = np.meshgrid([2e4, 4e4, 8e4, 1.6e5], [5e5, 1e6, 2e6, 4e6])
    grid = pd.DataFrame({"N": N.ravel(), "D": D.ravel()})
    loss = law(truth, grid) * (1 + noise * np.random.default_rng(seed).standard_normal(len(grid)))
    runs = grid.assign(run=[f"run{i}" for i in range(len(grid))], loss=loss)
    return full_precision(runs, "synthetic")


def test_a_law_recovered_from_its_own_runs_predicts_held_out_sizes_and_budgets():
    training, ptq = gather([{"training": chinchilla_runs()}])
    table = compare(training, ptq, ["chinchilla", "kaplan", "castro2025.quartet"])
    chinchilla = table[table["law"] == "chinchilla"].set_index("scheme")
    assert set(chinchilla.index) == {IN_SAMPLE, *SCHEMES.values(), PAPER_SCHEME}
    for scheme in (IN_SAMPLE, *SCHEMES.values()):
        assert chinchilla.loc[scheme, "relative_error"] < 1e-3
    # Hoffmann et al.'s constants were fitted on models 10^4 times larger: they do not transfer.
    assert chinchilla.loc[PAPER_SCHEME, "relative_error"] > 0.5
    assert chinchilla.loc[IN_SAMPLE, "n_points"] == 16 and chinchilla.loc[IN_SAMPLE, "n_sizes"] == 4
    # Kaplan's form cannot follow an irreducible loss: worse on held-out budgets than the law that made the data.
    kaplan = table[table["law"] == "kaplan"].set_index("scheme")
    assert kaplan.loc[SCHEMES["D"], "relative_error"] > 10 * chinchilla.loc[SCHEMES["D"], "relative_error"]
    quartet = table[table["law"] == "castro2025.quartet"]
    assert len(quartet) == 1 and quartet["note"].iloc[0].startswith("not fitted: 0 points")


def test_shared_runs_are_gathered_once_and_bad_points_are_refused():
    runs = chinchilla_runs()
    training, _ = gather([{"training": runs}, {"training": runs.assign(study="another")}])
    assert len(training) == len(runs) and set(training["study"]) == {"synthetic"}
    with pytest.raises(ValueError, match="column 'D' missing"):
        training_frame(runs.drop(columns="D"))
    with pytest.raises(ValueError, match="format 'bf16' unknown"):
        training_frame(runs.assign(format="bf16"))
    ptq = ptq_frame({"run": ["a"], "study": ["s"], "N": [1e4], "D": [1e6], "method": ["gptq"], "bits": [4],
                     "base_loss": [4.0], "delta": [0.1]})  # fmt: skip
    assert ptq["bits"].dtype == float


def test_every_contributing_study_gives_points_in_the_schemas():
    raw = yaml.safe_load((REPO_ROOT / "config.yaml").read_text()) | {"scale": "smoke"}
    _, studies = resolve(raw)
    contributions = {
        name: configured.study.law_points(pd.read_parquet(SMOKE_TABLES / f"{name}.parquet"), configured.settings)
        for name, configured in studies.items()
        if configured.study.law_points
    }
    assert set(contributions) == {"ladder", "kumar2024", "kumar2024_training", "sun2025", "chen2025"}
    training, ptq = gather(contributions.values())
    formats = training.groupby("format")["run"].nunique()
    assert set(formats.index) == {"none", "int", "fp"} and formats.min() >= 3
    full = training[training["format"] == "none"]
    assert np.isinf(full[["P_w", "P_a", "P_kv"]]).all().all() and full["E"].isna().all()
    fp = training[training["format"] == "fp"]
    assert fp[["E", "M"]].notna().all().all() and ((fp["P_w"] == 1 + fp["E"] + fp["M"]) | fp["B"].notna()).all()
    # Chen's fp32 partners are the same runs as the other studies' fp32 runs: one row each.
    assert not training.duplicated(["run", "D"]).any()
    assert set(ptq["method"]) == {"gptq", "awq", "rtn"} and (ptq["bits"] < 16).all()


def test_the_pipeline_compares_laws_when_a_study_contributes_and_draws_the_comparison():
    raw = yaml.safe_load((REPO_ROOT / "config.yaml").read_text()) | {"scale": "smoke"}
    pipeline = Pipeline.from_config(raw)
    assert set(pipeline.comparison_inputs) == {"ladder", "kumar2024", "kumar2024_training", "sun2025", "chen2025"}
    assert pipeline.artifact_paths[LAW_COMPARISON] == "results/tables/law_comparison.csv"
    assert "common_law_comparison" in {spec.target for spec, _ in pipeline.figures}
    only = {"ahmadian2023"}
    alone = copy.deepcopy(raw)
    for block in (alone, alone["presets"]["smoke"]):
        block["studies"] = {name: value for name, value in block["studies"].items() if name in only}
    bare = Pipeline.from_config(alone)
    assert not bare.comparison_inputs and LAW_COMPARISON not in bare.artifact_paths
