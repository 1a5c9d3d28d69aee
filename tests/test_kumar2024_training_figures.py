"""Kumar et al. 2024's training-precision figures 1 (right), 3, 6, 13, 14, 15, 16, 17, 21 and Table 1: what each draws from synthetic tables whose
losses follow the N_eff law exactly, what it says where an input is missing, and that each renders from the
committed smoke reference."""

import dataclasses
import importlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import REPO_ROOT
from test_kumar2024_training import SIZES, TRUE, synthetic_ptq_table, synthetic_table

from qscaling.figures import (
    compact_number,
    declared_figures,
    figure_data,
    load_figure_inputs,
    resolve_function,
    save_figure,
)
from qscaling.laws import LAWS
from qscaling.laws import kumar2024 as law
from qscaling.studies.kumar2024_training import STUDY
from qscaling.studies.kumar2024_training.analysis import FITS, MOST_BITS, TABLE2, _fit_sweep, law_rows, recipe_rows
from qscaling.studies.kumar2024_training.figures import BITS, ablations, compute, sweeps
from qscaling.studies.kumar2024_training.figures import ptq as ptq_figures
from qscaling.studies.kumar2024_training.precision import FULL, law_precisions

NEW = ("fig1_right", "fig3", "fig6", "fig13", "fig14", "fig15", "fig16", "fig17", "fig21", "table1")
SMOKE = REPO_ROOT / "reference" / "smoke" / "results"
SPECS = {
    spec.name: spec for module in STUDY.figures for spec in declared_figures(importlib.import_module(module))
}  # every figure of the study, over its figure modules


@pytest.fixture(scope="module")
def exact():
    """A noise-free study table, its PTQ table and the four N_eff fits on it. Each fit starts at the truth: what
    is tested here is what the figures draw from a fit, not the fitter (test_kumar2024_training tests that)."""
    table = synthetic_table(noise=0.0)
    rows = law_rows(table)
    fits = {
        name: _fit_sweep(rows, FITS[name], bootstrap=0, group_col=None, seed=0, starts=[TRUE])
        for name in ("neff_w", "neff_a", "neff_kv", "neff_joint")
    }
    return {"evals": table, "ptq": synthetic_ptq_table(noise=0.0)}, fits


def pairs(collection) -> np.ndarray:
    """A scatter's (x, y) points from its figure_data record, sorted."""
    points = np.array(collection["offsets"], float).reshape(-1, 2)
    return points[np.lexsort(points.T[::-1])]


def test_empirical_fraction_inverts_the_law_from_the_partners_loss_and_is_nan_past_its_size_term():
    # By hand: A = 1, α = 0.5, N = 200: a loss 0.1 − 200^−0.5 above the partner's gives N_eff = 0.1^−2 = 100.
    hand = SimpleNamespace(params={"A": 1.0, "alpha": 0.5})
    excess = 0.1 - 200**-0.5
    rows = pd.DataFrame({"N": [200.0, 200.0], "loss": [3.0 + excess, 3.0 - 0.08], "base_loss": [3.0, 3.0]})
    fraction = sweeps.empirical_fraction(hand, rows)
    assert fraction[0] == pytest.approx(0.5, rel=1e-9) and np.isnan(fraction[1])
    rows = law_rows(synthetic_table(noise=0.0))
    points = rows[rows["varied"] != ""]
    # The partners trained in fp32, whose f_x(32) = 1 − 4e-6 at the truth: the inversion is exact to that.
    truth = law.effective_parameters(TRUE, points) / points["N"]
    assert sweeps.empirical_fraction(SimpleNamespace(params=TRUE), points) == pytest.approx(truth, rel=1e-4)
    # A point below its partner by more than the whole size term A·N^−α implies no N_eff.
    beyond = points.assign(loss=points["base_loss"] - TRUE["A"] * points["N"] ** -TRUE["alpha"] - 1e-6)
    assert np.isnan(sweeps.empirical_fraction(SimpleNamespace(params=TRUE), beyond)).all()


