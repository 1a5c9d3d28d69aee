"""`qscaling plan --power`: before any run, each claim between trained runs with the effect its paper's law
predicts on the planned grid beside the smallest effect the seed noise lets it resolve: the same two numbers the
claims table carries after the run."""

import math
import subprocess
import sys

import pandas as pd
import pytest
from conftest import REPO_ROOT

from qscaling.cost import load_config, planned_rows, power_table
from qscaling.noise import MAD, ClaimNoise, NoiseModel, Sigma, noise_floor, write_noise_models
from qscaling.pipeline import Pipeline


@pytest.fixture(scope="module")
def pipeline():
    return Pipeline.from_config(load_config((), "default"))


def noise_of(value: float, dof: float = 4.0) -> ClaimNoise:
    """A seed study that measured σ_seed = `value` for every δ quantity at one cell (by rule everywhere)."""
    sigma = Sigma(value, dof, 5, MAD, f"σ_seed {value} nats")
    cell = {("N21k", 500000): sigma}
    return ClaimNoise({quantity: NoiseModel(quantity, cell) for quantity in ("delta", "delta_branched", "loss")})


def test_planned_rows_carry_each_points_labels_size_n_and_budget(pipeline):
    rows = planned_rows(pipeline, "chen2025")
    w4a4 = rows[(rows["precision"] == "W4A4") & (rows["G"] == 8) & (rows["size"] == "N83k")]
    assert sorted(w4a4["D"].unique()) == [500000, 1000000]  # the N83k cell's budgets, D/N ≥ 5
    assert (w4a4["N"] == pipeline.planner.runs[w4a4["run"].iloc[0]].spec.shape.non_embedding_params).all()
    assert not rows["diverged"].any()


def test_the_expected_effects_before_the_run_are_the_claims_tables_after_it(pipeline):
    claims = pd.read_csv(REPO_ROOT / "reference" / "default" / "results" / "claims.csv", keep_default_na=False)
    power = power_table(pipeline, ClaimNoise())
    merged = power.merge(claims, on=["study", "claim"], suffixes=("", "_run"))
    assert len(merged) == len(power) >= 10  # every power row is a claim of the run
    measured = merged[merged["expected_effect_run"] != ""]
    assert len(measured) >= 7
    assert (measured["expected_effect"] == measured["expected_effect_run"].astype(str)).all()


def test_the_floor_is_the_t_floor_of_the_seed_noise_and_decides_what_resolves(pipeline):
    small, large = power_table(pipeline, noise_of(0.001)), power_table(pipeline, noise_of(1.0))
    gamma_g = "W4A4 QAT error grows with the group size (γ_G > 0)"
    floor = noise_floor(Sigma(0.001, 4.0, 5, MAD, ""))
    row = small.set_index("claim").loc[gamma_g]
    assert row["min_detectable"] == f"{floor:.2g}" and row["resolves"] == "yes"
    assert large.set_index("claim").loc[gamma_g, "resolves"] == "no: expected below the floor"
    without = power_table(pipeline, ClaimNoise())
    assert set(without["resolves"]) == {"unknown: no σ_seed"}
    fc2 = small.set_index("claim").loc["The FC2 input at 8 bits cuts W4A4 QAT error (Fig. 9)"]
    points = 2  # W4A4 and FC2-8bit share N21k, 0.5M, G ∈ {4, 8}: the mean cut's SD is √(2/2) σ_seed
    assert fc2["min_detectable"] == f"{noise_floor(Sigma(0.001, 4.0, 5, MAD, ''), math.sqrt(2 / points)):.2g}"


def plan_power(*args):
    return subprocess.run([sys.executable, "-m", "qscaling.cli", "plan", "--power", *args], capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_plan_power_reads_a_noise_file_and_says_what_resolves(tmp_path):
    path = tmp_path / "noise.json"
    write_noise_models(dict(noise_of(0.001).models), path)
    result = plan_power("--noise", str(path))
    assert result.returncode == 0, result.stderr
    assert "chen2025" in result.stdout and "sun2025" in result.stdout
    assert "claims expect an effect above their floor" in result.stdout.splitlines()[-1]
    broken = tmp_path / "broken.json"
    broken.write_text("{}")
    result = plan_power("--noise", str(broken))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1 and "broken.json" in result.stderr
