"""`snakemake --report` on the shared smoke run: the HTML builds and lists every figure, the claims table and the
fitted-law table; every report item has a caption file."""

import json
from pathlib import Path

import pytest
from conftest import REPO_ROOT, run_snakemake

from qscaling.figures import declared_figures
from qscaling.pipeline import study_figure_modules
from qscaling.report import fits_table

# report() items made outside the figure loop (workflow/rules/studies.smk, report.smk)
TABLE_ITEMS = [("results/claims.csv", "claims.rst"), ("results/report/fits.csv", "fits.rst")]


def report_items(repo_root) -> list[tuple[str, Path]]:
    """(output path, caption file) of every report() item: each declared figure's outputs and the two tables."""
    items = [(output, repo_root / "workflow" / "report" / caption) for output, caption in TABLE_ITEMS]
    for module in study_figure_modules():
        for spec in declared_figures(module):
            caption = Path(spec.caption) if spec.caption else repo_root / "workflow" / "report" / f"{spec.target}.rst"
            items += [(output, caption) for output in spec.outputs.values()]
    return items


def test_every_report_item_has_a_caption_file(repo_root):
    items = report_items(repo_root)
    assert len(items) > 40
    for output, caption in items:
        assert caption.is_file(), f"{output}: caption {caption.name} missing"
        assert len(caption.read_text().split()) >= 10, f"{caption.name} says too little"


def test_fits_table_lists_parameters_and_failed_fits(tmp_path):
    good = tmp_path / "kumar2024" / "ptq.json"
    good.parent.mkdir()
    fit = {
        "law": "baseline.chinchilla",
        "formula": "A/N^alpha + E",
        "params": {"A": 400.0, "alpha": 0.3},
        "ci": {"A": [390.0, 410.0], "alpha": [0.28, 0.32]},
        "r2": 0.98,
        "rmse": 0.01,
        "heldout_relative_error": None,
        "n_points": 12,
        "notes": [],
    }
    good.write_text(json.dumps(fit))
    failed = tmp_path / "kumar2024" / "neff.json"
    failed.write_text(json.dumps({"error": "need at least 5 points, got 3"}))
    table = fits_table([good, failed])
    assert table[["fit", "parameter", "value", "ci_low", "ci_high"]].iloc[:2].values.tolist() == [
        ["kumar2024/ptq", "A", 400.0, 390.0, 410.0],
        ["kumar2024/ptq", "alpha", 0.3, 0.28, 0.32],
    ]
    assert table["fit"].iloc[2] == "kumar2024/neff" and table.iloc[2][["parameter", "value"]].isna().all()
    assert table["note"].iloc[2] == "need at least 5 points, got 3"


@pytest.mark.slow
def test_the_report_builds_and_lists_every_figure(smoke_run, tmp_path):
    workdir = smoke_run
    html = tmp_path / "report.html"
    result = run_snakemake(workdir, "--report", str(html), timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    # docutils reports a caption it cannot parse (e.g. |x| read as a substitution) and the report still builds.
    problems = [line for line in result.stderr.splitlines() if "(ERROR/" in line or "(SEVERE/" in line]
    assert not problems, problems
    text = html.read_text()
    assert "System Message" not in text
    assert text.lstrip().lower().startswith("<!doctype html")
    figures = sorted(p.relative_to(workdir).as_posix() for p in (workdir / "figures").rglob("*.png"))
    assert figures
    missing = [figure for figure in figures if figure not in text]
    assert not missing, f"figures absent from the report: {missing}"
    for table in ("results/claims.csv", "results/report/fits.csv"):
        assert (workdir / table).is_file(), f"{table} is not built by the default target"
        assert table in text, f"{table} absent from the report"
    built_items = [output for output, _ in report_items(REPO_ROOT) if "{" not in output and (workdir / output).exists()]
    assert [item for item in built_items if item not in text] == []
