"""qscaling diff: tolerances on tables and fits, verdict changes, figure RMS, missing/extra artifacts, exit codes.

Unit tests build small result trees by hand; the end-to-end tests reuse the shared smoke runs: two fresh runs
are identical, a run with another PTQ calibration seed differs in exactly the files whose bytes differ, and a
deleted figure shows as missing.
"""

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from conftest import REPO_ROOT, copy_artifacts_like
from PIL import Image

from qscaling.cli import main
from qscaling.diff.artifacts import list_artifacts
from qscaling.diff.fits import compare_fits
from qscaling.diff.tables import compare_tables
from qscaling.diff.tolerances import Tolerances, load_tolerances, parse_column_tolerance
from qscaling.diff.trees import diff_trees
from qscaling.diff.values import text_within
from qscaling.figures import new_figure, save_figure
from qscaling.laws import LAWS


def draw(path, offset: float = 0.0) -> None:
    fig, axes = new_figure(width=2.0, height=1.6)
    axes[0][0].plot([0, 1, 2], [0.0, 1.0 + offset, 0.5])
    save_figure(fig, path)


def fit_doc(alpha: float, ci: tuple[float, float]) -> dict:
    return {
        "law": "baseline.chinchilla",
        "formula": "A/N^alpha + E",
        "params": {"A": 400.0, "alpha": alpha},
        "ci": {"A": [390.0, 410.0], "alpha": list(ci)},
        "r2": 0.98,
        "rmse": 0.01,
        "heldout_relative_error": None,
        "n_points": 12,
        "notes": [],
    }


def make_tree(root):
    """A result tree with one of each artifact kind, plus things diff must ignore."""
    (root / "results" / "tables").mkdir(parents=True)
    (root / "results" / "fits" / "study").mkdir(parents=True)
    pd.DataFrame({"size": ["N3k", "N7k"], "D": [2048, 4096], "loss": [5.0, 4.5]}).to_parquet(
        root / "results" / "tables" / "curves.parquet", index=False
    )
    pd.DataFrame(
        {
            "claim": ["more data hurts PTQ", "bits help"],
            "statistic": [0.52, -1.1],
            "verdict": ["reproduced", "inconclusive"],
        }
    ).to_csv(root / "results" / "claims.csv", index=False)
    (root / "results" / "fits" / "study" / "chinchilla.json").write_text(json.dumps(fit_doc(0.30, (0.28, 0.32))))
    draw(root / "figures" / "paper" / "fig1.png")
    # Not artifacts: checkpoints, provenance records, the manifest.
    checkpoint = root / "results" / "runs" / "N3k" / "checkpoints" / "tokens_1"
    checkpoint.mkdir(parents=True)
    (checkpoint / "model.safetensors").write_bytes(root.name.encode())
    (root / "results" / "provenance").mkdir()
    (root / "results" / "provenance" / "x.json").write_text(json.dumps({"finished": root.name}))
    (root / "results" / "manifest.json").write_text(json.dumps({"updated": root.name}))
    return root


@pytest.fixture
def trees(tmp_path):
    return make_tree(tmp_path / "a"), make_tree(tmp_path / "b")


