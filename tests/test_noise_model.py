"""The shared noise model on synthetic seeds of known σ: robust σ_seed, t-intervals whose 95 % covers the truth
90–99 % of the time where the naive versions (normal quantiles, the sample SD, n − 1 dof for a MAD, a row
bootstrap, a partner counted twice) miss, JSON round trips, the conservative rule, one-line errors."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from qscaling.noise import (
    MAD,
    NOISE_PATH,
    OWN_REPEATS,
    OWN_REPEATS_NOTE,
    POOLED_MAD,
    RULE,
    ClaimNoise,
    NoiseModel,
    Sigma,
    cluster_bootstrap,
    difference_interval,
    mad_dof,
    mad_scale,
    mad_sigma,
    mean_interval,
    noise_floor,
    pooled_sigma,
    read_noise_model,
    variant_differences,
    weighted_mean,
    within_noise,
    write_noise_model,
    write_noise_models,
)
from qscaling.studies.claims import INCONCLUSIVE, NO_SIGMA, claim, floored_by_seed_noise

SIGMA = 0.02  # nats: the true seed-to-seed σ of one run's loss
REPLICATES = 20_000
NORMAL_95 = 1.959963984540054
CELL = ("N21k", 500_000)


def unit_sigma(dof: float) -> Sigma:
    """σ_seed = 1 with `dof`: noise floors are linear in σ, so replicates' floors are this one's times their σ̂."""
    return Sigma(1.0, dof, 2, MAD, "unit")


def coverage(estimates: np.ndarray, half_widths: np.ndarray, truth: float) -> float:
    return float(np.mean(np.abs(estimates - truth) <= half_widths))


def test_the_mad_is_unbiased_for_normal_seeds():
    rng = np.random.default_rng(0)
    for seeds in (2, 3, 5, 8, 25):  # 25: beyond the table, Croux & Rousseeuw's n / (n − 0.8)
        values = SIGMA * rng.standard_normal((100_000, seeds))
        assert np.mean(mad_scale(values)) == pytest.approx(SIGMA, rel=0.01), seeds


def test_one_bad_seed_barely_moves_the_mad_where_it_drives_the_sd():
    rng = np.random.default_rng(1)
    values = SIGMA * rng.standard_normal((REPLICATES, 5))
    values[:, 0] += 20 * SIGMA  # one seed of five diverged a little
    assert np.median(mad_scale(values)) < 1.5 * SIGMA
    assert np.median(values.std(axis=1, ddof=1)) > 5 * SIGMA
    losses = [4.10, 4.12, 4.11, 4.13, 5.0]
    assert mad_sigma(losses).value < 0.03 < 0.3 < np.std(losses, ddof=1)


@pytest.mark.parametrize("seeds", [3, 5])
def test_a_difference_of_two_runs_is_covered_with_t_quantiles_of_the_mads_dof(seeds):
    """σ_seed from `seeds` runs at one cell; the claim compares two other runs, one seed each (SD σ√2)."""
    rng = np.random.default_rng(seeds)
    cell = SIGMA * rng.standard_normal((REPLICATES, seeds))
    truth = 0.03
    difference = truth + SIGMA * math.sqrt(2) * rng.standard_normal(REPLICATES)
    sigma_hat = mad_scale(cell)
    floor = noise_floor(unit_sigma(mad_dof(seeds)), math.sqrt(2))
    measured = coverage(difference, floor * sigma_hat, truth)
    sample_sd = cell.std(axis=1, ddof=1)
    normal_sd = coverage(difference, NORMAL_95 * math.sqrt(2) * sample_sd, truth)
    print(f"{seeds} seeds: MAD + t({mad_dof(seeds)}) {measured:.3f}, SD + normal {normal_sd:.3f}")
    assert 0.90 <= measured <= 0.99
    assert normal_sd < 0.90
    first = difference_interval(difference[0], mad_sigma(cell[0]), 1, 1)
    assert first.high - difference[0] == pytest.approx(floor * sigma_hat[0])


def test_n_minus_one_dof_for_a_mad_of_three_seeds_under_covers():
    rng = np.random.default_rng(3)
    cell = SIGMA * rng.standard_normal((REPLICATES, 3))
    difference = SIGMA * math.sqrt(2) * rng.standard_normal(REPLICATES)
    naive = coverage(difference, noise_floor(unit_sigma(2), math.sqrt(2)) * mad_scale(cell), 0.0)
    print(f"3 seeds: MAD + t(2) {naive:.3f}")
    assert naive < 0.90


def test_means_over_three_and_five_seeds_with_their_pooled_mad_are_covered():
    rng = np.random.default_rng(4)
    arm_a, arm_b = (SIGMA * rng.standard_normal((REPLICATES, seeds)) for seeds in (3, 5))
    truth = 0.01
    difference = truth + arm_a.mean(axis=1) - arm_b.mean(axis=1)
    dof_a, dof_b = mad_dof(3), mad_dof(5)
    pooled = (dof_a * mad_scale(arm_a) + dof_b * mad_scale(arm_b)) / (dof_a + dof_b)
    floor = noise_floor(unit_sigma(dof_a + dof_b), math.sqrt(1 / 3 + 1 / 5))
    measured = coverage(difference, floor * pooled, truth)
    print(f"3 vs 5 seeds, pooled MAD: {measured:.3f}")
    assert 0.90 <= measured <= 0.99
    first = pooled_sigma({("N21k", 500_000): arm_a[0], ("N40k", 500_000): arm_b[0]})
    assert (first.value, first.dof, first.runs, first.estimator) == pytest.approx(
        (pooled[0], dof_a + dof_b, 8, POOLED_MAD)
    )
    assert "pooled over 2 cells" in first.source
    interval = difference_interval(difference[0], first, 3, 5)
    assert interval.high - difference[0] == pytest.approx(floor * pooled[0])


def partnered_losses(rng, replicates: int, cells: int, thetas: np.ndarray) -> np.ndarray:
    """δ (replicates, cells, variants): every variant of a cell against that cell's one fp32 partner, all runs
    separately seeded, so a cell's δs share their partner's noise."""
    partner = SIGMA * rng.standard_normal((replicates, cells, 1))
    variants = thetas + SIGMA * rng.standard_normal((replicates, cells, len(thetas)))
    return variants - partner


def test_variant_vs_variant_differences_cancel_the_shared_partner():
    rng = np.random.default_rng(5)
    cells, thetas = 8, np.array([0.01, 0.04])
    deltas = partnered_losses(rng, REPLICATES, cells, thetas)
    mean_difference = (deltas[..., 1] - deltas[..., 0]).mean(axis=1)
    truth = thetas[1] - thetas[0]
    sigma_hat = mad_scale(SIGMA * rng.standard_normal((REPLICATES, 5)))
    # One run of each variant per cell: the mean difference has SD σ √(1/C + 1/C).
    floor = noise_floor(unit_sigma(mad_dof(5)), math.sqrt(2 / cells))
    measured = coverage(mean_difference, floor * sigma_hat, truth)
    counted_twice = coverage(mean_difference, floor * math.sqrt(2) * sigma_hat, truth)
    normal = coverage(mean_difference, NORMAL_95 * math.sqrt(2 / cells) * sigma_hat, truth)
    print(f"variant vs variant: {measured:.3f}, partner counted twice {counted_twice:.3f}, normal {normal:.3f}")
    assert 0.90 <= measured <= 0.99
    assert counted_twice > 0.97  # too wide: the shared partner's noise is no noise of this comparison
    assert normal < 0.90
    frame = pd.DataFrame(
        {"cell": np.repeat(np.arange(cells), 3), "variant": ["fp32", "W4", "W3"] * cells, "delta": 0.0}
    )
    frame.loc[frame["variant"] == "W4", "delta"] = deltas[0, :, 0]
    frame.loc[frame["variant"] == "W3", "delta"] = deltas[0, :, 1]
    differences = variant_differences(
        frame[frame["variant"] != "fp32"], cluster="cell", variant="variant", value="delta", reference="W4"
    )
    assert differences["difference"].mean() == pytest.approx(mean_difference[0])


def test_variant_differences_by_hand():
    frame = pd.DataFrame(
        {
            "size": ["N21k"] * 3 + ["N40k"] * 2,
            "seed": [0, 0, 0, 0, 0],
            "variant": ["W4", "W3", "W2", "W4", "W2"],
            "delta": [0.010, 0.030, 0.100, 0.005, 0.050],
        }
    )
    differences = variant_differences(frame, cluster=["size", "seed"], variant="variant", value="delta", reference="W4")
    assert differences.to_dict("records") == [
        {"size": "N21k", "seed": 0, "variant": "W3", "difference": pytest.approx(0.020)},
        {"size": "N21k", "seed": 0, "variant": "W2", "difference": pytest.approx(0.090)},
        {"size": "N40k", "seed": 0, "variant": "W2", "difference": pytest.approx(0.045)},
    ]


def test_the_cluster_bootstrap_covers_where_the_row_bootstrap_does_not():
    rng = np.random.default_rng(6)
    replicates, cells, thetas = 500, 16, np.array([0.01, 0.02, 0.03, 0.04])
    deltas = partnered_losses(rng, replicates, cells, thetas).reshape(replicates, -1)
    frame = pd.DataFrame({"cell": np.repeat(np.arange(cells), len(thetas)), "row": np.arange(deltas.shape[1])})
    truth, covered, naive = thetas.mean(), 0, 0
    for replicate in range(replicates):
        frame["delta"] = deltas[replicate]
        _, by_cell = cluster_bootstrap(frame, weighted_mean("delta"), "cell", draws=1000, seed=replicate)
        _, by_row = cluster_bootstrap(frame, weighted_mean("delta"), "row", draws=1000, seed=replicate)
        covered += by_cell.contains(truth)
        naive += by_row.contains(truth)
    print(f"cluster bootstrap {covered / replicates:.3f}, row bootstrap {naive / replicates:.3f}")
    assert 0.90 <= covered / replicates <= 0.99
    assert naive / replicates < 0.90


def test_the_cluster_bootstrap_is_reproducible_and_takes_unweighted_statistics():
    rng = np.random.default_rng(7)
    frame = pd.DataFrame({"cell": np.repeat(np.arange(12), 2), "delta": rng.normal(0.02, SIGMA, 24)})

    def mean_by_repeating(rows, weights):
        return np.array([rows["delta"].loc[rows.index.repeat(row)].mean() for row in weights])

    estimate, interval = cluster_bootstrap(frame, weighted_mean("delta"), "cell", draws=300, seed=3)
    assert (estimate, interval) == cluster_bootstrap(frame, weighted_mean("delta"), "cell", draws=300, seed=3)
    repeated_estimate, repeated = cluster_bootstrap(frame, mean_by_repeating, "cell", draws=300, seed=3)
    assert (repeated_estimate, *repeated) == pytest.approx((estimate, *interval))
    assert interval != cluster_bootstrap(frame, weighted_mean("delta"), "cell", draws=300, seed=4)[1]
    assert estimate == pytest.approx(frame["delta"].mean())


def test_mean_interval_uses_the_t_quantile_of_the_dof():
    sigma = mad_sigma([4.10, 4.12, 4.11, 4.13, 4.09], CELL)
    interval = mean_interval(4.11, sigma, seeds=4)
    assert interval.high - 4.11 == pytest.approx(4.3026 * sigma.value / 2, rel=0.02)  # t(1.99 dof) ≈ t(2)
    assert interval.low == pytest.approx(2 * 4.11 - interval.high)


def seed_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "size": ["N21k"] * 5 + ["N40k"] * 3,
            "D": [500_000] * 5 + [1_000_000] * 3,
            "seed": [0, 1, 2, 3, 4, 0, 1, 2],
            "loss": [4.10, 4.12, 4.11, 4.13, 4.50, 3.90, 3.95, 3.93],
        }
    )


def test_noise_model_round_trips_through_json(tmp_path):
    model = NoiseModel.from_frame(seed_frame(), value="loss", quantity="final validation loss")
    path = tmp_path / NOISE_PATH
    write_noise_model(model, path)
    assert read_noise_model(path) == model
    assert [p.name for p in path.parent.iterdir()] == ["noise.json"]  # written through a temporary, renamed
    payload = json.loads(path.read_text())
    assert payload["rule"].startswith("largest σ_seed")
    assert payload["cells"][0].keys() == {"size", "budget", "value", "dof", "runs", "estimator", "source"}
    sigma = model.sigma("N21k", 500_000)
    assert Sigma.from_dict(json.loads(json.dumps(sigma.to_dict()))) == sigma
    assert sigma.source == f"σ_seed {sigma.value:.2g} nats, MAD of 5 seeds at N21k / 0.5M tokens, 2.0 dof"


def test_an_unmeasured_cell_gets_the_conservative_rule_named_in_its_source():
    model = NoiseModel.from_frame(seed_frame(), value="loss", quantity="final validation loss")
    measured = [model.sigma("N21k", 500_000), model.sigma("N40k", 1_000_000)]
    ruled = model.sigma("N83k", 2_000_000)
    assert ruled.value == max(sigma.value for sigma in measured)
    assert ruled.dof == min(sigma.dof for sigma in measured)
    assert ruled.estimator == RULE
    assert "N83k / 2M tokens, not measured there: by rule" in ruled.source
    assert "N21k / 0.5M tokens, N40k / 1M tokens" in ruled.source


def test_floors_use_the_t_quantile_and_name_the_sigma_they_used():
    sigma = mad_sigma([4.10, 4.12, 4.11, 4.13, 4.09], CELL)  # 2 dof: t ≈ 4.3
    row = claim("study", "text", statistic="slope 0.5", ci="[0.1, 0.9]", verdict="reproduced")
    effect = 3 * sigma.value
    assert within_noise(effect, sigma) and not within_noise(5 * sigma.value, sigma)
    floored = floored_by_seed_noise(row, effect, sigma, "effect", expected=0.5)
    assert floored["verdict"] == INCONCLUSIVE
    assert "the 95 % t-floor of σ_seed" in floored["statistic"]
    assert floored["ci"] == "[0.1, 0.9]" and floored["noise"] == sigma.source
    assert floored["min_detectable"] == f"{noise_floor(sigma):.2g}" and floored["expected_effect"] == "0.5"
    clear = floored_by_seed_noise(row, 5 * sigma.value, sigma, "effect")
    assert clear["verdict"] == "reproduced" and clear["noise"] == sigma.source
    # A difference of two runs (scale √2) needs more.
    assert floored_by_seed_noise(row, 5 * sigma.value, sigma, "effect", math.sqrt(2))["verdict"] == INCONCLUSIVE


def test_a_claim_between_runs_without_any_sigma_is_inconclusive():
    row = claim("study", "text", statistic="slope 0.5", ci="[0.1, 0.9]", verdict="reproduced")
    floored = floored_by_seed_noise(row, 10.0, None, "effect")
    assert floored["verdict"] == INCONCLUSIVE and floored["statistic"].endswith("not held to any σ_seed")
    assert floored["noise"] == NO_SIGMA and floored["min_detectable"] == ""


def test_claims_read_the_seed_study_where_it_runs_and_their_own_repeats_elsewhere():
    frame = seed_frame()
    models = {"delta": NoiseModel.from_frame(frame, value="loss", quantity="δ")}
    own = {("N21k", 500_000): [0.10, 0.30, 0.11]}
    from_study = ClaimNoise(models).sigma("delta", [("N21k", 500_000)], own)
    assert from_study == models["delta"].sigma("N21k", 500_000)
    # Over several cells, the largest σ with the fewest dof.
    both = ClaimNoise(models).sigma("delta", [("N21k", 500_000), ("N40k", 1_000_000)], own)
    measured = [models["delta"].sigma("N21k", 500_000), models["delta"].sigma("N40k", 1_000_000)]
    assert both.value == max(s.value for s in measured) and both.dof == min(s.dof for s in measured)
    # Without the seed study (or for a quantity it does not measure): the MAD of the study's own repeats, said so.
    fallback = OWN_REPEATS.sigma("delta", [("N21k", 500_000)], own)
    assert fallback.value == mad_sigma(own[("N21k", 500_000)]).value and OWN_REPEATS_NOTE in fallback.source
    assert ClaimNoise(models).sigma("loss", [("N21k", 500_000)], own).source == fallback.source
    # Diverged repeats are left out; fewer than two left, or none apart, measure nothing.
    assert OWN_REPEATS.sigma("delta", [], {("N21k", 500_000): [0.1, math.nan]}) is None
    assert OWN_REPEATS.sigma("delta", [], {("N21k", 500_000): [0.1, 0.1, 0.2]}) is None
    pooled = OWN_REPEATS.sigma("delta", [], {("N21k", 500_000): [0.1, 0.2, 0.4], ("N40k", 1_000_000): [0.2, 0.1]})
    assert pooled.estimator == POOLED_MAD and pooled.runs == 5


def test_claim_noise_reads_the_seed_study_file(tmp_path):
    models = {"delta": NoiseModel.from_frame(seed_frame(), value="loss", quantity="δ")}
    write_noise_models(models, tmp_path / "noise.json")
    assert ClaimNoise.read(tmp_path / "noise.json").models == models
    assert ClaimNoise.read(None) == OWN_REPEATS


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: mad_sigma([4.1], CELL), r"σ_seed at N21k / 0\.5M tokens: needs at least 2 seeds, got 1"),
        (lambda: mad_sigma([4.1, math.nan, 4.2]), r"1 of 3 values are NaN or infinite"),
        (lambda: mad_sigma([4.1, 4.1, 4.3]), r"the MAD of \[4\.1, 4\.1, 4\.3\] is 0"),
        (lambda: pooled_sigma({}), r"needs at least one cell"),
        (lambda: Sigma(math.nan, 2, 3, MAD, "x"), r"σ_seed must be finite and > 0 nats, got nan"),
        (lambda: Sigma(0.01, 2, 3, "SD", "x"), r"estimator 'SD' is not one of"),
        (lambda: Sigma.from_dict({"value": 0.01}), r"a σ_seed entry has the keys"),
        (lambda: NoiseModel("loss", {}), r"needs at least one measured cell"),
        (
            lambda: NoiseModel.from_frame(seed_frame().iloc[:6], value="loss", quantity="loss"),
            r"σ_seed at N40k / 1M tokens: needs at least 2 seeds, got 1",
        ),
        (lambda: NoiseModel.from_frame(seed_frame(), value="delta", quantity="δ"), r"the frame lacks \['delta'\]"),
        (lambda: mean_interval(0.0, unit_sigma(2), seeds=0), r"needs at least 1 seed, got 0"),
        (lambda: noise_floor(unit_sigma(2), level=95), r"a confidence level is between 0 and 1, got 95"),
        (
            lambda: variant_differences(seed_frame(), cluster="size", variant="seed", value="loss", reference=9),
            r"no seed = 9; there are \[0, 1, 2, 3, 4\]",
        ),
        (
            lambda: variant_differences(seed_frame(), cluster="size", variant="D", value="loss", reference=500_000),
            r"6 repeated \(cluster, D\) rows, e\.g\. \{'size': 'N21k', 'D': 500000\}",
        ),
        (
            lambda: cluster_bootstrap(seed_frame().iloc[:2], weighted_mean("loss"), "size"),
            r"needs at least 2 clusters of \['size'\], got 1",
        ),
    ],
)
def test_bad_input_is_one_line(call, message):
    with pytest.raises(ValueError, match=message) as error:
        call()
    assert "\n" not in str(error.value)


def test_a_broken_noise_file_names_itself(tmp_path):
    path = tmp_path / "noise.json"
    path.write_text(json.dumps({"quantity": "loss", "cells": []}))
    with pytest.raises(ValueError, match=r"noise\.json: not a noise model"):
        read_noise_model(path)
