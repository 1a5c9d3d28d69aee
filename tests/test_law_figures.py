"""Law-only figures: deterministic bytes, a fit overlay, the Snakemake rules, and `qscaling laws show`."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qscaling.cli import main
from qscaling.figures import (
    declared_figures,
    figure_inputs,
    resolve_function,
    save_figure,
)
from qscaling.figures.caveats import BOUND_FLAG
from qscaling.laws import LAWS, fit
from qscaling.laws.synthetic import paper_grid, synthetic_table
from qscaling.pipeline import study_figure_modules
from qscaling.studies.kumar2024 import figures as kumar_figures
from qscaling.studies.ouyang2024 import figures as ouyang_figures
from qscaling.studies.sun2025 import law_figures as sun_law_figures

LAW_FIGURES = [spec for module in study_figure_modules() for spec in declared_figures(module) if spec.law_only]


@pytest.fixture(scope="module")
def capybara_fit():
    law = LAWS["sun2025.capybara"]
    table = synthetic_table(law, law.default_paper_params(), paper_grid(law), 0.01, seed=0)
    return fit(law, table, starts=[law.default_paper_params()], bootstrap=0)


def test_the_law_only_figures_are_declared():
    assert {spec.target for spec in LAW_FIGURES} == {
        "ouyang2024_fig1", "ouyang2024_table1", "ouyang2024_fig13", "sun2025_fig5", "sun2025_fig6", "sun2025_fig7", "sun2025_fig14",
        "kumar2024_fig3_left", "kumar2024_fig6_right", "kumar2024_fig9", "chen2025_fig1", "chen2025_fig16",
    }  # fmt: skip


@pytest.mark.parametrize("spec", LAW_FIGURES, ids=[spec.target for spec in LAW_FIGURES])
def test_figure_renders_identical_bytes_twice(spec, tmp_path):
    function = resolve_function(spec.function)
    first = save_figure(function({}, {}), tmp_path / "a.png").read_bytes()
    second = save_figure(function({}, {}), tmp_path / "b.png").read_bytes()
    assert first == second and first[:4] == b"\x89PNG"


def test_a_law_only_figure_reads_this_runs_fit_only_where_the_study_runs():
    fig1 = next(spec for spec in LAW_FIGURES if spec.target == "ouyang2024_fig1")
    fits = {"ouyang2024": {"qid": "results/fits/ouyang2024/qid.json", "kaplan": "results/fits/ouyang2024/kaplan.json"}}
    assert figure_inputs(fig1, {}, fits) == {"qid": "results/fits/ouyang2024/qid.json"}
    assert figure_inputs(fig1, {}, {}) == {}  # the paper's constants alone
    fig2 = next(spec for spec in declared_figures(ouyang_figures) if spec.target == "ouyang2024_fig2")
    assert figure_inputs(fig2, {}, fits) is None  # a data-driven figure needs its study's tables


def test_fit_overlay_changes_the_figure(capybara_fit, tmp_path):
    paper_only = save_figure(sun_law_figures.fig6({}, {}), tmp_path / "paper.png").read_bytes()
    overlay = save_figure(sun_law_figures.fig6({}, {"capybara": capybara_fit}), tmp_path / "both.png").read_bytes()
    assert paper_only != overlay
    with pytest.raises(ValueError, match="fit for 'sun2025.capybara' passed where a fit of 'kumar2024.neff'"):
        kumar_figures.fig3_left({}, {"neff_joint": capybara_fit})


@pytest.mark.slow
def test_snakemake_builds_every_law_figure_that_needs_no_run(tmp_path, repo_root):
    targets = [path for spec in LAW_FIGURES if spec.fits is None for path in spec.outputs.values()]
    snakemake = shutil.which("snakemake", path=str(Path(sys.executable).parent))
    result = subprocess.run(
        [snakemake, "-s", str(repo_root / "Snakefile"), "--directory", str(tmp_path), "--cores", "2", "--quiet",
         "--config", "scale=smoke", "--", *targets],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    for target in targets:
        written = (tmp_path / target).read_bytes()
        assert written[:4] == b"\x89PNG" if target.endswith(".png") else written.count(b"\n") > 1, target
    assert not (tmp_path / "results" / "runs").exists()  # drawn from the papers' constants: nothing trained
    table = ouyang_figures.table1_frame({}, {}).to_csv()
    assert "paper Table 1" in table and "per-bit-width" in table


def test_laws_show_prints_params_and_derived_quantities(capsys, capybara_fit, tmp_path):
    assert main(["laws", "show", "kumar2024.neff"]) == 0
    assert "P* joint compute-optimal (bits): 7.00211" in capsys.readouterr().out
    path = capybara_fit.to_json(tmp_path / "capybara.json")
    assert main(["laws", "show", "sun2025.capybara", "--params", str(path)]) == 0
    out = capsys.readouterr().out
    assert "optimal layout FP8: E4M3" in out and f"fit {path}" in out
    assert main(["laws", "show", "chen2025.qat", "--variant", "W5A5"]) == 2
    assert "--variant 'W5A5' unknown for chen2025.qat; valid: W4A4" in capsys.readouterr().err
    assert main(["laws", "show", "kumar2024.neff", "--params", str(path)]) == 2


@pytest.fixture(scope="module")
def neff_fit():
    """A kumar2024.neff fit whose γ_x, n_x are not Table 2's, n_kv on its upper bound."""
    law = LAWS["kumar2024.neff"]
    truth = {**law.default_paper_params(), "gamma_w": 1.5, "n_w": 1.0, "gamma_a": 3.0, "n_a": 0.5, "n_kv": 5.0}
    table = synthetic_table(law, truth, paper_grid(law), 0.0, seed=0)
    return fit(law, table, starts=[truth], bootstrap=0)