def test_fig15_recovers_each_tensors_true_fraction_beside_the_fit_and_table_2(exact):
    tables, fits = exact
    record = figure_data(sweeps.fig15(tables, fits))
    assert [axes["title"] for axes in record["axes"]] == ["weights only", "activations only", "KV cache only"]
    for axes, tensor in zip(record["axes"], ("w", "a", "kv")):
        points = [line for line in axes["lines"] if line["label"].startswith("N ")]
        # One marker series per (N, D) of the sweep: 3 sizes × 3 budgets.
        assert len(points) == 9
        for line in points:
            truth = law.precision_fraction(TRUE, np.array(line["x"]), tensor)
            assert line["y"] == pytest.approx(truth, abs=1e-3), (tensor, line["label"])
        curves = {line["label"]: line for line in axes["lines"] if line["label"].startswith("f_")}
        fitted, paper = curves[f"f_{tensor}: neff_{tensor}"], curves[f"f_{tensor}: Table 2"]
        bits = np.array(fitted["x"])
        assert fitted["y"] == pytest.approx(law.precision_fraction(fits[f"neff_{tensor}"].params, bits, tensor))
        assert paper["y"] == pytest.approx(law.precision_fraction(TABLE2, bits, tensor))
    assert "Not drawn" not in record["texts"][0]


def test_fig3_draws_each_fits_fraction_dashed_and_the_isoloss_of_the_weight_fit(exact):
    tables, fits = exact
    fig = sweeps.fig3(tables, fits)
    record = figure_data(fig)
    left, right = record["axes"][:2]
    curves = {line["label"]: line for line in left["lines"]}
    for tensor, name in sweeps.TENSOR_NAMES.items():
        ours, paper = curves[f"{name}: neff_{tensor}"], curves[f"{name}: Table 2"]
        assert ours["x"] == pytest.approx(BITS)
        assert ours["y"] == pytest.approx(law.precision_fraction(fits[f"neff_{tensor}"].params, BITS, tensor))
        assert paper["y"] == pytest.approx(law.precision_fraction(TABLE2, BITS, tensor))
    # The measured points are the weight sweep at its largest budget, coloured by their loss on the contours' scale;
    # the fit is exact, so each point has the colour of the band it sits in.
    sweep = tables["evals"]
    sweep = sweep[(sweep["varied"] == "w") & (sweep["D"] == 1_000_000) & (sweep["seed"] == 0)]
    [measured] = [c for c in right["collections"] if c["label"] == "measured"]
    assert pairs(measured) == pytest.approx(pairs({"offsets": sweep[["N", "P_w"]].to_numpy().ravel()}))
    scatter = next(c for c in fig.axes[1].collections if c.get_label() == "measured")
    filled = next(c for c in fig.axes[1].collections if c is not scatter)
    assert scatter.norm is filled.norm and list(scatter.get_array()) == pytest.approx(sweep["loss"].tolist())
    assert list(filled.norm(fits["neff_w"].predict(sweep))) == list(scatter.norm(scatter.get_array()))
    assert right["title"] == "IsoLoss at D = 1M tokens"


def test_fig3_says_where_a_tensors_sensitivity_sits_on_a_bound(exact):
    tables, fits = exact
    kv = fits["neff_kv"]
    pinned = {**fits, "neff_kv": dataclasses.replace(kv, notes=[*kv.notes, "n_kv = 2 is at its bound [2, 5]"])}
    record = figure_data(sweeps.fig3(tables, pinned))
    assert "KV cache: neff_kv (n_kv at bound)" in record["axes"][0]["legend"]
    assert "weights: neff_w" in record["axes"][0]["legend"]
    assert "n_kv 2 [nan, nan] at bound" in record["texts"][0]


