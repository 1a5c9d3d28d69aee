"""QuEST's and Quartet's efficiency laws: their forms, constants recovered from synthetic data, `laws list / show /
fit` and `predict` with the papers' constants."""

import json

import numpy as np
import pytest

from qscaling.cli import main
from qscaling.laws import LAWS, efficiency2025, fit, load_fit, start_sample
from qscaling.laws.synthetic import group_column, paper_grid, synthetic_table

QUEST, QUARTET = LAWS["panferov2025.quest"], LAWS["castro2025.quartet"]


def test_both_laws_are_listed_with_their_formulas(capsys):
    assert main(["laws", "list"]) == 0
    listed = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert QUEST.formula in listed["panferov2025.quest"] and QUARTET.formula in listed["castro2025.quartet"]


def test_quest_form_by_hand():
    """L = A/(N·eff(P))^α + B/D^β + E, with eff = 1 at 16 bits and above."""
    p = QUEST.default_paper_params()
    N, D = 1e8, 1e10
    by_hand = {P: p["A"] / (N * eff) ** p["alpha"] + p["B"] / D ** p["beta"] + p["E"] for P, eff in
               ((4, p["eff_4"]), (16, 1.0), (32, 1.0))}  # fmt: skip
    predicted = QUEST(p, {"N": [N] * 3, "D": [D] * 3, "P": [4, 16, 32]})
    np.testing.assert_allclose(predicted, list(by_hand.values()), rtol=1e-14)


def test_quartet_form_by_hand():
    """L = (A/(N·eff_N)^α + B/(D·eff_D)^β)^γ + E: eff_N for a 4-bit forward pass, eff_D for a 4-bit backward one."""
    p = QUARTET.default_paper_params()
    N, D = 1e8, 1e10

    def by_hand(eff_N, eff_D):
        return (p["A"] / (N * eff_N) ** p["alpha"] + p["B"] / (D * eff_D) ** p["beta"]) ** p["gamma"] + p["E"]

    passes = {"P_fwd": [16, 4, 16, 4, 8], "P_bwd": [16, 16, 4, 4, 8]}
    expected = [
        by_hand(1, 1),
        by_hand(p["eff_N"], 1),
        by_hand(1, p["eff_D"]),
        by_hand(p["eff_N"], p["eff_D"]),
        by_hand(1, 1),
    ]
    np.testing.assert_allclose(QUARTET(p, {"N": [N] * 5, "D": [D] * 5, **passes}), expected, rtol=1e-14)


@pytest.mark.parametrize(
    "law, inputs, message",
    [
        (QUEST, {"N": 1e8, "D": 1e10, "P": 6}, "precision 6 bits was not fitted; valid: 1, 2, 3, 4, 8, or >= 16"),
        (QUARTET, {"N": 1e8, "D": 1e10, "P_fwd": 4, "P_bwd": 6}, "precision 6 bits was not fitted; valid: 4, or >= 8"),
    ],
)
def test_a_precision_the_paper_did_not_fit_is_refused(law, inputs, message):
    with pytest.raises(ValueError, match=message):
        law(law.default_paper_params(), inputs)


def test_the_published_constants_reproduce_the_papers_claims():
    """QuEST: 4 bits gives the most effective parameters per bit (its Pareto claim); Quartet: FP4 training costs
    less than 0.1 nats at 100M parameters and 10B tokens, and less as both grow."""
    for variant in QUEST.paper_params.values():
        assert efficiency2025.most_bit_efficient_precision(variant) == 4
    gaps = list(efficiency2025.derived_quantities(QUARTET.name, QUARTET.default_paper_params()).values())
    assert 0 < gaps[2] < gaps[1] < gaps[0] < 0.1


@pytest.mark.parametrize("law", [QUEST, QUARTET], ids=lambda law: law.name)
def test_known_constants_are_recovered_from_synthetic_data(law):
    """0.2 % noise (~0.007 nats, the seed-to-seed spread of such runs) on a grid like the paper's: every constant
    inside its 95 % bootstrap CI, the efficiencies within 5 % of the truth. (At 1 % noise a 4-bit efficiency, which
    moves the loss by ~0.06 nats, is off by up to ~8 %.)"""
    truth = law.default_paper_params()
    table = synthetic_table(law, truth, paper_grid(law), 0.002, seed=3)
    result = fit(law, table, starts=start_sample(law, 16, 3), bootstrap=40, group_col=group_column(law), seed=3)
    outside = {
        p: (truth[p], result.ci[p]) for p in law.param_names if not result.ci[p][0] <= truth[p] <= result.ci[p][1]
    }
    assert not outside, outside
    for name in law.levels:
        assert result.params[name] == pytest.approx(truth[name], rel=0.05), name


