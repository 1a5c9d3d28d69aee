"""Chen et al. 2025's QAT study: the precisions it trains, its grid on the ladder, δ paired with the fp32 partner
over held-out windows, the law recovered from synthetic δs, and claims held to the seed-noise floor."""

import numpy as np
import pandas as pd
import pytest

from qscaling.config import ConfigError, Training, resolve_config
from qscaling.laws import chen2025 as law
from qscaling.noise import OWN_REPEATS_NOTE, ClaimNoise, NoiseModel, Sigma, mad_sigma
from qscaling.plan import Planner
from qscaling.studies.chen2025 import STUDY, analysis, grid
from qscaling.studies.chen2025.figures import table2_frame
from qscaling.studies.chen2025.settings import Chen2025Settings, ChenCell, ChenSeedRepeats
from qscaling.studies.ladder import STUDY as LADDER
from qscaling.studies.registry import study_settings
from qscaling.studies.tables import with_labels


def settings_of(config, block=None):
    """The chen2025 block of `config` (or `block` in its place), checked and typed as the pipeline does."""
    return study_settings(STUDY, config.studies["chen2025"] if block is None else block, config.common())


def test_each_precision_quantizes_the_tensors_its_name_says():
    assert grid.training_precision("W4A4", 8) == {"weights": "int4:g8", "activations": "int4:g8"}
    assert grid.training_precision("W4A16", "channel") == {"weights": "int4:channel", "activations": None}
    assert grid.training_precision("W16A4", "channel") == {"weights": None, "activations": "int4:token"}
    fixed = grid.training_precision("W16A4_FC2_8bit", 4)
    assert fixed == {"weights": None, "activations": "int4:g4", "overrides": {"fc2": {"activations": "int8:g4"}}}


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda b: b["cells"][0]["groups"].append(5),
            "config key studies.chen2025.cells.0.groups: G = 5 does not divide",
        ),
        (lambda b: b["cells"][0]["precisions"].append("W3A3"), "unknown precision 'W3A3'"),
        (lambda b: b["cells"][0]["sizes"].append("N9M"), "config key studies.chen2025.cells.0.sizes.2: size 'N9M'"),
        (lambda b: b["seeds"].update(budget=123), "config key studies.chen2025.seeds.budget: 123 is not one of"),
        (lambda b: b["seeds"].update(extra=[0]), "config key studies.chen2025.seeds.extra: repeats the recipe's seed"),
        (lambda b: b["cells"][0]["groups"].append(1), "group size 1 must be an integer ≥ 2 or 'channel'"),
    ],
)
def test_bad_grid_values_name_their_config_key(raw_config, edit, message):
    edit(raw_config["studies"]["chen2025"])
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("'", "'")):
        settings_of(resolve_config(raw_config))


def test_every_qat_point_has_its_fp32_partner_at_the_same_size_budget_and_seed(default_config):
    common = default_config.common()
    planner = Planner(common, common.corpus_id)
    ladder_settings = study_settings(LADDER, default_config.studies["ladder"], common)
    ladder_runs = {e.run for e in LADDER.plan(ladder_settings, common, planner)}
    chen = STUDY.plan(settings_of(default_config), common, planner)
    partners = {}
    for evaluation in chen:
        spec = planner.runs[evaluation.run].spec
        for variant in evaluation.label_records():
            key = (spec.size, evaluation.tokens, spec.seed)
            if variant["precision"] == grid.FULL:
                assert spec.training_precision is None
                partners[key] = evaluation.run
            else:
                assert spec.training_precision is not None and spec.cooldown is not None
    qat_keys = {
        (planner.runs[e.run].spec.size, e.tokens, planner.runs[e.run].spec.seed)
        for e in chen
        if any(v["precision"] != grid.FULL for v in e.label_records())
    }
    assert qat_keys == set(partners)
    # The recipe-seed partners are the ladder's own annealed runs: trained once, shared.
    recipe_seed = default_config.training.seed
    assert {run for (_, _, seed), run in partners.items() if seed == recipe_seed} <= ladder_runs
    seeds = {key[2] for key in partners}
    assert seeds == {recipe_seed, *default_config.studies["chen2025"]["seeds"]["extra"]}