def test_kumar_law_figures_overlay_table_2_with_this_runs_sensitivities(neff_fit):
    from qscaling.figures import figure_data
    from qscaling.laws import kumar2024 as law

    paper = LAWS["kumar2024.neff"].default_paper_params()
    ours = {**paper, **{name: neff_fit.params[name] for name in kumar_figures._SENSITIVITIES}}
    record = figure_data(kumar_figures.fig3_left({}, {"neff_joint": neff_fit}))
    [axes] = record["axes"]
    # Four curves from Table 2 (w, a, kv, tied), then the same four with this run's γ_x, n_x.
    lines = axes["lines"]
    assert len(lines) == 8
    assert lines[4]["y"] == pytest.approx(law.precision_fraction(ours, np.array(lines[4]["x"]), "w"))
    assert lines[0]["y"] == pytest.approx(law.precision_fraction(paper, np.array(lines[0]["x"]), "w"))
    assert "this run's γ_x, n_x (neff_joint: gamma_w 1.5" in record["texts"][0]
    assert any(text.startswith(BOUND_FLAG) and "n_kv = 5" in text for text in record["texts"])
    # P*(D) per size: Table 2's three curves, then this run's; with n_kv = 5 no optimum lies below 4.8 bits, and
    # where the solver finds none the curve has a gap.
    record = figure_data(kumar_figures.fig6_right({}, {"neff_joint": neff_fit}))
    curves = [line for line in record["axes"][0]["lines"] if len(line["x"]) == 60]
    assert len(curves) == 6
    for line, N in zip(curves[3:], (1e9, 8e9, 70e9)):
        expected = [law.optimum_or_nan(law.fixed_size_optimal_precision, ours, N, D) for D in line["x"]]
        assert [np.nan if value is None else value for value in line["y"]] == pytest.approx(expected, nan_ok=True)
        assert all(value is None or value > ours["gamma_kv"] * ours["n_kv"] for value in line["y"])
    record = figure_data(kumar_figures.fig9({}, {"neff_joint": neff_fit}))
    assert len(record["axes"][0]["lines"]) == 6  # P* against cost at three serving loads, Table 2's and ours
