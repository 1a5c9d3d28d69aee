"""Scaling laws: the papers' derived numbers from their constants, and the fitter on synthetic and real data."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize_scalar

from qscaling.laws import LAWS, Fit, chen2025, fit, kumar2024, load_fit, ouyang2024, start_sample, sun2025
from qscaling.laws.law import DEGRADATION_HUBER_DELTA
from qscaling.laws.synthetic import group_column, paper_grid, synthetic_table

EPOCH_DATA = Path(__file__).resolve().parent / "data" / "chinchilla_hoffmann2022_svg_extracted.csv"
KUMAR = LAWS["kumar2024.neff"].default_paper_params()
SUN = LAWS["sun2025.capybara"].default_paper_params()


# ---- Derived quantities from the papers' constants ---------------------------------------------------------


def test_kumar_joint_optimal_precision_is_seven_bits_with_offsets():
    assert kumar2024.compute_optimal_precision(KUMAR) == pytest.approx(7.0, abs=0.05)
    assert kumar2024.compute_optimal_precision(KUMAR, offsets=False) == pytest.approx(3.47, abs=0.05)


def test_kumar_fixed_size_precision_minimises_loss_at_fixed_compute():
    N, D = 1e9, 1e12
    P = kumar2024.fixed_size_optimal_precision(KUMAR, N, D)
    compute = kumar2024.COMPUTE_PER_BIT * N * D * P

    def loss(bits):  # same compute, so D shrinks as bits grow
        x = {"N": N, "D": compute / (kumar2024.COMPUTE_PER_BIT * N * bits), "P_w": bits, "P_a": bits, "P_kv": bits}
        return float(kumar2024.training_precision_loss(KUMAR, x))

    bits = np.linspace(4, 20, 16001)
    assert bits[np.argmin([loss(b) for b in bits])] == pytest.approx(P, abs=2e-3)
    assert kumar2024.compute_optimal_precision(KUMAR) < P  # overtrained (D/N = 1000) → more bits (Sec. 4.3.2)


def test_kumar_inference_optimum_without_serving_is_the_joint_optimum():
    P, N, D = kumar2024.inference_aware_optimum(KUMAR, 1e23, served_tokens=0.0)
    assert pytest.approx(kumar2024.compute_optimal_precision(KUMAR), abs=0.01) == P
    assert pytest.approx(1e23, rel=1e-9) == kumar2024.COMPUTE_PER_BIT * N * D * P
    # Sensitivities so small that the fewest bits win: no interior optimum; offsets so large that nothing is left
    # below 32 bits: no range to search.
    with pytest.raises(ValueError, match="the optimum lies on the search range's end"):
        kumar2024.inference_aware_optimum({**KUMAR, "n_w": -3.0, "n_a": -3.0, "n_kv": -3.0}, 1e23, served_tokens=0.0)
    with pytest.raises(ValueError, match="no precision to search"):
        kumar2024.inference_aware_optimum({**KUMAR, "gamma_w": 20.0, "n_w": 5.0}, 1e23, served_tokens=0.0)


def test_kumar_ptq_critical_data_size_is_the_minimum_of_post_quantization_loss():
    ptq = LAWS["kumar2024.ptq"].default_paper_params()
    N, bits = 30e6, 4

    def post_quant_loss(log_D):
        D = math.exp(log_D)
        return KUMAR["B"] * D ** -KUMAR["alpha"] + float(
            kumar2024.ptq_degradation(ptq, {"N": N, "D": D, "P_post": bits})
        )

    brute = math.exp(minimize_scalar(post_quant_loss, bounds=(15, 35), method="bounded", options={"xatol": 1e-10}).x)
    assert kumar2024.ptq_critical_data_size(ptq, N, bits) == pytest.approx(brute, rel=1e-4)


def test_kumar_unified_law_reduces_to_its_parts():
    unified = LAWS["kumar2024.unified"].default_paper_params()
    ptq = LAWS["kumar2024.ptq"].default_paper_params()
    x = {
        "N": np.array([30e6, 220e6]),
        "D": np.array([3e9, 26e9]),
        "P_w": np.array([6.0, np.inf]),
        "P_a": np.array([8.0, np.inf]),
        "P_kv": np.array([np.inf, np.inf]),
    }
    no_ptq = LAWS["kumar2024.unified"](unified, {**x, "P_post": np.array([np.inf, np.inf])})
    np.testing.assert_allclose(no_ptq, LAWS["kumar2024.neff"](KUMAR, x), rtol=1e-12)
    bf16 = {**x, "P_w": np.full(2, np.inf), "P_a": np.full(2, np.inf), "P_post": np.array([4.0, 3.0])}
    expected = LAWS["kumar2024.neff"](KUMAR, bf16) + kumar2024.ptq_degradation(ptq, bf16)
    np.testing.assert_allclose(LAWS["kumar2024.unified"](unified, bf16), expected, rtol=1e-12)


@pytest.mark.parametrize("bits, layout", [(4, (2, 1)), (8, (4, 3)), (16, (8, 7))])
def test_sun_optimal_layouts(bits, layout):
    assert sun2025.optimal_layout(SUN, bits) == layout
    continuous = sun2025.optimal_mantissa(SUN, bits)
    assert math.floor(continuous) <= layout[1] <= math.ceil(continuous)


@pytest.mark.parametrize("E, M, tokens", [(2, 1, 0.4e12), (4, 3, 27e12), (8, 7, 1730e12)])
def test_sun_critical_data_size_at_1b_parameters_block_128(E, M, tokens):
    assert sun2025.critical_data_size(SUN, 1e9, E, M, 128) == pytest.approx(tokens, rel=0.03)
    x = {"N": 1e9, "E": E, "M": M, "B": 128}
    below, above = sun2025.critical_data_size(SUN, 1e9, E, M, 128) * np.array([0.9, 1.1])
    at = sun2025.critical_data_size(SUN, 1e9, E, M, 128)
    loss = [float(sun2025.capybara_loss(SUN, {**x, "D": D})) for D in (below, at, above)]
    assert loss[1] < loss[0] and loss[1] < loss[2]


def test_sun_optimal_precision_closed_forms_match_brute_force():
    bits = np.linspace(1, 40, 39001)
    N, compute = 1e9, 1e24
    fixed_N = sun2025.loss_at_precision(SUN, N, compute / (sun2025.COMPUTE_PER_BIT * bits * N), bits, 128)
    assert sun2025.optimal_precision_fixed_size(SUN, compute, N) == pytest.approx(bits[np.argmin(fixed_N)], abs=2e-3)
    D = 1e12
    for compute in (1e22, 1e26):  # the fixed-D optimum does not depend on compute
        fixed_D = sun2025.loss_at_precision(SUN, compute / (sun2025.COMPUTE_PER_BIT * bits * D), D, bits, 128)
        assert sun2025.optimal_precision_fixed_data(SUN, D) == pytest.approx(bits[np.argmin(fixed_D)], abs=2e-3)


def test_sun_joint_optimal_precision_lies_in_4_to_8_bits():
    optima = [sun2025.optimal_precision_joint(SUN, compute)[0] for compute in (1e21, 1e26, 1e31)]
    assert all(4 <= P <= 8 for P in optima)
    assert optima == sorted(optima)  # grows with compute


def test_chen_w4a4_error_and_contour_slope():
    w4a4 = LAWS["chen2025.qat"].paper_params["W4A4"]
    assert float(chen2025.qat_error(w4a4, {"N": 595e6, "D": 100e9, "G": 128})) == pytest.approx(0.057, abs=5e-4)
    assert chen2025.iso_error_slope(w4a4) == pytest.approx(2.93, abs=0.01)
    N, D = 1e9, 1e11
    eff = chen2025.effective_parameter_multiplier(w4a4, N, D, 128)
    A, alpha = (
        LAWS["chinchilla_tied"].paper_params["chen2025"]["A"],
        LAWS["chinchilla_tied"].paper_params["chen2025"]["alpha"],
    )
    delta = float(chen2025.qat_error(w4a4, {"N": N, "D": D, "G": 128}))
    assert A / (eff * N) ** alpha == pytest.approx(A / N**alpha + delta, rel=1e-12)


def test_ouyang_table1_two_bit_column_and_why_three_four_bit_differ():
    table = ouyang2024.table1()
    unified = table[(table.source == "unified law") & (table.delta == 0.2)].set_index(["bits", "model"]).tokens_T
    for model, paper in ouyang2024.TABLE1_PAPER[(2, 0.2)].items():
        assert unified[(2, model)] == pytest.approx(paper, rel=0.10)
    assert unified[(4, "7B")] == pytest.approx(3.80, rel=0.01)  # vs 4.5066 printed: the unified law's known gap
    per_bits = table[(table.source == "per-bit-width law") & (table.delta == 0.2)].set_index(["bits", "model"]).tokens_T
    for model, paper in ouyang2024.TABLE1_PAPER[(4, 0.2)].items():
        assert per_bits[(4, model)] == pytest.approx(paper, rel=0.01)
    notes = table[table.source == "unified law"].groupby("bits").note.first()
    assert notes[2] == "" and "per-bit-width" in notes[3] and "per-bit-width" in notes[4]


# ---- The fitter -------------------------------------------------------------------------------------------


def _qat_table(seed=0, noise=0.01):
    law = LAWS["chen2025.qat"]
    return law, synthetic_table(law, law.paper_params["W4A4"], paper_grid(law), noise, seed)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda t: t.iloc[:3], "need at least 4 points"),
        (lambda t: t.assign(N=t.N.where(t.index != 2)), "column 'N' has 1 NaN"),
        (lambda t: t.assign(delta=t.delta.where(t.index != 5, np.inf)), "1 non-finite value"),
        (lambda t: t.drop(columns="G"), "input column 'G' missing"),
        (lambda t: t.drop(columns="delta"), "target column 'delta' missing"),
    ],
)
def test_fit_refuses_bad_tables(change, message):
    law, table = _qat_table()
    with pytest.raises(ValueError, match=message):
        fit(law, change(table), starts=1, bootstrap=0)


def test_a_log_space_law_refuses_a_non_positive_target():
    law = LAWS["ouyang2024.qid"]
    table = synthetic_table(law, law.default_paper_params(), paper_grid(law), 0.01, 0)
    with pytest.raises(ValueError, match="must be > 0"):
        fit(law, table.assign(delta=table.delta.where(table.index != 5, -0.01)), starts=1, bootstrap=0)


def test_linear_residuals_fit_every_delta_and_undo_the_bias_of_dropping_negative_ones():
    """Additive seed noise twice the smallest δ (a fifth of the δs come out ≤ 0): Chen's law fitted on linear
    residuals over every δ predicts the smallest δs without bias; the same law in log space on the δ > 0 points
    keeps the points noise pushed up, overstates them by a third and flattens γ_N."""
    law = LAWS["chen2025.qat"]
    assert law.residuals == "linear"
    truth = law.paper_params["W4A4"]
    grid = paper_grid(law)
    clean = law(truth, grid)
    rng = np.random.default_rng(0)
    noisy = [grid.assign(delta=clean + 2 * clean.min() * rng.standard_normal(len(grid))) for _ in range(8)]
    table = pd.concat(noisy, ignore_index=True)
    assert 0.15 < (table.delta <= 0).mean() < 0.3
    linear = fit(law, table, bootstrap=0, group_col=None)
    log_law = dataclasses.replace(law, residuals="log", huber_delta=DEGRADATION_HUBER_DELTA)
    positive_only = fit(log_law, table[table.delta > 0], bootstrap=0, group_col=None)
    small = clean <= np.quantile(clean, 0.25)
    assert np.mean(linear.predict(grid)[small] / clean[small]) == pytest.approx(1, abs=0.05)
    assert np.mean(positive_only.predict(grid)[small] / clean[small]) > 1.25
    assert abs(linear.params["gamma_N"] - truth["gamma_N"]) < 0.05 < truth["gamma_N"] - positive_only.params["gamma_N"]


def test_a_linear_residual_fit_scores_held_out_sizes_against_their_mean_delta():
    law, table = _qat_table(seed=3)
    table = table.assign(delta=table.delta - table.delta.min() * 1.5)  # some δ now at or below 0
    result = fit(law, table, starts=2, bootstrap=0)
    assert np.isfinite(result.heldout_relative_error) and result.heldout_relative_error < 1


def test_law_and_fit_argument_errors():
    law, table = _qat_table()
    with pytest.raises(ValueError, match=r"params missing \['gamma_G'\]"):
        law({"k": 1, "gamma_N": 1, "gamma_D": 1}, table)
    with pytest.raises(ValueError, match="starts: expected an int"):
        fit(law, table, starts=np.ones((3, 2)), bootstrap=0)
    with pytest.raises(ValueError, match="exceeds 100000"):
        fit(LAWS["sun2025.capybara"], paper_grid(LAWS["sun2025.capybara"]).assign(loss=3.0), starts=5)
    with pytest.raises(TypeError, match="law must be a Law"):
        fit("chen2025.qat", table)


def test_fit_is_independent_of_worker_count_and_round_trips_json(tmp_path):
    law, table = _qat_table(seed=3)
    serial = fit(law, table, starts=2, bootstrap=16, seed=5, n_jobs=1)
    parallel = fit(law, table, starts=2, bootstrap=16, seed=5, n_jobs=2)
    assert serial.params == parallel.params and serial.ci == parallel.ci
    assert serial.heldout_by_group == parallel.heldout_by_group
    loaded = load_fit(serial.to_json(tmp_path / "fit.json"))
    assert loaded.to_dict() == serial.to_dict()
    written = json.loads((tmp_path / "fit.json").read_text())
    assert written["paper"]["W4A4"]["params"] == dict(law.paper_params["W4A4"])
    assert set(written["paper"]) == set(law.paper_params) and set(written["paper"]["W4A4"]["params"]) == set(
        serial.params
    )
    np.testing.assert_array_equal(loaded.predict(table), serial.predict(table))
    assert set(serial.heldout_by_group) == {f"{n:g}" for n in table.N.unique()}
    assert 0 < serial.heldout_relative_error < 0.05 and serial.r2 > 0.99


def test_no_size_is_held_out_when_the_rest_would_have_a_single_size():
    """With two sizes a held-out fit sees one N: started from the full optimum it keeps γ_N and 'predicts'
    the left-out size perfectly, an error of 0 that measures nothing."""
    law, table = _qat_table()
    two = table[table.N.isin(sorted(table.N.unique())[:2])]
    result = fit(law, two, starts=1, bootstrap=0, group_col="N")
    assert result.heldout_relative_error is None and result.heldout_by_group == {}
    assert sum("the rest has a single N" in note for note in result.notes) == 2
    three = fit(law, table[table.N.isin(sorted(table.N.unique())[:3])], starts=1, bootstrap=0, group_col="N")
    assert len(three.heldout_by_group) == 3 and three.heldout_relative_error > 0


# kumar2024.unified (17 parameters): benchmark only; Table 1's forms have no paper constants to cover.
COVERAGE_LAWS = [name for name, law in LAWS.items() if law.paper_params and name != "kumar2024.unified"]


def test_bootstrap_cis_cover_the_paper_constants():
    """Synthetic data from each law's paper constants with 1 % noise on a paper-like grid: 95 % CIs contain
    the truth for ≥ 90 % of (law, seed, parameter) triples; a law far below that is broken, not unlucky.
    Per-law coverage over many seeds: `qscaling bench fit --coverage SEEDS`."""
    hits = {}
    for name in COVERAGE_LAWS:
        law = LAWS[name]
        truth = law.default_paper_params()
        for seed in (0, 1):
            table = synthetic_table(law, truth, paper_grid(law), 0.01, seed)
            starts = 2 if len(law.params) <= 5 else start_sample(law, 16, seed)
            result = fit(law, table, starts=starts, bootstrap=60, group_col=group_column(law), seed=seed)
            hits.setdefault(name, []).extend(result.ci[p][0] <= truth[p] <= result.ci[p][1] for p in law.param_names)
    pooled = np.mean([hit for law_hits in hits.values() for hit in law_hits])
    assert pooled >= 0.9, {name: f"{np.mean(law_hits):.0%}" for name, law_hits in hits.items()}
    assert all(np.mean(law_hits) >= 0.5 for law_hits in hits.values()), hits


def test_epoch_replication_recovered_from_synthetic_data():
    """Besiroglu et al.'s published fit (A 482, B 2085, E 1.817, α 0.348, β 0.366) regenerated with 1 % noise."""
    law = LAWS["chinchilla"]
    truth = law.paper_params["epoch2024"]
    result = fit(law, synthetic_table(law, truth, paper_grid(law), 0.01, seed=7), starts=3, bootstrap=100, seed=7)
    for name in ("alpha", "beta", "E"):
        assert result.params[name] == pytest.approx(truth[name], rel=0.05)
        assert result.ci[name][0] <= truth[name] <= result.ci[name][1]