def test_fig6_draws_p_star_of_every_size_where_the_truth_has_one(exact):
    tables, fits = exact
    record = figure_data(compute.fig6(tables, fits))
    [axes] = record["axes"]
    lines = [line for line in axes["lines"] if not line["label"].startswith("P*")]
    assert [line["label"] for line in lines[::2]] == [f"N {N // 1000}k" for N in SIZES.values()]
    for N, paper, ours in zip(SIZES.values(), lines[::2], lines[1::2]):
        tokens = np.array(ours["x"])
        assert tokens[0] == pytest.approx(250_000 / 10) and tokens[-1] == pytest.approx(1_000_000 * 10)
        truth = [law.fixed_size_optimal_precision(TRUE, N, D) for D in tokens]
        assert max(truth) < MOST_BITS and None not in ours["y"]
        assert ours["y"] == pytest.approx(truth, abs=1e-3)
        assert paper["y"] == pytest.approx([law.fixed_size_optimal_precision(TABLE2, N, D) for D in tokens])
    stars = {line["label"]: line["y"][0] for line in axes["lines"] if line["label"].startswith("P*")}
    assert stars == {"P* Table 2 (7.00)": pytest.approx(7.0, abs=0.005), "P* this run (6.14)": pytest.approx(6.14, abs=0.01)}  # fmt: skip
    assert "ill-conditioned" not in record["texts"][0]


def test_fig6_leaves_gaps_where_the_fit_has_no_optimum_and_says_when_it_is_ill_conditioned(exact):
    tables, fits = exact
    # f_w ≤ 0 below γ_w·n_w = 100 bits: no P* below 64 bits at any N, D.
    joint = dataclasses.replace(
        fits["neff_joint"], params={**TRUE, "gamma_w": 20.0, "n_w": 5.0}, jacobian_condition=1e30
    )
    record = figure_data(compute.fig6(tables, {"neff_joint": joint}))
    [axes] = record["axes"]
    lines = [line for line in axes["lines"] if not line["label"].startswith("P*")]
    assert all(value is None for line in lines[1::2] for value in line["y"])
    assert all(None not in line["y"] for line in lines[::2])
    assert [line["label"] for line in axes["lines"] if line["label"].startswith("P*")] == ["P* Table 2 (7.00)"]
    footer = record["texts"][0]
    assert "no P* below 64 bits" in footer and "no dashed line" in footer
    assert "ill-conditioned (Jacobian condition number 1e+30)" in footer


def test_fig21_draws_delta_ptq_against_n_and_against_the_weight_fits_n_eff(exact):
    tables, fits = exact
    ptq = tables["ptq"]
    rows = ptq[(ptq["method"] == "gptq") & (ptq["seed"] == 0) & (ptq["P_post"] < ptq["P_train"])]
    # Per (N, D): the fp32 partner at 4 P_post, W3 at 1, W4 at 2, W6 at 3, W8 at 4.
    assert len(rows) == len(SIZES) * 3 * (4 + 1 + 2 + 3 + 4)
    fit = fits["neff_w"]
    for given, params, source in (
        ({"neff_w": fit}, fit.params, "this run's neff_w fit"),
        ({}, TABLE2, "Kumar et al.'s Table 2"),
    ):
        record = figure_data(ptq_figures.fig21({"ptq": ptq}, given))
        by_n, by_n_eff = record["axes"]
        n_eff = rows["N"] * law.precision_fraction(params, rows["P_w"], "w")
        for axes, x in ((by_n, rows["N"]), (by_n_eff, n_eff)):
            drawn = np.vstack([pairs(c) for c in axes["collections"]])
            expected = np.column_stack([x, rows["delta"]])
            assert pairs({"offsets": drawn.ravel()}) == pytest.approx(pairs({"offsets": expected.ravel()}))
            assert axes["xscale"] == "log"
        assert source in record["texts"][0]
    # Each series is one (P_train, P_post): colour per P_post, marker per P_train, named in the legend.
    assert {c["label"] for c in by_n["collections"]} >= {"trained fp32, P_post 6", "trained W3, P_post 2"}
    assert by_n_eff["legend"] == [f"P_post {bits} bits" for bits in (2, 3, 4, 6)] + [
        f"trained {name}" for name in ("W3", "W4", "W6", "W8", "fp32")
    ]