def window_rows(run, precision, G, losses, size="N1", N=1000, D=500, seed=0):
    return pd.DataFrame(
        {
            "run": run,
            "size": size,
            "N": N,
            "D": D,
            "milestone": D,
            "precision": precision,
            "format": "" if precision == grid.FULL else grid.INT,
            "quantizer": "" if precision == grid.FULL else grid.ABSMAX,
            "lr_scale": 1.0,
            "G": G,
            "granularity": "" if precision == grid.FULL else "group",
            "seed": seed,
            "window": np.arange(len(losses)),
            "loss": losses,
        }
    )


def test_delta_is_paired_over_the_same_windows_with_its_standard_error():
    base = np.array([4.0, 5.0, 6.0, 3.0])
    shift = np.array([0.10, 0.12, 0.08, 0.10])
    rows = pd.concat(
        [window_rows("fp", grid.FULL, 0, base), window_rows("q", "W4A4", 8, base + shift)], ignore_index=True
    )
    table = STUDY.build_table(rows, SETTINGS)
    assert len(table) == 1
    row = table.iloc[0]
    assert row["delta"] == pytest.approx(0.10)
    assert row["delta_se"] == pytest.approx(np.std(shift, ddof=1) / 2)
    assert row["loss_se"] == pytest.approx(np.std(base + shift, ddof=1) / 2)  # far larger: the pairing matters
    assert row["run_base"] == "fp" and row["base_loss"] == pytest.approx(4.5)


def test_a_qat_point_without_its_partner_is_an_error_naming_it():
    rows = window_rows("q", "W4A4", 8, np.ones(3))
    with pytest.raises(ValueError, match="without a full-precision partner"):
        STUDY.build_table(rows, SETTINGS)


def diverged_row(run, precision, G, size="N1", seed=0):
    row = {"run": run, "size": size, "N": 1000, "D": 500, "milestone": 500, "training_precision": "-",
           "diverged": True, "diverged_reason": "training loss is nan at step 3 (96 tokens)"}  # fmt: skip
    variant = {"precision": precision, "format": "" if precision == grid.FULL else grid.INT,
               "quantizer": "" if precision == grid.FULL else grid.ABSMAX, "lr_scale": 1.0, "G": G,
               "granularity": "" if precision == grid.FULL else "group", "seed": seed}  # fmt: skip
    return with_labels(pd.DataFrame([row]), [variant])


def test_points_lost_to_a_diverged_run_stay_in_the_table_marked_and_out_of_the_fits():
    base = np.array([4.0, 5.0, 6.0, 3.0])
    rows = pd.concat(
        [
            window_rows("fp", grid.FULL, 0, base),
            window_rows("q8", "W4A4", 8, base + 0.1),
            diverged_row("q4", "W4A4", 4),  # this QAT run diverged
            diverged_row("fp2", grid.FULL, 0, size="N2"),  # the partner of q-N2 diverged
            window_rows("q-N2", "W4A4", 8, base + 0.2, size="N2"),
        ],
        ignore_index=True,
    )
    table = STUDY.build_table(rows, SETTINGS).set_index("run")
    assert table.loc["q8", "delta"] == pytest.approx(0.1) and not table.loc["q8", "diverged"]
    assert table.loc["q4", "diverged"] and np.isnan(table.loc["q4", "delta"])
    assert table.loc["q-N2", "diverged"] and table.loc["q-N2", "diverged_reason"] == (
        "its full-precision partner fp2 diverged"
    )
    table = table.reset_index()
    assert list(analysis.grid_rows(table, SETTINGS, "W4A4")["run"]) == ["q8"]