def run_cli(*args, capsys) -> tuple[int, str]:
    code = main(["diff", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def statuses(a, b, **tol):
    return {d.path: d.status for d in diff_trees(a, b, Tolerances(**tol))}


def test_identical_trees_exit_zero_and_skip_non_artifacts(trees, capsys):
    a, b = trees
    assert sorted(list_artifacts(a)) == [
        "figures/paper/fig1.data.json",
        "figures/paper/fig1.png",
        "results/claims.csv",
        "results/fits/study/chinchilla.json",
        "results/tables/curves.parquet",
    ]
    code, out = run_cli(a, b, capsys=capsys)
    assert code == 0, out
    assert "identical: 5" in out and "no difference beyond tolerance" in out


def test_numeric_column_beyond_tolerance_then_within_a_column_tolerance(trees, capsys):
    a, b = trees
    pd.DataFrame({"size": ["N3k", "N7k"], "D": [2048, 4096], "loss": [5.0, 4.504]}).to_parquet(
        b / "results" / "tables" / "curves.parquet", index=False
    )
    code, out = run_cli(a, b, capsys=capsys)
    assert code == 1
    assert "loss: 1 of 2 rows beyond rtol=0 atol=0; largest at row 1: 4.5 vs 4.504" in out
    # |Δ| = 0.004, relative to the smaller value 4.5: inside rtol 1e-3 (0.0045), outside 8e-4 (0.0036).
    assert run_cli(a, b, "--column-tol", "loss=1e-3", capsys=capsys)[0] == 0
    assert run_cli(a, b, "--column-tol", "loss=8e-4", capsys=capsys)[0] == 1
    assert run_cli(a, b, "--atol", "0.005", capsys=capsys)[0] == 0
    assert statuses(a, b, rtol=1e-3)["results/tables/curves.parquet"] == "within_tolerance"


def test_an_ignored_column_is_left_out(trees, capsys):
    a, b = trees
    pd.DataFrame({"size": ["N3k", "N7k"], "D": [2048, 4096], "loss": [5.0, 4.6]}).to_parquet(
        b / "results" / "tables" / "curves.parquet", index=False
    )
    assert run_cli(a, b, "--ignore-column", "loss", capsys=capsys)[0] == 0
    assert run_cli(a, b, "--ignore-column", "D", capsys=capsys)[0] == 1


def test_compare_tables_is_relative_to_the_smaller_value_cell_by_cell_in_either_order():
    rng = np.random.default_rng(0)
    a = pd.DataFrame({"x": rng.normal(size=200)})
    b = pd.DataFrame({"x": a["x"] * (1 + rng.normal(scale=1e-3, size=200))})
    for rtol, atol in ((1e-3, 0.0), (2e-3, 1e-4), (5e-4, 1e-3), (3e-3, 0.0)):
        expected = all(abs(x - y) <= atol + rtol * min(abs(x), abs(y)) for x, y in zip(a["x"], b["x"]))
        assert compare_tables(a, b, Tolerances(rtol=rtol, atol=atol))[0] == expected
        assert compare_tables(b, a, Tolerances(rtol=rtol, atol=atol))[0] == expected
    # rtol = 1: a factor 2 either way, whichever run comes first.
    base, doubled = pd.DataFrame({"x": [1e-6]}), pd.DataFrame({"x": [2e-6]})
    assert (
        compare_tables(base, doubled, Tolerances(rtol=1.0))[0]
        and compare_tables(doubled, base, Tolerances(rtol=1.0))[0]
    )
    tripled = pd.DataFrame({"x": [3e-6]})
    assert not compare_tables(base, tripled, Tolerances(rtol=1.0))[0]
    assert not compare_tables(tripled, base, Tolerances(rtol=1.0))[0]


def test_a_changed_verdict_is_reported_with_its_row(trees, capsys):
    a, b = trees
    claims = pd.read_csv(b / "results" / "claims.csv")
    claims.loc[1, "verdict"] = "reproduced"
    claims.to_csv(b / "results" / "claims.csv", index=False)
    code, out = run_cli(a, b, "--rtol", "1", capsys=capsys)  # no numeric tolerance hides a verdict change
    assert code == 1
    assert "verdict: 1 rows differ (row 1: 'inconclusive' → 'reproduced')" in out


def test_numbers_derived_from_an_ill_conditioned_fit_are_not_compared_but_their_verdicts_are():
    draws = pd.DataFrame({"draw": [0, 1], "P_star": [2.05, np.nan], "ill_conditioned": [True, False]})
    moved = draws.assign(P_star=[3.55, np.nan])
    assert compare_tables(draws, moved, Tolerances())[0]
    assert not compare_tables(draws, moved.assign(P_star=[2.05, 1.0]), Tolerances())[0]  # row 1 is pinned down
    assert not compare_tables(draws, moved.assign(ill_conditioned=False), Tolerances())[0]  # one side only
    row = {
        "statistic": "P* = 1.09 bits: the joint fit is ill-conditioned",
        "ci": "[0.587, 2.51]",
        "verdict": "inconclusive",
    }
    claims = pd.DataFrame([row])
    assert compare_tables(claims, claims.assign(statistic="P* = 2.32 bits: the joint fit is ill-conditioned",
                                                ci="[1.18, 3.66]"), Tolerances())[0]  # fmt: skip
    assert not compare_tables(claims, claims.assign(verdict="not reproduced"), Tolerances())[0]
    assert not compare_tables(claims, claims.assign(statistic="P* = 2.32 bits"), Tolerances())[0]


def test_fit_parameters_and_ci_overlap(trees):
    a, b = trees
    fit_path = b / "results" / "fits" / "study" / "chinchilla.json"
    fit_path.write_text(json.dumps(fit_doc(0.31, (0.29, 0.33))))
    [diff] = [d for d in diff_trees(a, b) if d.kind == "fit"]
    assert diff.status == "changed"
    assert diff.details[0] == "alpha: 0.3 vs 0.31 beyond rtol=0 atol=0 (CIs overlap)"
    fit_path.write_text(json.dumps(fit_doc(0.40, (0.38, 0.42))))
    [diff] = [d for d in diff_trees(a, b, Tolerances(rtol=0.05)) if d.kind == "fit"]
    assert diff.details[0] == "alpha: 0.3 vs 0.4 beyond rtol=0.05 atol=0 (CIs do not overlap)"
    assert statuses(a, b, columns={"alpha": (0.5, 0.0)})["results/fits/study/chinchilla.json"] == "within_tolerance"


def independent_rms(path_a, path_b) -> float:
    a = np.asarray(Image.open(path_a).convert("RGB"), dtype=float)
    b = np.asarray(Image.open(path_b).convert("RGB"), dtype=float)
    return float(np.sqrt(np.mean((a - b) ** 2)))


def test_figures_compare_bytes_then_rms(trees):
    a, b = trees
    draw(b / "figures" / "paper" / "fig1.png", offset=0.05)
    rms = independent_rms(a / "figures" / "paper" / "fig1.png", b / "figures" / "paper" / "fig1.png")
    assert rms > 0
    [diff] = [d for d in diff_trees(a, b) if d.kind == "figure"]
    assert diff.status == "changed"
    assert diff.details == [f"RMS {rms:.4f} > figure-tol 0"]
    assert statuses(a, b, figure_tol=rms * 1.01)["figures/paper/fig1.png"] == "within_tolerance"
    assert statuses(a, b, figure_tol=rms * 0.99)["figures/paper/fig1.png"] == "changed"


def test_missing_and_extra_artifacts(trees, capsys):
    a, b = trees
    (b / "figures" / "paper" / "fig1.png").unlink()
    shutil.copy(a / "results" / "claims.csv", b / "results" / "claims_extra.csv")
    code, out = run_cli(a, b, capsys=capsys)
    assert code == 1
    assert statuses(a, b) == {
        "figures/paper/fig1.data.json": "identical",
        "figures/paper/fig1.png": "missing",
        "results/claims.csv": "identical",
        "results/claims_extra.csv": "extra",
        "results/fits/study/chinchilla.json": "identical",
        "results/tables/curves.parquet": "identical",
    }


def test_json_and_markdown_outputs(trees, capsys):
    a, b = trees
    (b / "figures" / "paper" / "fig1.png").unlink()
    code, out = run_cli(a, b, "--json", capsys=capsys)
    report = json.loads(out)
    assert code == 1 and report["counts"]["missing"] == 1 and report["counts"]["identical"] == 4
    assert {entry["path"]: entry["status"] for entry in report["artifacts"]}["figures/paper/fig1.png"] == "missing"
    code, out = run_cli(a, b, "--markdown", capsys=capsys)
    assert code == 1
    assert "| missing | figure | `figures/paper/fig1.png` | only in A |" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--column-tol", "loss"], "--column-tol 'loss': expected COLUMN=RTOL or COLUMN=RTOL:ATOL"),
        (["--column-tol", "loss=-1"], "--column-tol 'loss=-1': tolerances must be ≥ 0"),
        (["--rtol", "-0.1"], "--rtol -0.1: must be ≥ 0"),
    ],
)
def test_bad_tolerances_exit_two(trees, capsys, args, message):
    code, out = run_cli(*trees, *args, capsys=capsys)
    assert code == 2 and message in out