@pytest.mark.parametrize(
    "name, tables, fits, reasons",
    [
        ("fig3", {}, {}, ["no weight sweep"]),
        ("fig3", "exact", {}, ["no neff_w fit"]),
        ("fig6", {"evals": pd.DataFrame()}, {}, ["no trained point"]),
        ("fig15", {}, {}, ["no weights sweep", "no activations sweep", "no KV cache sweep"]),
        ("fig15", "exact", {}, ["no neff_w fit", "no neff_a fit", "no neff_kv fit"]),
        ("fig21", {"ptq": pd.DataFrame()}, {}, ["no GPTQ row below its training precision"] * 2),
    ],
)
def test_a_missing_table_or_fit_is_said_in_its_panel(exact, name, tables, fits, reasons):
    tables = exact[0] if tables == "exact" else tables
    record = figure_data(resolve_function(SPECS[name].function)(tables, fits))
    assert [text for axes in record["axes"] for text in axes["texts"]] == reasons


def test_fig6_without_a_joint_fit_draws_table_2_only(exact):
    tables, _ = exact
    record = figure_data(compute.fig6(tables, {}))
    assert len(record["axes"][0]["lines"]) == len(SIZES) + 1 and "No neff_joint fit" in record["texts"][0]


def test_the_new_figures_are_declared_with_captions_and_render_from_the_smoke_reference(tmp_path):
    for name in NEW:
        assert SPECS[name].target == f"kumar2024_{name}"
        assert (REPO_ROOT / "workflow" / "report" / f"kumar2024_{name}.rst").read_text().strip(), name
    fits_dir = SMOKE / "fits" / STUDY.name
    _, fits = load_figure_inputs({path.stem: path for path in sorted(fits_dir.glob("*.json"))})
    tables = {
        "evals": pd.read_parquet(SMOKE / "tables" / f"{STUDY.name}.parquet"),
        "ptq": pd.read_parquet(SMOKE / "tables" / f"{STUDY.name}_ptq.parquet"),
        "forms": pd.read_parquet(SMOKE / "fits" / STUDY.name / "forms.parquet"),
    }
    for name in NEW:
        path = save_figure(resolve_function(SPECS[name].function)(tables, fits), tmp_path / f"{name}.png")
        assert Path(path).read_bytes()[:4] == b"\x89PNG", name


ABLATION_CELL = ("N1", 250_000)
FP_TRUE = {**TRUE, "gamma_w": 2.9, "n_w": 0.1}


def ablation_table() -> pd.DataFrame:
    """The exact table plus, at one (N, D): per-tensor INT weights (0.02 nats worse than per channel at every
    P_w) and FP weight formats whose losses follow the N_eff law at FP_TRUE."""
    table = synthetic_table(noise=0.0)
    size, D = ABLATION_CELL
    cell = table[(table["size"] == size) & (table["D"] == D) & (table["seed"] == 0)]
    per_channel = cell[cell["varied"] == "w"]
    tensor = per_channel.assign(precision=per_channel["precision"] + "/tensor", varied="w_tensor",
                                loss=per_channel["loss"] + 0.02)  # fmt: skip
    fp = []
    for name in ("WE2M3", "WE3M3", "WE4M3", "WE3M1", "WE3M2"):
        x = {"N": SIZES[size], "D": D, **law_precisions(name)}
        fp.append({**cell.iloc[0].to_dict(), "precision": name, "varied": "w_fp", "run": name, **x,
                   "loss": float(law.training_precision_loss(FP_TRUE, x))})  # fmt: skip
    return pd.concat([table, tensor, pd.DataFrame(fp)], ignore_index=True)


