"""End to end: the real Snakemake DAG at scale=smoke from scratch, every study's figures and the claims, and the
same bytes again from plain Snakemake, outside the warm worker (a resumed slice: test_resume)."""

import pandas as pd
import pytest
from conftest import run_snakemake
from test_figure_content import as_points, assert_same_series, data_lines, draws_data, figure_record

from qscaling.diff.trees import diff_trees

pytestmark = pytest.mark.slow


def test_smoke_run_builds_the_learning_curves(smoke_run):
    table = pd.read_parquet(smoke_run / "results" / "tables" / "learning_curves.parquet")
    assert set(table["size"]) == {"N3k", "N7k"}
    [axes] = figure_record(smoke_run / "figures" / "common" / "learning_curves.png")["axes"]
    assert_same_series(data_lines(axes), [as_points(rows, "D", "loss") for _, rows in table.groupby("N")])
    assert (table.groupby("size")["loss"].agg(lambda s: s.iloc[-1] < s.iloc[0])).all()
    record = smoke_run / "results" / "provenance" / "figures" / "common" / "learning_curves.png.json"
    assert '"rule": "common_learning_curves"' in record.read_text()


def test_smoke_run_builds_every_study_figure_and_the_claims(smoke_run):
    for target in (
        "kumar2024/fig1_left",
        "kumar2024/fig2",
        "kumar2024/fig10",
        "kumar2024/fig11",
        "kumar2024/fig12",
        "kumar2024/fig19",
        *(f"ouyang2024/fig{n}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12)),
        "ouyang2024/table1",
        *(f"sun2025/fig{n}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)),
        "sun2025/table2",
        *(f"kumar2024/fig{n}" for n in (3, 4, 5, 6, 7, 13, 14, 15, 16, 17, 20, 21, "1_right")),
        "kumar2024/table1",
        *(
            f"chen2025/{name}"
            for name in ("fig1", "fig4", "fig5", "fig6", "fig7", "fig8", "fig9", "fig16", "table1", "table2")
        ),
    ):
        figure = smoke_run / "figures" / f"{target}.png"
        assert figure.read_bytes()[:4] == b"\x89PNG" and draws_data(figure_record(figure)), target
    claims = pd.read_csv(smoke_run / "results" / "claims.csv")
    assert set(claims["study"]) == {
        "ladder",
        "kumar2024",
        "ouyang2024",
        "ahmadian2023",
        "chen2025",
        "sun2025",
        "kumar2024_training",
        "law_comparison",
    }
    assert set(claims["verdict"]) <= {"reproduced", "not reproduced", "inconclusive"}
    assert (claims["scale"] == "smoke").all()
    kumar = pd.read_parquet(smoke_run / "results" / "tables" / "kumar2024.parquet")
    assert {"gptq", "awq", "rtn", "none"} == set(kumar["method"])
    assert set(kumar["anneal"]) == {"wsd", "cosine"}
    chen = pd.read_parquet(smoke_run / "results" / "tables" / "chen2025.parquet")
    assert {"W4A4", "W4A16", "W16A4", "W4A4_FC2_8bit"} == set(chen["precision"])
    assert (chen["windows"] > 0).all() and chen["delta"].notna().all()
    sun = pd.read_parquet(smoke_run / "results" / "tables" / "sun2025.parquet")
    assert {"", "P1", "P2", "P3", "P4", "P5", "P6", "P2+P4+P6"} == set(sun["inputs"])
    assert {"fit", "validation"} == set(sun["split"]) and {"4", "8", "channel", "tensor"} == set(sun["block"])
    quantized = sun[sun["format"] != "fp32"]
    assert (quantized["windows"] > 0).all() and quantized["delta"].notna().all()


def test_a_finished_run_has_nothing_left_to_do(smoke_run):
    result = run_snakemake(smoke_run, "--dry-run")
    assert result.returncode == 0
    assert "Nothing to be done" in result.stdout + result.stderr


def test_plain_snakemake_makes_the_same_bytes_as_the_warm_worker(smoke_run, tmp_path):
    """The smoke runs' jobs ran in the warm worker of `qscaling run`; a slice with every kind of job (corpus,
    tokenizer, full-precision and QAT training, WSD branches, evaluation, PTQ and QAT scoring, a study table, a
    fit, a data figure and a law figure) is made again by plain Snakemake, one interpreter per job."""
    warm = smoke_run

    def first_scored(study: str) -> str:
        return sorted((warm / "results" / "scores" / study).rglob("*.parquet"))[0].relative_to(warm).as_posix()

    targets = [
        "figures/common/learning_curves.png",
        "figures/ouyang2024/fig13.png",  # a law figure that reads no fit
        "results/fits/ladder/chinchilla.json",
        first_scored("kumar2024"),
        first_scored("chen2025"),
    ]
    plain = tmp_path / "plain"
    result = run_snakemake(plain, "--", *targets)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    made = [
        path
        for folder in ("results", "figures")
        for path in sorted((plain / folder).rglob("*"))
        if path.suffix in {".parquet", ".safetensors", ".png", ".bin"} and "provenance" not in path.parts
    ]
    assert {"chinchilla.json"} <= {p.name for p in (plain / "results" / "fits" / "ladder").iterdir()}
    assert len(made) > 30 and any(p.suffix == ".safetensors" for p in made)
    for path in made:
        relative = path.relative_to(plain)
        assert path.read_bytes() == (warm / relative).read_bytes(), relative
    fit = "results/fits/ladder/chinchilla.json"
    assert [d.status for d in diff_trees(warm, plain) if d.path == fit] == ["identical"]