def test_bad_runs_exit_two(tmp_path, trees, capsys):
    code, out = run_cli(trees[0], tmp_path / "nowhere", capsys=capsys)
    assert code == 2 and "run B" in out and "not a directory" in out
    (tmp_path / "empty1").mkdir()
    (tmp_path / "empty2").mkdir()
    code, out = run_cli(tmp_path / "empty1", tmp_path / "empty2", capsys=capsys)
    assert code == 2 and "neither holds figures/ or results/ artifacts" in out


def test_parse_column_tolerance():
    assert parse_column_tolerance("loss=1e-3") == ("loss", (1e-3, 0.0))
    assert parse_column_tolerance("delta=0.01:1e-6") == ("delta", (0.01, 1e-6))


# --- end to end, on the shared smoke runs -------------------------------------------------------------------


def qscaling_diff(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "qscaling.cli", "diff", *map(str, args)], capture_output=True, text=True, timeout=300
    )


def differing_files(a, b) -> set[str]:
    """Independent of qscaling.diff: artifact paths whose bytes differ, or that exist on one side only."""
    files_a, files_b = list_artifacts(a), list_artifacts(b)
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    return {
        path
        for path in set(files_a) | set(files_b)
        if path not in files_a or path not in files_b or digest(files_a[path]) != digest(files_b[path])
    }