def test_only_the_main_grid_enters_the_laws_fp4_learnable_and_lr_scaled_points_do_not():
    table = synthetic_table()
    variants = pd.concat(
        [table.assign(format=grid.FP), table.assign(quantizer="lsq"), table.assign(lr_scale=2.0)],
        ignore_index=True,
    ).assign(delta=1.0)
    both = pd.concat([table, variants], ignore_index=True)
    assert analysis.grid_rows(both, SETTINGS, "W4A4").equals(analysis.grid_rows(table, SETTINGS, "W4A4"))


def test_a_cell_varies_the_format_quantizer_and_lr_with_each_partner_at_the_same_lr(default_config):
    cells = [
        {"precisions": ["W4A4"], "sizes": ["N21k"], "groups": [8], "format": "fp", "budgets": [500000]},
        {"precisions": ["W4A16"], "sizes": ["N21k"], "groups": [8], "quantizers": ["lsq"], "budgets": [500000]},
        {"precisions": ["W4A4"], "sizes": ["N21k"], "groups": [8], "lr_scales": [2], "budgets": [500000]},
    ]
    settings = settings_of(default_config, {**default_config.studies["chen2025"], "cells": cells})
    planner = Planner(default_config.common(), "data")
    evaluations = STUDY.plan(settings, default_config.common(), planner)
    specs = {e.run: planner.runs[e.run].spec for e in evaluations}
    by_label = {(dict(e.labels[0])["precision"], dict(e.labels[0])["format"], dict(e.labels[0])["quantizer"],
                 dict(e.labels[0])["lr_scale"]): specs[e.run] for e in evaluations if e.tokens == 500000}  # fmt: skip
    fp4 = by_label[("W4A4", "fp", "absmax", 1.0)].training_precision
    assert fp4["weights"] == "fp:e2m1:b8" and fp4["activations"] == "fp:e2m1:b8"
    assert by_label[("W4A16", "int", "lsq", 1.0)].training_precision["quantizer"] == {"weights": "lsq"}
    scaled, partner = by_label[("W4A4", "int", "absmax", 2.0)], by_label[(grid.FULL, "", "", 2.0)]
    recipe = by_label[(grid.FULL, "", "", 1.0)]
    assert scaled.lr == partner.lr == pytest.approx(2 * recipe.lr, rel=1e-2)


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ({"quantizers": ["lsq"], "precisions": ["W16A4"]}, "lsq learns an INT weights quantizer"),
        ({"quantizers": ["lac"], "format": "fp"}, "lac learns an INT activations quantizer"),
        ({"quantizers": ["pact"]}, "unknown quantizer 'pact'"),
        ({"budgets": [123]}, "cells.0.budgets: not all of them are in studies.chen2025.budgets"),
    ],
)
def test_bad_ablation_cells_name_their_config_key(default_config, cell, message):
    # Built without the schema (which already refuses an unknown quantizer), so the study's own check is what fails.
    cells = [ChenCell.model_construct(**{"precisions": ["W4A4"], "sizes": ["N21k"], "groups": [8], **cell})]
    settings = settings_of(default_config).model_copy(update={"cells": cells})
    with pytest.raises(ConfigError, match=message):
        STUDY.check(settings, default_config.common())


def synthetic_settings(*precisions: str) -> Chen2025Settings:
    """The settings the analysis reads: the cells' precisions, the seed-repeated point, bootstrap and recipe seed."""
    return Chen2025Settings.model_construct(
        cells=[ChenCell.model_construct(precisions=list(precisions), sizes=[], groups=[])],
        seeds=ChenSeedRepeats.model_construct(size="N1", budget=500, precision="W4A4", group=8, extra=[1, 2]),
        bootstrap=40,
        training=Training.model_construct(seed=0),
    )


SETTINGS = synthetic_settings("W4A4")
MAIN_GRID = {"format": grid.INT, "quantizer": grid.ABSMAX, "lr_scale": 1.0, "diverged": False}  # the law's rows
TRUE = {"k": 0.5, "gamma_N": 0.3, "gamma_D": 0.1, "gamma_G": 0.8}


