"""`qscaling predict`: the papers' derived numbers through the CLI, its JSON, intervals from fits, bad input."""

import json
import subprocess
import sys

import pytest

from qscaling import predict
from qscaling.cli import main
from qscaling.laws import LAWS, fit
from qscaling.laws.synthetic import paper_grid, synthetic_table

PAPER_NO_INTERVAL = "no interval: the paper reports no uncertainty"


def run_predict(capsys, *args) -> dict:
    assert main(["predict", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def only(report: dict, law: str, quantity: str, source_prefix: str = "paper") -> dict:
    rows = [
        row
        for row in report["predictions"]
        if row["law"] == law and row["quantity"] == quantity and row["source"].startswith(source_prefix)
    ]
    assert len(rows) == 1, rows
    return rows[0]


def synthetic_fit_file(directory, law_name, *, bootstrap, variant=None, grid=None, starts=None):
    law = LAWS[law_name]
    truth = law.paper_params[variant] if variant else law.default_paper_params()
    table = synthetic_table(law, truth, paper_grid(law) if grid is None else grid, noise=0.01, seed=0)
    result = fit(law, table, bootstrap=bootstrap, group_col=None, starts=starts)
    return str(result.to_json(directory / f"{law_name}.json"))


# ---- The papers' derived numbers from their constants --------------------------------------------------------


def test_kumar_compute_optimal_precision_is_seven_bits(capsys):
    assert main(["predict", "--N", "1e9", "--D", "2e10"]) == 0
    table = capsys.readouterr().out
    assert "P* compute-optimal (bits)  7.002" in table  # "P* joint compute-optimal (bits): 7.00211"
    report = run_predict(capsys, "--N", "1e9", "--D", "2e10")
    assert only(report, "kumar2024.neff", predict.P_STAR, "paper table2")["value"] == pytest.approx(7.00, abs=0.01)
    # Table 2 with the FP weight fit's γ_w 2.8111, n_w 0.1240 in place of the INT ones (Fig. 16).
    assert only(report, "kumar2024.neff", predict.P_STAR, "paper fp_weights")["value"] == pytest.approx(6.93, abs=0.01)


def test_chen_w4a4_error_at_595m_params_100b_tokens_group_128(capsys):
    report = run_predict(capsys, "--N", "595M", "--D", "100B", "--train", "int4:g128")
    assert only(report, "chen2025.qat", predict.DELTA_QAT)["value"] == pytest.approx(0.057, abs=5e-4)
    assert not any("W4A4" in note for note in report["notes"])


def test_chen_says_its_constants_are_for_w4a4_at_other_bits(capsys):
    report = run_predict(capsys, "--N", "595M", "--D", "100B", "--train", "int8:g128")
    assert "chen2025.qat: paper constants are for W4A4; --train gives W8A8" in report["notes"]


@pytest.mark.parametrize(
    "train, tokens",
    [
        (["--train", "fp:e8m7:b128"], 1730e12),
        (["--train", "fp:e4m3:b128"], 27e12),
        (["--train", "fp:e2m1:b128"], 0.4e12),
    ],
)
def test_sun_critical_data_size_at_1e9_params_block_128(capsys, train, tokens):
    # Sec. 4.2 quotes 1730T (E8M7), 27T (E4M3) and 0.4T (E2M1), rounded; we get 1729.5T, 27.33T, 0.393T.
    report = run_predict(capsys, "--N", "1e9", "--D", "1e12", *train)
    assert only(report, "sun2025.capybara", predict.D_CRIT)["value"] == pytest.approx(tokens, rel=0.02)


def test_sun_reads_a_run_without_train_as_bf16_e8m7(capsys):
    report = run_predict(capsys, "--N", "1e9", "--D", "1e12")
    assert only(report, "sun2025.capybara", predict.D_CRIT)["value"] == pytest.approx(1730e12, rel=0.02)


# ---- Which quantities each option brings, and the JSON ----------------------------------------------------


def test_json_structure_and_quantities_per_option(capsys):
    plain = run_predict(capsys, "--N", "1e9", "--D", "2e10")
    assert set(plain) == {"plan", "predictions", "notes"}
    assert plain["plan"] == {"N": 1e9, "D": 2e10, "ptq": None, "train": None}
    for row in plain["predictions"]:
        assert set(row) == {"source", "law", "quantity", "value", "interval", "interval_method"}
        assert row["interval"] is None and row["interval_method"] == PAPER_NO_INTERVAL
    assert {row["quantity"] for row in plain["predictions"]} == {
        predict.LOSS,
        predict.N_EFF,
        predict.P_STAR,
        predict.P_STAR_AT_N,
        predict.D_CRIT,
    }
    quantized = run_predict(capsys, "--N", "1e9", "--D", "2e10", "--ptq", "gptq:int4:g128", "--train", "int4:g128")
    assert quantized["plan"]["ptq"] == "gptq:int4:g128" and quantized["plan"]["train"] == "int4:g128"
    assert {row["quantity"] for row in quantized["predictions"]} == set(predict.QUANTITIES) - {predict.D_CRIT}
    variants = {row["source"] for row in quantized["predictions"] if row["law"] == "kumar2024.ptq"}
    assert variants == {"paper table2", "paper table2_offset"}
    assert {row["source"] for row in quantized["predictions"] if row["law"] == "ouyang2024.qid_fixed_bits"} == {
        "paper 4bit"
    }
    order = [predict.QUANTITIES.index(row["quantity"]) for row in quantized["predictions"]]
    assert order == sorted(order)


def test_n_and_d_alone_do_not_import_torch():
    code = (
        "import sys; from qscaling.cli import main; main(['predict', '--N', '1e9', '--D', '2e10']); "
        "print('torch' in sys.modules)"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.splitlines()[-1] == "False"


# ---- Intervals from fits ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chen_fit(tmp_path_factory):
    return synthetic_fit_file(tmp_path_factory.mktemp("fits"), "chen2025.qat", bootstrap=20, variant="W4A4")


def test_fit_interval_contains_its_point_estimate(capsys, chen_fit):
    report = run_predict(capsys, "--N", "595M", "--D", "100B", "--train", "int4:g128", "--fit", chen_fit)
    for quantity in (predict.DELTA_QAT, predict.N_EFF):
        row = only(report, "chen2025.qat", quantity, source_prefix="fit")
        low, high = row["interval"]
        assert low < row["value"] < high
        assert row["interval_method"] == "bootstrap: 95% percentile of 20 re-fits to the 64 points resampled"
    paper = only(report, "chen2025.qat", predict.DELTA_QAT)["value"]
    assert only(report, "chen2025.qat", predict.DELTA_QAT, source_prefix="fit")["value"] == pytest.approx(
        paper, rel=0.05
    )


def test_fit_without_resamples_has_no_interval(capsys, chen_fit):
    args = ("--N", "595M", "--D", "100B", "--train", "int4:g128", "--fit", chen_fit, "--resamples", "0")
    row = only(run_predict(capsys, *args), "chen2025.qat", predict.DELTA_QAT, source_prefix="fit")
    assert row["interval"] is None and row["interval_method"].startswith("no interval")
    assert main(["predict", *args]) == 0
    assert f"fit {chen_fit}" in capsys.readouterr().out


def test_fit_with_inputs_kept_in_high_precision_resamples(capsys, tmp_path):
    # P = inf inputs are stored as JSON null; re-fitting must read them back as inf, not NaN.
    law = LAWS["kumar2024.neff"]
    grid = paper_grid(law)
    grid = grid[grid.N.isin((30e6, 220e6))].reset_index(drop=True)
    path = synthetic_fit_file(tmp_path, law.name, bootstrap=0, grid=grid, starts=[law.default_paper_params()])
    report = run_predict(capsys, "--N", "1e8", "--D", "2e9", "--train", "int6:g128", "--fit", path, "--resamples", "4")
    row = only(report, "kumar2024.neff", predict.P_STAR, source_prefix="fit")
    assert row["interval"][0] <= row["value"] <= row["interval"][1]


# ---- Bad input: one line naming the option, exit code 2, nothing on stdout -------------------------------


@pytest.fixture(scope="module")
def bad_fits(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bad_fits")
    garbage = directory / "garbage.json"
    garbage.write_text("not json")
    not_a_fit = directory / "not_a_fit.json"
    not_a_fit.write_text(json.dumps({"law": "chinchilla"}))
    ptq = LAWS["kumar2024.ptq"]
    return {
        "unrelated": synthetic_fit_file(directory, "ouyang2024.qid_bits", bootstrap=0),
        "needs_ptq": synthetic_fit_file(directory, ptq.name, bootstrap=0, starts=[ptq.default_paper_params()]),
        "missing": str(directory / "missing.json"),
        "garbage": str(garbage),
        "not_a_fit": str(not_a_fit),
    }


@pytest.mark.parametrize(
    "args, option, message",
    [
        (["--ptq", "gptq:int9:g128"], "--ptq", "bits must be 2..8"),
        (["--ptq", "int4:g128"], "--ptq", "expected METHOD:SPEC"),
        (["--ptq", "gptq:fp:e4m3:b32"], "--ptq", "for int<b> formats"),
        (["--train", "int4:q128"], "--train", "granularity must be"),
        (["--N", "0"], "--N", "expected a positive count"),
        (["--N", "-5"], "--N", "expected a positive count"),
        (["--D", "100X"], "--D", "expected a positive count"),
        (["--resamples", "-1"], "--resamples", "expected a count >= 0"),
        (["--fit", "unrelated"], "--fit", "a fit of ouyang2024.qid_bits cannot be used"),
        (["--fit", "needs_ptq"], "--fit", "a fit of kumar2024.ptq needs --ptq"),
        (["--fit", "missing"], "--fit", "cannot read the file"),
        (["--fit", "garbage"], "--fit", "not a fit file"),
        (["--fit", "not_a_fit"], "--fit", "not a fit file"),
    ],
)
def test_bad_input_is_one_line_naming_the_option(capsys, bad_fits, args, option, message):
    args = [bad_fits.get(arg, arg) for arg in args]
    plan = {"--N": "1e9", "--D": "2e10"}
    plan.update(dict(zip(args[::2], args[1::2])))
    assert main(["predict", *(item for pair in plan.items() for item in pair)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1
    assert err.startswith(f"qscaling predict: {option}") and message in err


# ---- What a reader must be told ---------------------------------------------------------------------------------


def test_the_papers_gptq_constants_are_not_passed_off_as_another_methods(capsys):
    gptq = run_predict(capsys, "--N", "1e9", "--D", "2e10", "--ptq", "gptq:int4:g128")
    rtn = run_predict(capsys, "--N", "1e9", "--D", "2e10", "--ptq", "rtn:int4:g128")
    assert any(row["quantity"] == predict.DELTA_PTQ for row in gptq["predictions"])
    assert not any(row["quantity"] in (predict.DELTA_PTQ, predict.QID) for row in rtn["predictions"])
    assert any("fitted these to GPTQ and give no constants for rtn" in note for note in rtn["notes"])


def test_paper_variants_that_disagree_are_named_with_their_sources(capsys):
    report = run_predict(capsys, "--N", "1e9", "--D", "2e10", "--ptq", "gptq:int4:g128")
    [note] = [note for note in report["notes"] if note.startswith("kumar2024.ptq: δ_PTQ differs")]
    assert "3.1x between paper variants" in note and "offset b = 1.1277 not applied" in note


def test_a_fit_asked_beyond_its_data_and_an_implausible_plan_are_flagged(tmp_path, capsys):
    path = synthetic_fit_file(tmp_path, "chinchilla", bootstrap=0)
    report = run_predict(capsys, "--N", "70B", "--D", "1", "--fit", path)
    notes = " ".join(report["notes"])
    assert f"--fit {path}: N = 7e+10 is" in notes and "beyond the" in notes and "an extrapolation" in notes
    assert "fewer tokens than parameters" in notes and "a predicted loss exceeds 20 nats" in notes