def test_laws_fit_holds_the_efficiency_of_a_precision_the_table_lacks(tmp_path, capsys):
    """A table without 1-bit runs cannot pin eff_1: it is held at the paper's value and the notes say why."""
    truth = QUEST.default_paper_params()
    grid = paper_grid(QUEST)
    table = synthetic_table(QUEST, truth, grid[grid.P != 1], 0.002, seed=0)
    table.to_csv(tmp_path / "runs.csv", index=False)
    out = tmp_path / "fit.json"
    args = ["--table", str(tmp_path / "runs.csv"), "--bootstrap", "8", "--starts", "16", "--out", str(out)]
    assert main(["laws", "fit", QUEST.name, *args]) == 0
    result = load_fit(out)
    assert result.params["eff_1"] == truth["eff_1"] and result.ci["eff_1"] == (truth["eff_1"],) * 2
    assert "eff_1 unidentifiable: no row has P = 1 in the table; held at paper variant quest's value" in result.notes
    assert result.params["eff_4"] == pytest.approx(truth["eff_4"], rel=0.02)
    assert "eff_1 unidentifiable" in capsys.readouterr().out


def test_laws_fit_holds_efficiencies_with_no_unquantized_rows_to_measure_them_against(tmp_path):
    """Only FP4:FP4 runs: eff_N and eff_D scale A and B, so both are held (and A, B fitted against them)."""
    truth = QUARTET.default_paper_params()
    grid = paper_grid(QUARTET)
    table = synthetic_table(QUARTET, truth, grid[(grid.P_fwd == 4) & (grid.P_bwd == 4)], 0.002, seed=0)
    table.to_csv(tmp_path / "fp4.csv", index=False)
    out = tmp_path / "fit.json"
    assert main(["laws", "fit", QUARTET.name, "--table", str(tmp_path / "fp4.csv"), "--bootstrap", "0",
                 "--starts", "16", "--out", str(out)]) == 0  # fmt: skip
    notes = load_fit(out).notes
    assert any(note.startswith("eff_N unidentifiable: input 'P_fwd' constant") for note in notes), notes
    assert any(note.startswith("eff_D unidentifiable: input 'P_bwd' constant") for note in notes), notes


def test_laws_show_prints_every_variant_with_its_source(capsys):
    assert main(["laws", "show", QUARTET.name]) == 0
    shown = capsys.readouterr().out
    assert all(f"paper variant {variant} (Castro et al. 2025" in shown for variant in QUARTET.paper_params)
    assert main(["laws", "show", QUEST.name, "--variant", "quest"]) == 0
    assert "most bit-efficient precision (bits): 4" in capsys.readouterr().out


def _predict(capsys, *args) -> dict:
    assert main(["predict", "--N", "1e9", "--D", "2e10", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _rows(report, law):
    return {(row["source"], row["quantity"]): row["value"] for row in report["predictions"] if row["law"] == law}


def test_predict_with_the_papers_constants(capsys):
    p = QUEST.default_paper_params()
    int4 = _rows(_predict(capsys, "--train", "int4:g128"), QUEST.name)
    assert int4[("paper quest", "N_eff (parameters)")] == pytest.approx(1e9 * p["eff_4"])
    assert int4[("paper quest", "loss (nats/token)")] == pytest.approx(QUEST(p, {"N": 1e9, "D": 2e10, "P": 4})[0])
    q = QUARTET.default_paper_params()
    report = _predict(capsys, "--train", "fp:e2m1:b32:e8m0")
    fp4 = _rows(report, QUARTET.name)
    assert set(fp4) == {(f"paper {v}", quantity) for v in ("quartet", "separate")
                        for quantity in ("loss (nats/token)", "N_eff (parameters)")}  # fmt: skip
    both_passes = {"N": 1e9, "D": 2e10, "P_fwd": 4, "P_bwd": 4}
    assert fp4[("paper quartet", "loss (nats/token)")] == pytest.approx(QUARTET(q, both_passes)[0])
    assert "panferov2025.quest: its efficiencies are for int training, not fp:e2m1:b32:e8m0" in report["notes"]
    bf16 = _rows(_predict(capsys), QUARTET.name)
    assert bf16[("paper quartet", "N_eff (parameters)")] == 1e9


def test_predict_names_a_precision_without_a_fitted_efficiency(capsys):
    report = _predict(capsys, "--train", "int6:g32")
    assert not _rows(report, QUEST.name)
    assert any(note.startswith("panferov2025.quest: no efficiency fitted at 6 bits") for note in report["notes"])


def test_predict_uses_a_fit_of_either_law(capsys, tmp_path):
    table = synthetic_table(QUARTET, QUARTET.default_paper_params(), paper_grid(QUARTET), 0.01, seed=0)
    path = fit(QUARTET, table, starts=[QUARTET.default_paper_params()], bootstrap=0).to_json(tmp_path / "q.json")
    rows = _rows(_predict(capsys, "--train", "fp:e2m1:b16", "--fit", str(path)), QUARTET.name)
    paper, fitted = rows[("paper quartet", "loss (nats/token)")], rows[(f"fit {path}", "loss (nats/token)")]
    assert fitted == pytest.approx(paper, rel=0.01)