def test_epoch_replication_on_hoffmann_data():
    """Their procedure (drop the 5 highest losses, Huber δ = 1e-3 on log loss) lands on their estimates."""
    data = pd.read_csv(EPOCH_DATA).rename(columns={"Model Size": "N"})
    data["D"] = data["Training FLOP"] / (6 * data["N"])
    data = data.sort_values("loss").iloc[:-5]
    result = fit(LAWS["chinchilla"], data, starts=3, bootstrap=0, group_col=None)
    published = {
        "A": (482, 125),
        "B": (2085, 1293),
        "E": (1.817, 0.026),
        "alpha": (0.348, 0.015),
        "beta": (0.366, 0.021),
    }
    for name, (value, standard_error) in published.items():
        assert abs(result.params[name] - value) < 0.5 * standard_error, name


def test_fit_notes_a_parameter_on_its_bound():
    law, table = _qat_table()
    flat = table.assign(delta=0.05)  # no dependence on N, D or G: the exponents sit on their lower bound 0
    result = fit(law, flat, starts=1, bootstrap=0)
    assert result.at_bound("gamma_N")
    assert isinstance(result, Fit)


def _noisy_degradations(seed=0):
    """Kumar's δ_PTQ law on a small grid with 40 % log-normal scatter, as paired PTQ degradations have."""
    law = LAWS["kumar2024.ptq"]
    grid = pd.DataFrame([{"N": n, "D": d, "P_post": p} for n in (3e3, 7e3) for d in (1e4, 2e4, 4e4) for p in (3, 4, 6)])
    truth = {"C_T": 1e-6, "gamma_D": 1.0, "gamma_N": 0.3, "gamma_post": 1.2}
    scatter = np.exp(np.random.default_rng(seed).normal(scale=0.4, size=len(grid)))
    return law, grid.assign(delta=law(truth, grid) * scatter)