@pytest.mark.slow
def test_a_resumed_run_has_no_difference_from_a_straight_one(smoke_run, interrupted_smoke_run, tmp_path):
    """The slice that was killed and resumed against the same files of the straight-through run."""
    straight = copy_artifacts_like(smoke_run, interrupted_smoke_run.workdir, tmp_path / "straight")
    result = qscaling_diff(straight, interrupted_smoke_run.workdir)
    assert result.returncode == 0, result.stdout[-3000:]
    counts = json.loads(qscaling_diff(straight, interrupted_smoke_run.workdir, "--json").stdout)["counts"]
    assert counts["identical"] == len(list_artifacts(straight)) > 10
    assert counts["changed"] == counts["missing"] == counts["extra"] == counts["within_tolerance"] == 0


@pytest.mark.slow
def test_a_deleted_figure_shows_as_missing(smoke_run, tmp_path):
    copy = copy_artifacts_like(smoke_run, smoke_run, tmp_path / "copy")
    (copy / "figures" / "common" / "learning_curves.png").unlink()
    result = qscaling_diff(smoke_run, copy, "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert [(d["path"], d["status"]) for d in report["artifacts"] if d["status"] != "identical"] == [
        ("figures/common/learning_curves.png", "missing")
    ]


@pytest.mark.slow
def test_another_seed_changes_exactly_the_artifacts_that_depend_on_it(smoke_run, tmp_path):
    """Rebuild one PTQ table of a copy of the smoke run with another calibration seed (kumar2024's GPTQ/AWQ):
    diff reports exactly the files whose bytes differ, and the table's change is the seed's, not noise."""
    from conftest import run_snakemake

    workdir = tmp_path / "other_seed"
    shutil.copytree(smoke_run, workdir, symlinks=True)
    table = sorted((workdir / "results" / "scores" / "kumar2024").rglob("*.parquet"))[0].relative_to(workdir)
    overrides = tmp_path / "seed.yaml"
    overrides.write_text("presets:\n  smoke:\n    studies:\n      kumar2024:\n        calibration: {seed: 1}\n")
    result = run_snakemake(
        workdir, "--configfile", str(REPO_ROOT / "config.yaml"), str(overrides), "--", table.as_posix()
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]

    before, after = pd.read_parquet(smoke_run / table), pd.read_parquet(workdir / table)
    calibrated = before["method"].isin(["gptq", "awq"])
    assert (before.loc[calibrated, "loss"] != after.loc[calibrated, "loss"]).any()
    assert before.loc[~calibrated, "loss"].tolist() == after.loc[~calibrated, "loss"].tolist()

    expected = differing_files(smoke_run, workdir)
    assert expected == {table.as_posix()}
    compared = qscaling_diff(smoke_run, workdir, "--json")
    assert compared.returncode == 1
    reported = {d["path"] for d in json.loads(compared.stdout)["artifacts"] if d["status"] != "identical"}
    assert reported == expected


