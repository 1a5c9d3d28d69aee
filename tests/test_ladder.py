"""The model ladder: its design on the default config, the per-size recipe, the LR sweep's estimates and the
Chinchilla fit on the ladder's own grid."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from qscaling.config import ConfigError, Training
from qscaling.figures import figure_data
from qscaling.laws.baseline import CHINCHILLA
from qscaling.pipeline import plan_all, resolve
from qscaling.plan import Planner
from qscaling.shape import ModelShape
from qscaling.studies.ladder import analysis as ladder
from qscaling.studies.ladder import figures, grid
from qscaling.studies.ladder.settings import LadderSettings


def shapes(config) -> dict[str, ModelShape]:
    return {size: config.shape(size) for size in config.ladder}


def test_default_ladder_spans_size_with_most_flops_in_the_blocks(default_config):
    sizes = shapes(default_config)
    counts = {size: shape.non_embedding_params for size, shape in sizes.items()}
    assert max(counts.values()) >= 8 * min(counts.values())
    for size, shape in sizes.items():
        assert shape.n_layers >= 3, size
        head = shape.d_model * shape.vocab_size  # the LM head's multiply-adds per token (embedding is a lookup)
        assert counts[size] > head, f"{size}: the head has more parameters than the blocks"


def test_every_ladder_size_reaches_fifty_tokens_per_parameter(default_config):
    planner, evaluations = plan_all(default_config)
    reach = {}
    for evaluation in evaluations["ladder"]:
        spec = planner.runs[evaluation.run].spec
        if any(dict(variant)["variant"] == "grid" for variant in evaluation.labels):
            n = spec.shape.non_embedding_params
            reach[spec.size] = max(reach.get(spec.size, 0), evaluation.tokens / n)
            assert spec.cooldown is not None and spec.total_tokens == evaluation.tokens
    assert set(reach) == set(default_config.studies["ladder"]["sizes"])
    assert min(reach.values()) >= 50


def test_the_sweeps_recipe_point_is_the_grids_run(default_config):
    planner, evaluations = plan_all(default_config)
    settings = LadderSettings.model_validate({**default_config.studies["ladder"], "training": default_config.training})
    block = default_config.studies["ladder"]
    for size in block["lr_sweep"]["sizes"]:
        budget = grid.sweep_budget(settings, default_config, size)
        at_budget = [e for e in evaluations["ladder"] if e.tokens == budget and planner.runs[e.run].spec.size == size]
        assert len(at_budget) == len(block["lr_sweep"]["lr_multipliers"])  # one evaluation per LR, not per label
        shared = [e for e in at_budget if len(e.labels) == 2]
        assert len(shared) == 1 and {dict(v)["variant"] for v in shared[0].labels} == {"grid", "lr_sweep"}
        lrs = sorted(planner.runs[e.run].spec.lr for e in at_budget)
        assert lrs[1] == default_config.training.peak_lr(shapes(default_config)[size].non_embedding_params)


def test_peak_lr_and_warmup_follow_the_size():
    training = Training.model_construct(
        lr=4e-3, lr_reference_params=1e5, lr_exponent=0.5, warmup_tokens_per_param=2.0, warmup_max_fraction=0.1,
        warmup_min_steps=0, batch_size=16, seq_len=128,
    )  # fmt: skip
    assert training.peak_lr(100_000) == 4e-3
    assert training.peak_lr(400_000) == 2e-3 and training.peak_lr(25_000) == 8e-3
    assert training.peak_lr(30_000) == float(f"{4e-3 * 0.3**-0.5:.3g}")  # 3 significant digits
    assert training.peak_lr(30_000, 3) == float(f"{training.peak_lr(30_000) * 3:.3g}")  # a multiple, rounded again
    assert training.warmup_tokens(50_000, "wsd", 10**9) == 100_000  # a trunk: N-scaled, whatever its length
    assert training.warmup_tokens(50_000, "cosine", 500_000) == 50_000  # capped at a tenth of a short run
    assert training.warmup_tokens(50_000, "cosine", 5_000_000) == 100_000
    # At least warmup_min_steps steps of 16 × 128 tokens: a small model's N-scaled warmup is lengthened, a large
    # model's kept; a cosine run's cap at a tenth still holds.
    floored = training.model_copy(update={"warmup_min_steps": 50})
    assert floored.warmup_tokens(20_000, "wsd", 10**9) == 50 * 2048
    assert floored.warmup_tokens(80_000, "wsd", 10**9) == 160_000
    assert floored.warmup_tokens(20_000, "cosine", 500_000) == 50_000


def test_planned_runs_carry_the_size_recipe(default_config):
    planner = Planner(default_config.common(), "data")
    training = default_config.training
    for size, shape in shapes(default_config).items():
        spec = planner.spec(size, 1_000_000, schedule="wsd")
        n = shape.non_embedding_params
        least = training.warmup_min_steps * training.batch_size * training.seq_len
        assert spec.lr == training.peak_lr(n)
        assert spec.warmup_tokens == max(round(training.warmup_tokens_per_param * n), least)
    assert planner.spec("N21k", 1_000_000, lr=1e-3).lr == 1e-3  # a study's override wins


@pytest.mark.parametrize("vertex", [3e-3, 7e-3, 1.5e-2])
def test_lr_optimum_is_the_parabolas_vertex(vertex):
    lrs = np.array([1e-3, 3e-3, 9e-3, 2.7e-2])
    losses = 3.0 + 0.2 * (np.log(lrs) - np.log(vertex)) ** 2
    found, interior = ladder.lr_optimum(pd.DataFrame({"lr": lrs, "loss": losses}))
    assert interior and found == pytest.approx(vertex, rel=1e-6)


def test_lr_optimum_at_the_edge_is_flagged():
    lrs = np.array([1e-3, 3e-3, 9e-3])
    found, interior = ladder.lr_optimum(pd.DataFrame({"lr": lrs, "loss": [3.5, 3.3, 3.1]}))
    assert not interior and found == 9e-3


def test_lr_law_recovers_a_known_exponent():
    n = np.array([2e4, 4e4, 8e4, 2e5])
    noise = np.array([1.03, 0.98, 1.01, 0.99])
    law = ladder.lr_law(pd.DataFrame({"N": n, "lr_opt": 5e-3 * (n / 1e5) ** -0.6 * noise}), 1e5)
    assert law["exponent"] == pytest.approx(0.6, abs=0.05)
    assert law["exponent_ci"][0] < 0.6 < law["exponent_ci"][1]
    assert law["lr_at_reference_ci"][0] < 5e-3 < law["lr_at_reference_ci"][1]


TRUTH = {"A": 40.0, "alpha": 0.35, "B": 300.0, "beta": 0.37, "E": 1.8}


def synthetic_grid(config: dict) -> pd.DataFrame:
    """Epoch AI's constants, rescaled so the loss spans what our ladder sees, on the default grid's (N, D), with
    0.3 % noise."""
    planner, evaluations = plan_all(config)
    points = sorted(
        {
            (planner.runs[e.run].spec.shape.non_embedding_params, e.tokens)
            for e in evaluations["ladder"]
            if any(dict(v)["variant"] == "grid" for v in e.labels)
        }
    )
    grid = pd.DataFrame(points, columns=["N", "D"])
    rng = np.random.default_rng(0)
    grid["loss"] = CHINCHILLA(TRUTH, grid) * (1 + 0.003 * rng.standard_normal(len(grid)))
    return grid.assign(variant="grid", run=[f"r{i}" for i in range(len(grid))])


@pytest.fixture(scope="module")
def synthetic_fit(default_config):
    table = synthetic_grid(default_config)
    return table, ladder.fit_laws(table, LadderSettings.model_construct(bootstrap=60))["chinchilla"]


def test_chinchilla_fit_recovers_known_exponents_on_the_default_grid(synthetic_fit):
    """With 0.3 % noise the fit's CIs cover the true α and β and exclude 0."""
    _, fit = synthetic_fit
    for name in ("alpha", "beta"):
        low, high = fit.ci[name]
        assert low > 0.1 and low <= TRUTH[name] <= high, (name, fit.ci[name])
    assert fit.heldout_relative_error < 0.03