def test_fig13_draws_both_granularities_of_the_ablation_cell_with_its_partner():
    table = ablation_table()
    record = figure_data(ablations.fig13({"evals": table}, {}))
    [axes] = record["axes"]
    assert axes["title"] == "N 20k, D 250k tokens"
    assert axes["legend"] == ["fp32 partner", "per channel (the paper's)", "per tensor"]
    # Error-bar series carry their names on their containers: their lines come in drawing order.
    channel, tensor, partner_line = axes["lines"]
    assert channel["x"] == tensor["x"] == [2, 3, 4, 5, 6, 8]
    assert np.array(tensor["y"]) - np.array(channel["y"]) == pytest.approx(0.02)
    partner = table[(table["size"] == "N1") & (table["D"] == 250_000) & (table["precision"] == FULL)]
    assert partner_line["y"][0] == pytest.approx(partner["loss"].iloc[0])


def test_fig16_and_fig17_draw_the_fp_points_by_bits_and_by_layout():
    table = ablation_table()
    rows = recipe_rows(table)
    fp_fit = _fit_sweep(rows, "w_fp", bootstrap=0, seed=0, starts=[FP_TRUE])
    record = figure_data(ablations.fig16({"evals": table}, {"neff_w_fp": fp_fit}))
    left, right = record["axes"]
    measured, _, fitted = left["lines"]
    assert sorted(measured["x"]) == [5, 6, 6, 7, 8] and fitted["label"] == "N 20k, D 250k: neff_w_fp"
    at = {"N": SIZES["N1"], "D": 250_000, "P_w": np.array(fitted["x"]), "P_a": 32.0, "P_kv": 32.0}
    assert fitted["y"] == pytest.approx(law.training_precision_loss(FP_TRUE, at), rel=1e-3)
    curves = {line["label"]: line for line in right["lines"]}
    assert set(curves) == {"this run, FP (neff_w_fp)", "paper, FP (Fig. 16)", "paper, INT (Table 2)"}
    paper_fp = LAWS["kumar2024.neff"].paper_params["fp_weights"]
    assert curves["paper, FP (Fig. 16)"]["y"] == pytest.approx(law.precision_fraction(paper_fp, BITS, "w"))
    sweeps = figure_data(ablations.fig17({"evals": table}, {}))
    by_exponent, by_mantissa = sweeps["axes"]
    assert by_exponent["title"] == "ExM3: exponent bits varied" and by_mantissa["title"] == "E3Mx: mantissa bits varied"
    (exponent, _), (mantissa, _) = by_exponent["lines"], by_mantissa["lines"]
    assert by_exponent["legend"] == ["fp32 partner", "N 20k, D 250k"]
    assert exponent["x"] == [2, 3, 4] and mantissa["x"] == [1, 2, 3]
    # Bits alone set the law's loss: E2M3 and E3M2 (6 bits each) lie level.
    assert exponent["y"][0] == pytest.approx(mantissa["y"][1])


def test_table1_shows_each_form_beside_the_papers_r2_and_says_what_sits_on_a_bound():
    forms = pd.DataFrame(
        [{"form": "neff", "law": "kumar2024.neff", "paper_heldout_r2": 0.82, "heldout_r2": 0.5, "heldout_r2_delta": 0.25,
          "r2": 0.9, "points": 12, "folds": 4, "at_bound": "", "error": ""},
         {"form": "untied", "law": "kumar2024.form_untied", "paper_heldout_r2": 0.84, "heldout_r2": float("nan"),
          "heldout_r2_delta": float("nan"), "r2": float("nan"), "points": 12, "folds": 4, "at_bound": "",
          "error": "too few points"}]
    )  # fmt: skip
    assert list(sweeps.table1_frame({"forms": forms}, {})["form"]) == ["N_eff (Eq. 3)", "untied N_eff + D_eff"]
    record = figure_data(sweeps.table1({"forms": forms}, {}))
    [cells] = record["axes"][0]["tables"]
    assert cells[6:12] == ["N_eff (Eq. 3)", "0.82", "0.500", "0.250", "0.900", "—"]
    assert cells[12:] == ["untied N_eff + D_eff", "0.84", "—", "—", "—", "too few points"]
    assert "4 (N, D) cells, 12 points" in record["texts"][0]