def synthetic_table(params=TRUE, noise=0.0):
    rng = np.random.default_rng(0)
    rows = []
    for N in (2e4, 4e4, 8e4, 1.6e5):
        for D in (5e5, 1e6, 2e6):
            for G in (4, 8, 32):
                delta = float(law.qat_error(params, {"N": N, "D": D, "G": G})) * (1 + noise * rng.standard_normal())
                rows.append({"size": f"N{N:g}", "N": N, "D": D, "budget": D, "G": G, "seed": 0, "precision": "W4A4",
                             "granularity": "group", "run": f"q{N}-{D}-{G}", "delta": delta, "delta_se": 1e-4})  # fmt: skip
    return pd.DataFrame(rows).assign(**MAIN_GRID)


def test_the_qat_law_is_recovered_from_synthetic_errors():
    fits = STUDY.fit_laws(synthetic_table(), SETTINGS)
    fit = fits["qat"]
    for name, value in TRUE.items():
        assert fit.params[name] == pytest.approx(value, rel=1e-3), name
    assert fits["qat_no_D"].params["gamma_D"] == 0.0
    assert fits["qat_no_D"].heldout_relative_error > fit.heldout_relative_error


def test_a_precision_trained_at_one_group_size_holds_gamma_g_at_the_papers_value():
    table = synthetic_table()
    table = table[table["G"] == 8].assign(precision="W4A16")
    fit = STUDY.fit_laws(table, synthetic_settings("W4A16"))["qat_W4A16"]
    assert fit.params["gamma_G"] == law.QAT.paper_params["W4A16"]["gamma_G"]
    assert fit.held_fixed("gamma_G") and not fit.held_fixed("gamma_N")


def seeded(table, deltas):
    repeats = [
        {
            **table.iloc[0].to_dict(),
            "size": "N1",
            "D": 500,
            "budget": 500,
            "G": 8,
            "seed": seed,
            "delta": delta,
            "run": f"s{seed}",
        }
        for seed, delta in enumerate(deltas)
    ]
    return pd.concat([table, pd.DataFrame(repeats)], ignore_index=True)


def claim_rows(table):
    fits = {name: fit for name, fit in STUDY.fit_laws(table, SETTINGS).items() if not isinstance(fit, str)}
    tables = {"table": table, "activations": None, "decomposition": analysis.decomposition(table, SETTINGS)}
    return {row["claim"]: row for row in STUDY.claims(tables, fits, SETTINGS)}


def test_an_effect_within_the_seed_noise_floor_is_inconclusive_however_tight_its_fit():
    table = synthetic_table(noise=0.01)
    quiet = claim_rows(seeded(table, [0.01, 0.0101, 0.0099]))
    text = "W4A4 QAT error falls with model size (γ_N > 0)"
    assert quiet[text]["verdict"] == "reproduced" and "MAD of 3 seeds at N1 / 500 tokens" in quiet[text]["noise"]
    assert OWN_REPEATS_NOTE in quiet[text]["noise"] and float(quiet[text]["expected_effect"]) > 0
    noisy = claim_rows(seeded(table, [0.0, 0.5, 1.0]))
    assert noisy[text]["verdict"] == "inconclusive"
    assert "the 95 % t-floor of σ_seed" in noisy[text]["statistic"]
    d_term = "The law with the D term predicts held-out sizes better than without it (Table 4)"
    assert quiet[d_term]["verdict"] == "reproduced"
    assert noisy[d_term]["verdict"] == "inconclusive" and "mean |δ_W4A4|" in noisy[d_term]["statistic"]