@pytest.mark.parametrize("huber_delta, stable", [(1e-3, False), (None, True)])
def test_a_degradation_fit_is_stable_under_float_noise_only_with_its_own_huber_delta(huber_delta, stable):
    """Last-bit changes of the data (what another CPU's reduction order does) must not move the fit. With the
    loss laws' δ = 1e-3 such a fit is least absolute deviations, whose optimum is a flat face: it moves."""
    import dataclasses

    law, table = _noisy_degradations()
    if huber_delta is not None:
        law = dataclasses.replace(law, huber_delta=huber_delta)
    assert law.huber_delta == (huber_delta or 1.0)
    perturbed = table.assign(delta=table["delta"] * (1 + 1e-15 * np.random.default_rng(1).normal(size=len(table))))
    fits = [fit(law, t, bootstrap=0, group_col=None) for t in (table, perturbed)]
    largest = max(abs(fits[0].params[n] / fits[1].params[n] - 1) for n in law.param_names if fits[1].params[n])
    assert (largest < 1e-5) == stable, largest


def test_a_fit_records_its_points_and_flags_parameters_the_data_cannot_separate():
    law, table = _noisy_degradations()
    result = fit(law, table, bootstrap=0, group_col=None)
    assert result.points["observed"] == table["delta"].tolist()
    assert result.points["inputs"]["N"] == table["N"].tolist()
    assert result.jacobian_condition is not None and not result.ill_conditioned
    one_size = table[table["N"] == 3e3]  # C_T and gamma_N trade off exactly at a single N
    degenerate = fit(law, one_size, bootstrap=0, group_col=None)
    assert degenerate.ill_conditioned or any("gamma_N" in note and "bound" in note for note in degenerate.notes)
    doc = degenerate.to_dict()
    assert doc["ill_conditioned"] == degenerate.ill_conditioned and doc["huber_delta"] == 1.0