def test_compute_matched_families_pair_points_of_equal_n_times_p_at_one_budget():
    rows = pd.DataFrame(
        {"N": [1000, 2000, 4000, 1000, 2100, 1000, 2000], "D": [10, 10, 10, 10, 10, 20, 20],
         "P_w": [32.0, 8.0, 4.0, 8.0, 4.0, 32.0, 3.0], "varied": ["", "w", "w", "w", "w", "", "w"],
         "budget": [10, 10, 10, 10, 10, 20, 20], "loss": [3.0, 2.9, 2.8, 3.1, 3.05, 2.5, 2.6]}
    )  # fmt: skip
    families = compute.compute_matched_families(rows)
    # At D 10: N·P 16k (fp32 at 16 bits, 8 bits at 2k, 4 bits at 4k) and 8k, 8.4k (8 bits at 1k, 4 bits at 2.1k:
    # within 10 %); at D 20, 16k and 6k share no family.
    assert sorted(families.groupby(["D", "family"])["P"].apply(sorted).items()) == [
        ((10, 8000.0), [4.0, 8.0]), ((10, 16000.0), [4.0, 8.0, 16.0])
    ]  # fmt: skip


def test_fig1_right_draws_each_family_with_the_fit_along_n_equal_c_over_p(exact):
    tables, fits = exact
    record = figure_data(compute.fig1_right(tables, fits))
    families = compute.compute_matched_families(law_rows(tables["evals"]))
    assert [axes["title"] for axes in record["axes"]] == [
        f"D = {compact_number(budget)} tokens" for budget in sorted(families["budget"].unique())
    ]
    first = record["axes"][0]
    measured = [line for line in first["lines"] if line["label"].startswith("N·P")]
    budget = families[families["D"] == families["D"].min()]
    assert len(measured) == budget["family"].nunique()
    for line in measured:
        family = budget[budget["family"].map(compact_number).radd("N·P ≈ ") == line["label"]].sort_values("P")
        assert line["x"] == family["P"].tolist() and line["y"] == pytest.approx(family["loss"].tolist())
    # The fit is exact: at each measured quantized point its dashed curve passes through the loss (the fp32
    # partner's point sits at P = 16 for compute, the law's P_w = 32 for its loss).
    dashed = [line for line in first["lines"] if not line["label"].startswith("N·P")]
    for line, (_, family) in zip(dashed, budget.groupby("family")):
        bits = np.array(line["x"])
        full = np.full_like(bits, 32.0)
        at = {"N": family["family"].iloc[0] / bits, "D": np.full_like(bits, family["D"].iloc[0]), "P_w": bits,
              "P_a": full, "P_kv": full}  # fmt: skip
        assert line["y"] == pytest.approx(fits["neff_w"].predict(at))


def test_fig14_draws_every_swept_tensor_of_each_cell_on_one_axis_with_its_fit(exact):
    tables, fits = exact
    record = figure_data(sweeps.fig14(tables, fits))
    rows = law_rows(tables["evals"])
    # Every (N, D) of the synthetic grid sweeps all three tensors.
    assert len(record["axes"]) == len(SIZES) * 3
    first = record["axes"][0]
    assert first["title"] == "N 20k, D 250k tokens"
    assert first["legend"] == ["fp32 partner", "weights", "activations", "KV cache"]
    measured, fitted = first["lines"][0:6:2], first["lines"][1:6:2]
    for line, curve, tensor in zip(measured, fitted, ("w", "a", "kv")):
        sweep = rows[(rows["N"] == SIZES["N1"]) & (rows["D"] == 250_000) & (rows["varied"] == tensor)]
        assert line["x"] == sorted(sweep[f"P_{tensor}"]) and line["y"] == pytest.approx(
            sweep.sort_values(f"P_{tensor}")["loss"].tolist()
        )
        bits = np.array(curve["x"])
        at = {"N": SIZES["N1"], "D": 250_000, "P_w": 32.0, "P_a": 32.0, "P_kv": 32.0, f"P_{tensor}": bits}
        assert curve["y"] == pytest.approx(law.training_precision_loss(fits[f"neff_{tensor}"].params, at), rel=1e-9)