def test_weight_error_outgrowing_activation_error_needs_free_exponents_and_an_effect_above_the_seed_noise():
    text = "Weight error grows faster with D than activation error (γ_D of W4A16 > γ_D of W16A4)"
    settings = synthetic_settings("W4A4", "W4A16", "W16A4")

    def rows(activation_params, seeds):
        weights = synthetic_table({**TRUE, "gamma_D": 0.4}).assign(precision="W4A16")
        activations = synthetic_table(activation_params).assign(precision="W16A4")
        table = seeded(pd.concat([synthetic_table(), weights, activations], ignore_index=True), seeds)
        fits = {name: fit for name, fit in STUDY.fit_laws(table, settings).items() if not isinstance(fit, str)}
        tables = {"table": table, "activations": None, "decomposition": analysis.decomposition(table, settings)}
        return {row["claim"]: row for row in STUDY.claims(tables, fits, settings)}[text]

    grows_slower = {**TRUE, "gamma_D": 0.05}
    assert rows(grows_slower, [0.01, 0.0101, 0.0099])["verdict"] == "reproduced"
    noisy = rows(grows_slower, [0.0, 50.0, 100.0])
    assert noisy["verdict"] == "inconclusive" and "largest effect of D over the grid" in noisy["statistic"]
    # Activation error falling with D puts its γ_D on the bound 0: a difference from a clamped exponent says nothing.
    pinned = rows({**TRUE, "gamma_D": -0.2}, [0.01, 0.0101, 0.0099])
    assert pinned["verdict"] == "inconclusive" and "W16A4's γ_D at its bound" in pinned["statistic"]


def test_the_reduced_laws_hold_their_exponents_at_0_and_predict_worse_where_d_and_g_matter():
    fits = STUDY.fit_laws(synthetic_table(noise=0.01), SETTINGS)
    assert fits["qat_N_only"].params["gamma_D"] == fits["qat_N_only"].params["gamma_G"] == 0.0
    assert fits["qat_N_only"].held_fixed("gamma_G") and not fits["qat_N_only"].held_fixed("gamma_N")
    frame = table2_frame({}, fits).set_index("law")
    assert list(frame.index) == ["with D", "without D", "N only", "earlier laws (paper only)"]
    for column in ("insample_relative_error", "heldout_relative_error"):
        errors = frame[column]
        assert errors["with D"] < 0.03 < errors["without D"] < errors["N only"], column
    assert frame["paper_relative_error"].drop("N only").tolist() == [0.047, 0.086, 0.085]
    assert np.isnan(frame.loc["N only", "paper_relative_error"])


def ratio_table(slope, seed_deltas, activation_scale=1.0):
    """W4A16 and W16A4 points whose ratio is 2·(D/N / 10)^slope, both δs scaled by `activation_scale`, and W4A4
    repeats at SETTINGS' seed point with `seed_deltas`."""
    rows = [{"size": "N1", "N": 1e3, "D": 500, "budget": 500, "G": 8, "seed": seed, "precision": "W4A4", "granularity": "group",
             "run": f"s{seed}", "delta": delta, "delta_se": 1e-4} for seed, delta in enumerate(seed_deltas)]  # fmt: skip
    for N in (1e4, 4e4):
        for D in (2e5, 1e6, 5e6):
            weights = 0.02 * activation_scale
            ratio = 2 * (D / N / 10) ** slope
            for precision, delta in (("W4A16", weights), ("W16A4", weights * ratio)):
                rows.append({"size": f"N{N:g}", "N": N, "D": D, "budget": D, "G": 8, "seed": 0, "precision": precision,
                             "granularity": "group", "run": f"{precision}{N}-{D}", "delta": delta,
                             "delta_se": 1e-4})  # fmt: skip
    return pd.DataFrame(rows).assign(**MAIN_GRID)


