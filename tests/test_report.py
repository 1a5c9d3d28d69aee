"""`snakemake --report` on the shared smoke run: the HTML builds and lists every figure, the claims table and the
fitted-law table; every report item has a caption file."""

import re
import subprocess
import sys

import pytest
from conftest import REPO_ROOT

pytestmark = pytest.mark.slow


def report_items(repo_root) -> list[tuple[str, str]]:
    """(output path, caption path) of every report() item declared in the rules."""
    items = []
    for rules_file in sorted((repo_root / "workflow" / "rules").glob("*.smk")):
        text = rules_file.read_text()
        items += re.findall(r'report\(\s*"([^"]+)",\s*caption="\.\./report/([^"]+)"', text)
    return items


def test_every_report_item_has_a_caption_file(repo_root):
    items = report_items(repo_root)
    assert items
    for output, caption in items:
        caption_file = repo_root / "workflow" / "report" / caption
        assert caption_file.is_file(), f"{output}: caption {caption} missing"
        assert len(caption_file.read_text().split()) >= 10, f"{caption} says too little"


def test_the_report_builds_and_lists_every_figure(smoke_runs, tmp_path):
    workdir = smoke_runs[0]
    html = tmp_path / "report.html"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO_ROOT / "Snakefile"),
            "--directory",
            str(workdir),
            "--config",
            "scale=smoke",
            "--report",
            str(html),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    text = html.read_text()
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
