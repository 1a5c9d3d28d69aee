"""The README is a front page whose numbers come from the run: its results block and docs/results.md are what
`make docs` writes from reference/default, its plan numbers are what `qscaling plan` prints, and every relative
link and anchor in README.md and docs/ resolves."""

import re
import subprocess
import sys

import pandas as pd
import pytest
from conftest import REPO_ROOT

from qscaling.laws import LAWS
from qscaling.report import LAWS_END, LAWS_START, RESULTS_END, RESULTS_START, results_page, with_laws, with_results

README = REPO_ROOT / "README.md"
PAGES = [README, *sorted((REPO_ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


@pytest.fixture(scope="module")
def claims():
    return pd.read_csv(REPO_ROOT / "reference" / "default" / "results" / "claims.csv")


def test_the_results_block_and_page_are_generated_from_the_reference(claims):
    text = README.read_text()
    assert RESULTS_START in text and RESULTS_END in text
    assert with_results(text, claims) == text, "README's results block is stale: run `make docs`"
    assert (REPO_ROOT / "docs" / "results.md").read_text() == results_page(claims), "run `make docs`"


def test_the_law_comparison_sentences_are_generated_from_the_reference():
    comparison = pd.read_csv(REPO_ROOT / "reference" / "default" / "results" / "tables" / "law_comparison.csv")
    text = README.read_text()
    assert LAWS_START in text and LAWS_END in text
    assert with_laws(text, comparison) == text, "README's law comparison is stale: run `make docs`"
    best = comparison[comparison["scheme"] == "leave one size out"].sort_values("relative_error").iloc[0]
    assert f"`{best['law']}` predicts held-out" in text
    worse = comparison.assign(relative_error=comparison["relative_error"] * 2)
    assert with_laws(text, worse) != text


def test_a_changed_verdict_makes_the_committed_text_stale(claims):
    changed = claims.copy()
    changed.loc[changed["verdict"] == "inconclusive", "verdict"] = "reproduced"
    assert with_results(README.read_text(), changed) != README.read_text()


def anchors(path) -> set[str]:
    text = path.read_text()
    headings = {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", text, re.M)
    }
    return headings | set(re.findall(r'<a id="([^"]+)"></a>', text))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(page):
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: link {target} points at nothing"
        if anchor:
            assert anchor in anchors(resolved), f"{page.name}: no anchor #{anchor} in {resolved.name}"


def test_the_readme_is_a_front_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250
    assert lines[3].startswith("make figures") and lines[4].startswith("make test")
    assert f"any of\nthe {len(LAWS)} laws" in README.read_text() or f"the {len(LAWS)} laws" in README.read_text()


def plan(*args) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "qscaling.cli", "plan", *args], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_the_readmes_plan_numbers_are_what_qscaling_plan_prints():
    text = " ".join(README.read_text().split())
    default, paper, figure = plan(), plan("--scale", "paper"), plan("kumar2024_fig2")
    runs = default.split(" runs")[0].split(": ")[1]
    assert f"{runs} training runs" in text
    trained = default.splitlines()[-3].split()[-1]  # the "all" row: tokens they train, e.g. 145.9M
    assert f"({trained} tokens)" in text
    assert f"{paper.split(' runs')[0].split(': ')[1]} runs" in text
    paper_tokens = float(paper.splitlines()[-3].split()[-1].removesuffix("M")) * 1e6
    assert f"{paper_tokens / 1e12:.3g}T tokens" in text
    assert f"≈ {paper.rsplit('≈ ', 1)[1].split(' GPU-hours')[0]} GPU-hours" in text
    figure_runs, rest = figure.split(": ", 1)[1].split(" runs to train (")
    assert f"{figure_runs} runs to train ({rest.split(' tokens')[0]} tokens)" in text
    assert f"{figure.split('), ')[1].split(' checkpoints')[0]} checkpoints to score" in text