# --- tolerances sized from noise: SE-scaled columns, moved fits, numbers in text, figure structure, profiles --


def test_a_noise_column_is_compared_in_units_of_its_standard_error():
    base = pd.DataFrame({"delta": np.linspace(0.01, 0.05, 24), "delta_se": [0.001] * 24})
    tol = Tolerances(noise_columns={"delta": "delta_se"}, noise_max=3.0, noise_rms=0.5)
    one_flip = base.copy()
    one_flip.loc[3, "delta"] += 0.002  # one flipped rounding: 2 / √2 ≈ 1.4 SE
    assert compare_tables(one_flip, base, tol)[0]
    assert not compare_tables(one_flip, base, replace(tol, noise_max=1.0))[0]
    every_row = base.assign(delta=base["delta"] + 0.0012)  # every row 0.85 SE: a change of method
    within, details = compare_tables(every_row, base, tol)
    assert not within and "rms 0.849 > 0.5" in details[0]
    few = compare_tables(every_row.iloc[:4], base.iloc[:4], tol)
    assert few[0] and "not judged below 20 rows" in few[1][0]
    far = base.copy()
    far.loc[0, "delta"] += 0.005  # 3.5 SE at one row
    assert not compare_tables(far, base, tol)[0]
    assert not compare_tables(one_flip, base, Tolerances())[0], "without noise_columns the rule is rtol/atol"


def chinchilla_fit_doc(params: dict, se: float) -> dict:
    names = ("A", "B", "E", "alpha", "beta")
    return {
        "law": "chinchilla",
        "formula": LAWS["chinchilla"].formula,
        "params": params,
        "ci": {n: [params[n] - 2 * se * abs(params[n]), params[n] + 2 * se * abs(params[n])] for n in names},
        "standard_errors": {n: se * abs(params[n]) for n in names},
        "r2": 0.9,
        "rmse": 0.01,
        "heldout_relative_error": None,
        "points": {"inputs": {"N": [1e6, 1e7, 1e8], "D": [1e9, 1e10, 1e11]}, "observed": [3.0, 2.6, 2.3]},
    }