def test_the_profile_over_e_finds_the_true_e_and_the_claim_reads_the_ci(synthetic_fit):
    table, fit = synthetic_fit
    profile = ladder.fit_tables(table, LadderSettings.model_construct())["e_profile"]
    assert len(profile) == ladder.E_PROFILE_POINTS and profile["E"].max() == pytest.approx(
        ladder.E_PROFILE_TOP * table["loss"].min()
    )
    # The objective is least at the held E nearest the truth, and α there is near the truth too.
    nearest = profile.iloc[(profile["E"] - TRUTH["E"]).abs().argmin()]
    assert profile["objective"].idxmin() == nearest.name
    assert nearest["alpha"] == pytest.approx(TRUTH["alpha"], abs=0.1)
    # Held far from the truth, E fits measurably worse: the 0.3 %-noise grid identifies it.
    assert len(ladder.flat_ridge(profile)) < len(profile)
    row = ladder.alpha_identified_claim(fit, profile)
    assert row["verdict"] == "reproduced" and row["ci"] == f"[{fit.ci['alpha'][0]:.3f}, {fit.ci['alpha'][1]:.3f}]"


def test_an_unidentified_alpha_is_not_reproduced_with_the_ridge_it_moves_along(synthetic_fit):
    _, fit = synthetic_fit
    low_ci = dataclasses.replace(fit, ci={**fit.ci, "alpha": (0.07, 0.5)})
    ridge = pd.DataFrame(
        {"E": [0.001, 0.5, 1.0, 2.0], "alpha": [0.08, 0.1, 0.13, 0.33], "beta": [0.3] * 4,
         "objective": [0.1894, 0.1893, 0.1893, 0.195], "heldout_relative_error": [0.0207, 0.0207, 0.0208, 0.0224]}
    )  # fmt: skip
    row = ladder.alpha_identified_claim(low_ci, ridge)
    assert row["verdict"] == "not reproduced"
    assert "E held anywhere in [0.001, 1]" in row["statistic"] and "α runs 0.080–0.130" in row["statistic"]
    at_bound = dataclasses.replace(fit, params={**fit.params, "alpha": 3.0}, ci={**fit.ci, "alpha": (2.9, 3.0)})
    assert ladder.alpha_identified_claim(at_bound, ridge)["verdict"] == "inconclusive"


def test_the_profile_figure_draws_the_exponents_the_profile_fitted(synthetic_fit):
    table, fit = synthetic_fit
    profile = ladder.fit_tables(table, LadderSettings.model_construct())["e_profile"]
    axes = figure_data(figures.ladder_profile({"profile": profile}, {"chinchilla": fit}))["axes"]
    alpha = next(line for line in axes[0]["lines"] if line["label"] == "α with E held")
    assert alpha["y"] == pytest.approx(profile.sort_values("E")["alpha"].tolist())


def test_sweep_without_the_recipes_lr_is_refused(raw_config):
    raw_config["studies"]["ladder"]["lr_sweep"]["lr_multipliers"] = [0.5, 2, 4]
    with pytest.raises(ConfigError, match=r"studies.ladder.lr_sweep.lr_multipliers: must include 1"):
        resolve(raw_config)


def test_a_size_with_no_budget_in_range_is_refused(raw_config):
    raw_config["studies"]["ladder"]["max_tokens_per_param"] = 6
    raw_config["studies"]["ladder"]["min_tokens_per_param"] = 5.5
    with pytest.raises(ConfigError, match=r"config key studies.ladder.budgets: no budget puts N\w+ \(N="):
        resolve(raw_config)
