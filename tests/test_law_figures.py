"""Law-only figures: deterministic bytes, a fit overlay, the Snakemake rules, and `qscaling laws show`."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qscaling.cli import main
from qscaling.figures import chen2025, kumar2024, ouyang2024, save_figure, sun2025
from qscaling.laws import LAWS, fit
from qscaling.laws.synthetic import paper_grid, synthetic_table

FIGURES = [
    (ouyang2024, "fig1"), (ouyang2024, "table1"), (sun2025, "fig5"), (sun2025, "fig6"), (sun2025, "fig7"),
    (sun2025, "fig14"), (kumar2024, "fig3_left"), (kumar2024, "fig6_right"), (kumar2024, "fig9"),
    (chen2025, "fig1"), (chen2025, "fig16"),
]  # fmt: skip


@pytest.fixture(scope="module")
def capybara_fit():
    law = LAWS["sun2025.capybara"]
    table = synthetic_table(law, law.default_paper_params(), paper_grid(law), 0.01, seed=0)
    return fit(law, table, starts=[law.default_paper_params()], bootstrap=0)


@pytest.mark.parametrize("module, name", FIGURES, ids=[f"{m.__name__.split('.')[-1]}_{n}" for m, n in FIGURES])
def test_figure_renders_identical_bytes_twice(module, name, tmp_path):
    first = save_figure(getattr(module, name)({}, {}), tmp_path / "a.png").read_bytes()
    second = save_figure(getattr(module, name)({}, {}), tmp_path / "b.png").read_bytes()
    assert first == second and first[:4] == b"\x89PNG"


def test_fit_overlay_changes_the_figure(capybara_fit, tmp_path):
    paper_only = save_figure(sun2025.fig6({}, {}), tmp_path / "paper.png").read_bytes()
    overlay = save_figure(sun2025.fig6({}, {"capybara": capybara_fit}), tmp_path / "both.png").read_bytes()
    assert paper_only != overlay
    with pytest.raises(ValueError, match="fit for 'sun2025.capybara' passed where a fit of 'kumar2024.neff'"):
        kumar2024.fig3_left({}, {"neff": capybara_fit})


@pytest.mark.slow
def test_snakemake_builds_every_law_figure(tmp_path, repo_root):
    (tmp_path / "workflow").symlink_to(repo_root / "workflow")
    (tmp_path / "Snakefile").write_text(
        'include: "workflow/rules/law_figures.smk"\n\nrule all:\n    input:\n        LAW_FIGURES,\n'
    )
    snakemake = shutil.which("snakemake", path=str(Path(sys.executable).parent))
    result = subprocess.run(
        [snakemake, "--cores", "2", "--quiet", "all"], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    namespace = {}
    exec((repo_root / "workflow/rules/law_figures.smk").read_text().split("\n\nrule ")[0], namespace)
    for target in namespace["LAW_FIGURES"]:
        assert (tmp_path / target).stat().st_size > 0, target
    csv = (tmp_path / "figures/ouyang2024/table1.csv").read_text()
    assert "paper Table 1" in csv and "per-bit-width" in csv


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