def test_a_fit_whose_parameters_traded_off_is_compared_by_its_predictions():
    base = {"A": 400.0, "B": 400.0, "E": 1.7, "alpha": 0.34, "beta": 0.28}
    # A and alpha trade off: at N ~ 1e6–1e8 the A/N^alpha term barely changes.
    traded = {**base, "A": 400.0 * 1e7**0.02, "alpha": 0.36}
    a, b = chinchilla_fit_doc(traded, 0.1), chinchilla_fit_doc(base, 0.1)
    within, details = compare_fits(a, b, Tolerances(rtol=1e-3, prediction_tol=0.05, noise_max=3.0))
    assert within, details
    assert "predictions at 6 points differ by ≤ 0.0262" in details[-1]
    assert not compare_fits(a, b, Tolerances(rtol=1e-3, prediction_tol=0.02, noise_max=3.0))[0]
    tight = chinchilla_fit_doc(traded, 0.001), chinchilla_fit_doc(base, 0.001)  # moved far beyond its SEs
    within, details = compare_fits(*tight, Tolerances(rtol=1e-3, prediction_tol=0.05, noise_max=3.0))
    assert not within and any("bootstrap SEs" in line for line in details)


def test_fits_both_flagged_ill_conditioned_are_judged_by_their_predictions_alone():
    """Measured: Sun et al.'s smoke exponent-only fit moved its n from 8.7 to 0.001 (66 bootstrap SEs, CIs apart)
    between CPU code paths while its predictions moved by 7.6e-5: parameters the data do not pin down."""
    base = {"A": 400.0, "B": 400.0, "E": 1.7, "alpha": 0.34, "beta": 0.28}
    traded = {**base, "A": 400.0 * 1e7**0.02, "alpha": 0.36}
    a, b = chinchilla_fit_doc(traded, 0.001), chinchilla_fit_doc(base, 0.001)
    tol = Tolerances(rtol=1e-3, prediction_tol=0.05, noise_max=3.0)
    assert not compare_fits(a, b, tol)[0]
    flagged = [{**doc, "notes": ["ill-conditioned: Jacobian condition number 1e+07 > 1e+06; …"]} for doc in (a, b)]
    within, details = compare_fits(*flagged, tol)
    assert within and details[-1] == "both fits ill-conditioned: judged by their predictions alone"
    assert not compare_fits(*flagged, Tolerances(rtol=1e-3, prediction_tol=0.02, noise_max=3.0))[0]
    assert not compare_fits(flagged[0], b, tol)[0], "one well-conditioned side keeps the parameter rule"


def test_texts_that_differ_only_in_numbers_within_tolerance():
    assert text_within("slope = 1.561 (5 points)", "slope = 1.562 (5 points)", 1e-3, 0)
    assert not text_within("slope = 1.561 (5 points)", "slope = 1.561 (6 points)", 1e-3, 0)
    assert not text_within("W4 − W8A8 = 2.0e-04", "W4 − W8A8 = 2.0e-04 (ratio 3×)", 1, 1)
    claims = pd.DataFrame({"statistic": ["γ = 0.777, R² = 0.75"], "verdict": ["reproduced"]})
    moved = pd.DataFrame({"statistic": ["γ = 0.785, R² = 0.74"], "verdict": ["reproduced"]})
    assert compare_tables(moved, claims, Tolerances(columns={"statistic": (0.05, 0.01)}))[0]
    assert not compare_tables(
        moved.assign(verdict="inconclusive"), claims, Tolerances(columns={"statistic": (0.05, 0.01)})
    )[0]