def test_the_activation_to_weight_ratio_and_its_trend_over_tokens_per_parameter_are_recovered():
    table = ratio_table(-0.2, [0.01, 0.0101, 0.0099])
    ratios = analysis.activation_weight_ratio(table, SETTINGS)
    plain = ratios[ratios["variant"] == "plain"]
    assert len(plain) == 6 and (ratios["variant"] == "FC2 8-bit").sum() == 0
    assert plain["R"].to_numpy() == pytest.approx(2 * (plain["tokens_per_param"].to_numpy() / 10) ** -0.2)
    slope, low, high = analysis.ratio_trend(plain, bootstrap=50)
    assert slope == pytest.approx(-0.2) and low <= -0.2 <= high
    rows = {row["claim"]: row for row in STUDY.claims({"table": table, "activations": None}, {}, SETTINGS)}
    trend = rows["R = δ_W16A4 / δ_W4A16 falls as D/N grows (Fig. 8)"]
    assert trend["verdict"] == "reproduced" and float(trend["paper"]) == pytest.approx(law.RATIO_SLOPE, abs=1e-4)
    rising = STUDY.claims({"table": ratio_table(0.3, [0.01, 0.0101]), "activations": None},
                          {}, SETTINGS)  # fmt: skip
    assert {row["claim"]: row for row in rising}[trend["claim"]]["verdict"] == "not reproduced"


def test_a_ratio_of_errors_inside_the_seed_noise_is_inconclusive():
    table = ratio_table(-0.2, [0.0, 0.5, 1.0], activation_scale=0.01)
    assert not analysis.activation_weight_ratio(table, SETTINGS)["clear_of_seed_noise"].any()
    rows = {row["claim"]: row for row in STUDY.claims({"table": table, "activations": None}, {}, SETTINGS)}
    trend = rows["R = δ_W16A4 / δ_W4A16 falls as D/N grows (Fig. 8)"]
    assert trend["verdict"] == "inconclusive" and "0 of 6 points" in trend["statistic"]


def test_the_seed_point_is_found_by_its_planned_budget_when_whole_steps_overshoot_it():
    """A 1M-token budget trains 1,001,472 tokens at 4,096 per step: σ_seed must still find its three seeds."""
    table = seeded(synthetic_table(), [0.01, 0.02, 0.04]).assign(
        D=lambda frame: frame["D"].where(frame["budget"] != 500, 512)
    )
    assert len(analysis.seed_points(table, SETTINGS)) == 3
    assert analysis.seed_sigma(table, SETTINGS).value == pytest.approx(mad_sigma([0.01, 0.02, 0.04]).value)


def test_a_branched_study_is_held_to_the_seed_noise_of_branched_runs():
    """With the seed study in the run, a study whose quantized runs are branched reads σ_seed of branched runs' δ
    (`delta_branched`), not of runs from scratch; without that model, its own (branched) repeats."""
    table = seeded(synthetic_table(noise=0.01), [0.0, 0.5, 1.0])
    cells = sorted({(size, int(budget)) for size, budget in zip(table["size"], table["budget"])})
    models = {
        name: NoiseModel(name, {cell: Sigma(value, 2.0, 5, "MAD", f"{name} σ") for cell in cells})
        for name, value in (("delta", 0.3), ("delta_branched", 1e-4))
    }
    text = "W4A4 QAT error falls with model size (γ_N > 0)"
    fits = {name: fit for name, fit in STUDY.fit_laws(table, SETTINGS).items() if not isinstance(fit, str)}
    tables = {"table": table, "activations": None, "decomposition": analysis.decomposition(table, SETTINGS)}
    for branched, source, verdict in ((False, "delta σ", "inconclusive"), (True, "delta_branched σ", "reproduced")):
        settings = SETTINGS.model_copy(update={"branched": branched})
        row = {row["claim"]: row for row in STUDY.claims(tables, fits, settings, ClaimNoise(models))}[text]
        assert (row["noise"], row["verdict"]) == (source, verdict)
    settings = SETTINGS.model_copy(update={"branched": True})
    own = {row["claim"]: row for row in STUDY.claims(tables, fits, settings, ClaimNoise({"delta": models["delta"]}))}
    assert OWN_REPEATS_NOTE in own[text]["noise"]