def test_a_verdict_float_noise_alone_decides_is_borderline_and_only_that_one():
    """Measured across CPU code paths: a dropout slope's CI [−2.26e-4, 2.33e-6] became [−2.27e-4, −2.96e-6],
    flipping inconclusive → not reproduced. A flip whose CI bounds agree within tolerance and straddle the
    threshold is reported as borderline; a flip on CIs that moved, or clear of the threshold, still fails."""
    tol = Tolerances(columns={"ci": (1.0, 5e-5)})

    def claims(ci, verdict, magnitude="no paper value", paper=""):
        return pd.DataFrame({"ci": [ci], "verdict": [verdict], "paper": [paper], "magnitude": [magnitude]})

    reference = claims("[-2.26e-04, 2.33e-06] (seed noise)", "inconclusive")
    within, details = compare_tables(reference, claims("[-2.27e-04, -2.96e-06] (seed noise)", "not reproduced"), tol)
    assert within and any("1 borderline verdicts (row 0: 'inconclusive' → 'not reproduced')" in d for d in details)
    assert not compare_tables(reference, claims("[-9.0e-04, -2.0e-04] (seed noise)", "not reproduced"), tol)[0]
    assert not compare_tables(claims("[0.2, 0.5]", "reproduced"), claims("[0.2, 0.5]", "inconclusive"), tol)[0]
    on_paper = claims("[0.30, 0.3479]", "reproduced", "excludes paper", "0.348")
    assert compare_tables(on_paper, claims("[0.30, 0.3481]", "reproduced", "covers paper", "0.348"), tol)[0]
    clear = claims("[0.1, 0.2]", "reproduced", "excludes paper", "0.348")
    assert not compare_tables(clear, clear.assign(magnitude="covers paper"), tol)[0]


def test_a_figure_is_compared_by_what_it_draws_when_asked(trees):
    a, b = trees
    draw(b / "figures" / "paper" / "fig1.png", offset=0.3)
    assert statuses(a, b)["figures/paper/fig1.png"] == "changed"
    assert statuses(a, b, figure_structure=True)["figures/paper/fig1.png"] == "within_tolerance"
    fig, axes = new_figure(width=2.0, height=1.6)  # another line: the structure changed
    axes[0][0].plot([0, 1, 2], [0.0, 1.0, 0.5])
    axes[0][0].plot([0, 1, 2], [1.0, 1.0, 1.0])
    save_figure(fig, b / "figures" / "paper" / "fig1.png")
    assert statuses(a, b, figure_structure=True)["figures/paper/fig1.png"] == "changed"
    data = b / "figures" / "paper" / "fig1.data.json"
    shutil.copyfile(a / "figures" / "paper" / "fig1.data.json", data)  # same data, other pixels
    [diff] = [d for d in diff_trees(a, b, Tolerances(figure_structure=True)) if d.path.endswith("fig1.png")]
    assert diff.status == "changed" and "the drawing itself changed" in diff.details[-1]


def test_a_tolerance_profile_sets_defaults_that_options_override(trees, tmp_path, capsys):
    a, b = trees
    pd.DataFrame({"size": ["N3k", "N7k"], "D": [2048, 4096], "loss": [5.0, 4.504]}).to_parquet(
        b / "results" / "tables" / "curves.parquet", index=False
    )
    profile = tmp_path / "tolerances.yaml"
    profile.write_text("rtol: 1.0e-3\ncolumns: {D: [0, 0]}\n")
    assert run_cli(a, b, "--tolerances", profile, capsys=capsys)[0] == 0
    assert run_cli(a, b, "--tolerances", profile, "--rtol", "0", capsys=capsys)[0] == 1
    profile.write_text("rtoll: 1\n")
    code, out = run_cli(a, b, "--tolerances", profile, capsys=capsys)
    assert code == 2 and "unknown key 'rtoll'" in out


def test_the_committed_profile_parses():
    profile = load_tolerances(REPO_ROOT / "reference" / "tolerances.yaml")
    assert profile["noise_columns"]["delta"] == "delta_se" and profile["figure_structure"] is True
    # An absolute tolerance hides every change of a small quantity: it is a floor for exact zeros, no more.
    assert profile["atol"] <= 1e-12 and profile["columns"]["delta_se"][1] <= 1e-12


# --- small quantities: relative tolerances, atol only as a floor for values that are truly zero --------------


def ptq_fit_doc(C_T: float) -> dict:
    """A kumar2024.ptq fit (δ_PTQ = C_T·D^γD/N^γN·e^(−P/γpost)): C_T is ~1e-8 at smoke scale."""
    params = {"C_T": C_T, "gamma_D": 1.67, "gamma_N": 0.0, "gamma_post": 1.77}
    return {
        "law": "kumar2024.ptq",
        "formula": LAWS["kumar2024.ptq"].formula,
        "params": params,
        "ci": {"C_T": [1e-10, 4.6e-8], "gamma_D": [1.2, 2.0], "gamma_N": [0.0, 0.63], "gamma_post": [0.68, 20.0]},
        "standard_errors": {"C_T": 1.7e-8, "gamma_D": 0.27, "gamma_N": 0.2, "gamma_post": 7.4},
        "r2": 0.976,
        "rmse": 5.9e-5,
        "heldout_relative_error": None,
        "points": {"inputs": {"N": [3376, 3376, 6984], "D": [10240, 40960, 10240], "P_post": [3, 3, 4]}},
    }


PROFILE_LIKE = Tolerances(rtol=1e-3, atol=1e-12, prediction_tol=0.15, noise_max=3.0)


def test_a_small_fitted_constant_is_compared_relatively():
    assert compare_fits(ptq_fit_doc(1.24e-8 * (1 + 5e-4)), ptq_fit_doc(1.24e-8), PROFILE_LIKE)[0]
    within, details = compare_fits(ptq_fit_doc(2e-8), ptq_fit_doc(1.24e-8), PROFILE_LIKE)
    assert not within
    assert details[0].startswith("C_T: 2e-08 vs 1.24e-08 beyond rtol=0.001 atol=1e-12 (CIs overlap)")
    assert "predictions at 6 points differ by ≤ 0.613 (relative) > prediction-tol 0.15" in details[1]
    # What an absolute tolerance sized for losses of ~5 nats did: a 61 % change of C_T went unseen.
    assert compare_fits(ptq_fit_doc(2e-8), ptq_fit_doc(1.24e-8), replace(PROFILE_LIKE, atol=1e-3))[0]


def test_atol_is_only_a_floor_for_values_that_are_truly_zero():
    base = pd.DataFrame({"delta": [0.0, 1.2e-5, 3.4e-4], "P_post": [16.0, 4.0, 3.0]})
    assert compare_tables(base.assign(delta=[1e-13, 1.2e-5, 3.4e-4]), base, PROFILE_LIKE)[0]
    within, details = compare_tables(base.assign(delta=[0.0, 1.2e-5, 6.8e-4]), base, PROFILE_LIKE)
    assert not within and details == [
        "delta: 1 of 3 rows beyond rtol=0.001 atol=1e-12; largest at row 2: 0.00068 vs 0.00034"
    ]
    assert compare_tables(base.assign(delta=[0.0, 1.2e-5, 6.8e-4]), base, replace(PROFILE_LIKE, atol=1e-3))[0]


def test_a_standard_error_column_has_a_relative_tolerance_of_its_own():
    base = pd.DataFrame({"delta": np.linspace(1e-5, 1e-3, 24), "delta_se": np.linspace(2e-6, 3e-4, 24)})
    tol = replace(PROFILE_LIKE, columns={"delta_se": (0.2, 1e-12)}, noise_columns={"delta": "delta_se"})
    assert compare_tables(base.assign(delta_se=base["delta_se"] * 1.15), base, tol)[0]
    grown = base.copy()
    grown.loc[5, "delta_se"] *= 1.3
    within, details = compare_tables(grown, base, tol)
    assert not within and details[0].startswith("delta_se: 1 of 24 rows beyond rtol=0.2 atol=1e-12; largest at row 5")
    # A noise column is still judged in units of the SE that the rows measured.
    moved = base.copy()
    moved.loc[3, "delta"] += 1.4 * np.hypot(base.loc[3, "delta_se"], base.loc[3, "delta_se"])
    assert compare_tables(moved, base, tol)[0]
    moved.loc[3, "delta"] += 2 * np.hypot(base.loc[3, "delta_se"], base.loc[3, "delta_se"])
    assert not compare_tables(moved, base, tol)[0]
