"""Ouyang et al. 2024 figures and claims say what they show: Table 1's sources are the ones their labels name,
Fig. 1 names only lines it draws, Fig. 3 draws the paper's slope, Fig. 5's bit axis keeps its labels, Figs. 2
and 7 show the QiD gap, Fig. 13 carries a source per value, and the weight-change claim is not decided by the
checkpoint grid's geometry."""

import dataclasses
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from conftest import REPO_ROOT

from qscaling.figures import figure_data, save_figure
from qscaling.laws import load_fit
from qscaling.laws import ouyang2024 as law
from qscaling.studies.ouyang2024 import analysis as study
from qscaling.studies.ouyang2024 import figures
from qscaling.studies.ouyang2024.settings import Ouyang2024Settings

REFERENCE = REPO_ROOT / "reference" / "default" / "results"


@pytest.fixture(scope="module")
def inputs():
    tables = {
        "evals": pd.read_parquet(REFERENCE / "tables" / "ouyang2024.parquet"),
        "one_factor": pd.read_parquet(REFERENCE / "fits" / "ouyang2024" / "one_factor.parquet"),
        "weight_changes": pd.read_parquet(REFERENCE / "tables" / "ouyang2024_weight_changes.parquet"),
    }
    paths = sorted((REFERENCE / "fits" / "ouyang2024").glob("*.json"))
    fits = {p.stem: load_fit(p) for p in paths if "error" not in json.loads(p.read_text())}
    return tables, fits


def record(fig) -> dict:
    data = figure_data(fig)
    plt.close(fig)
    return data


def tokens_T(frame, source, bits, model, delta):
    rows = frame[(frame["source"] == source) & (frame["bits"] == bits) & (frame["model"] == model)]
    return rows.loc[rows["delta"] == delta, "tokens_T"].item()


def test_table1_labels_each_source_truthfully_at_every_qid_level(inputs):
    _, fits = inputs
    frame = figures.table1_frame({}, fits)
    for bits in (2, 3, 4):
        for model, N in law.MODELS.items():
            for delta in law.TABLE1_DELTAS:
                paper = law.tokens_to_reach(law.UNIFIED_CONSTANTS, delta, N, bits) / 1e12
                ours = law.tokens_to_reach(fits["qid"].params, delta, N, bits) / 1e12
                assert tokens_T(frame, figures.TABLE1_UNIFIED, bits, model, delta) == pytest.approx(paper)
                assert tokens_T(frame, figures.TABLE1_THIS_RUN, bits, model, delta) == pytest.approx(ours)
                per_bits = tokens_T(frame, figures.TABLE1_PER_BITS, bits, model, delta)
                assert np.isnan(per_bits) if bits == 3 else per_bits > 0  # 3-bit k is not reported
    printed = frame[frame["source"] == figures.TABLE1_PRINTED]
    assert len(printed) == 8  # papers.md: the Δ = 0.2 row of the 2- and 4-bit blocks
    assert tokens_T(frame, figures.TABLE1_PRINTED, 4, "7B", 0.2) == 4.5066


def test_table1_gives_no_token_counts_from_a_fit_whose_beta_ci_reaches_zero(inputs):
    """D = (…)^(1/β): a β the data cannot tell from 0 (the smoke fit: 0.015 [0, 0.24]) puts every count at
    ~1e289 tokens, any of which a rounding moves by a factor 2; the rows say why they are empty instead."""
    _, fits = inputs
    flat = dataclasses.replace(
        fits["qid"], params={**fits["qid"].params, "beta": 0.015}, ci={**fits["qid"].ci, "beta": (0.0, 0.24)}
    )
    frame = figures.table1_frame({}, {"qid": flat})
    ours = frame[frame["source"] == figures.TABLE1_THIS_RUN]
    assert len(ours) == len(frame[frame["source"] == figures.TABLE1_UNIFIED]) and ours["tokens_T"].isna().all()
    assert (ours["note"] == "β's CI reaches 0: no token count is bounded").all()
    footer = " ".join(record(figures.table1({}, {"qid": flat}))["texts"])
    assert "This run's fit: β = 0.015 [0, 0.24]; β's CI reaches 0: no token count is bounded." in footer
    assert figures.table1_frame({}, fits).query("source == @figures.TABLE1_THIS_RUN")["tokens_T"].gt(0).all()


def test_table1_footer_gives_each_sources_gap_to_the_printed_values(inputs):
    _, fits = inputs
    gaps = figures.table1_agreement(figures.table1_frame({}, fits))
    assert gaps[(figures.TABLE1_UNIFIED, 4)] == pytest.approx(1 - 21.83313 / 48.4861, rel=1e-4)  # 405B
    assert gaps[(figures.TABLE1_UNIFIED, 2)] < 0.06
    footer = " ".join(record(figures.table1({}, fits))["texts"])
    assert "reproduces the 2-bit column" not in footer
    assert "paper unified law 4-bit 55.0%" in footer


def test_fig1_draws_no_dashed_fit_off_the_axes_and_says_why(inputs):
    """The previous ladder's fit (β 1.834, α 0) predicts QiD far above the axes: left out, and the footer says so."""
    _, fits = inputs
    off_axes = dataclasses.replace(fits["qid"], params={"k": 2.353e-12, "alpha": 0.0, "beta": 1.834, "gamma": 4.301})
    data = record(figures.fig1({}, {"qid": off_axes}))
    drawn = [line for axes in data["axes"] for line in axes["lines"] if line["x"]]
    assert len(drawn) == 9  # the paper's three bit widths in three panels, no fit
    footer = " ".join(data["texts"])
    assert "is not drawn" in footer and "QiD ≥ " in footer and "β = 1.834" in footer


def test_fig1_draws_the_reference_fit_where_it_falls_on_the_axes(inputs):
    _, fits = inputs
    data = record(figures.fig1({}, {"qid": fits["qid"]}))
    assert len([line for axes in data["axes"] for line in axes["lines"] if line["x"]]) > 9
    assert "is not drawn" not in " ".join(data["texts"])


def test_fig1_draws_a_fit_that_falls_on_the_axes(inputs):
    _, fits = inputs
    on_axes = dataclasses.replace(fits["qid"], params=dict(law.UNIFIED_CONSTANTS))
    data = record(figures.fig1({}, {"qid": on_axes}))
    assert len([line for axes in data["axes"] for line in axes["lines"] if line["x"]]) == 18
    assert "dashed: this run's fit" in " ".join(data["texts"])


def test_fig3_draws_the_papers_token_exponent_in_every_panel(inputs):
    tables, fits = inputs
    for axes in record(figures.fig3(tables, fits))["axes"]:
        (guide,) = [line for line in axes["lines"] if line["label"] == figures.GUIDE_LABEL]
        slope = np.polyfit(np.log(guide["x"]), np.log(guide["y"]), 1)[0]
        assert slope == pytest.approx(law.TOKENS_EXPONENT, rel=1e-9)


def test_fig5_labels_every_bit_width_on_its_log_axis(inputs, tmp_path):
    tables, fits = inputs
    fig = figures.fig5(tables, fits)
    save_figure(fig, tmp_path / "fig5.png")  # saving tidies log axes and draws the tick labels
    for ax in fig.axes:
        low, high = ax.get_xlim()
        labels = [t.get_text() for t in ax.get_xticklabels() if low <= t.get_position()[0] <= high and t.get_text()]
        assert labels == ["2", "3", "4"]


def test_fig7_right_panel_draws_predicted_against_measured_qid(inputs):
    tables, fits = inputs
    rows = tables["evals"]
    rows = rows[(rows["method"] == "gptq") & (rows["split"] == "val") & (rows["delta"] > 0)]
    predicted = fits["qid"].predict(rows.assign(P=rows["bits"]))
    gap_panel = record(figures.fig7(tables, fits))["axes"][1]
    offsets = [c["offsets"] for c in gap_panel["collections"] if c["kind"] == "PathCollection" and c["offsets"]]
    drawn = sorted(zip(offsets[0][0::2], offsets[0][1::2]))
    np.testing.assert_allclose(drawn, sorted(zip(predicted, rows["delta"])), rtol=1e-12)
    assert (gap_panel["xscale"], gap_panel["yscale"]) == ("log", "log")


def test_fig13_draws_one_bar_per_model_each_with_its_source():
    models = figures.fig13_frame({}, {})
    assert {"model", "year", "tokens_T", "verified", "source"} <= set(models.columns)
    assert models["source"].str.len().gt(10).all() and models["tokens_T"].gt(0).all()
    assert models["model"].is_unique
    bars = record(figures.fig13({}, {}))["axes"][0]["bars"]
    assert sorted(height for *_, height in bars) == sorted(models["tokens_T"])
    assert models.loc[models["model"] == "Llama-2 7B", "tokens_T"].item() == 2.0


def test_fig13_caption_exists():
    caption = (REPO_ROOT / "workflow" / "report" / "ouyang2024_fig13.rst").read_text()
    assert len(caption.split()) >= 10


def changes_frame(lengths, rate_of, *, matrices=3, warmup=0.0, start=1000):
    """Weight changes over consecutive intervals of the given lengths; `rate_of(D_from, length)` is the change
    per token."""
    rows, D = [], start
    for length in lengths:
        for index in range(matrices):
            rate = rate_of(D, length) * (1 + 0.01 * index)
            rows.append(
                {"run": "r", "size": "N1", "D_from": D, "D_to": D + length, "matrix": f"m{index}",
                 "relative_change": rate * length, "warmup_tokens": warmup}
            )  # fmt: skip
        D += length
    return pd.DataFrame(rows)


def test_weight_change_claim_is_inconclusive_on_a_geometric_grid_with_its_numbers():
    # A random walk: change ∝ √length, so per-token change falls along geometric intervals with no slowing at all.
    random_walk = changes_frame([1000 * 1.8**i for i in range(5)], lambda D, length: length**-0.5)
    row = study.weight_change_claim(random_walk)
    assert row["verdict"] == "inconclusive"
    assert "lengths 1,000, 1,800, 3,240" in row["statistic"] and "ratios 1.80" in row["statistic"]


def test_weight_change_claim_reads_equal_length_intervals_after_warmup():
    slowing = changes_frame([1000] * 6, lambda D, length: 1 / D)
    assert study.weight_change_claim(slowing)["verdict"] == "reproduced"
    steady = changes_frame([1000] * 6, lambda D, length: D)
    assert study.weight_change_claim(steady)["verdict"] == "not reproduced"
    within_warmup = changes_frame([1000] * 6, lambda D, length: 1 / D, warmup=1e9)
    assert study.weight_change_claim(within_warmup)["verdict"] == "inconclusive"


def test_weight_change_claim_resamples_matrices_not_rows():
    slowing = changes_frame([1000] * 6, lambda D, length: 1 / D, matrices=4)
    assert "over 4 matrices, 5 equal-length interval pairs" in study.weight_change_claim(slowing)["statistic"]


def test_reference_weight_changes_grid_has_no_equal_intervals(inputs):
    tables, _ = inputs
    row = study.weight_change_claim(tables["weight_changes"])
    # After warmup (recorded with the weight changes) the default grid's intervals double each time.
    assert row["verdict"] == "inconclusive" and "lengths 249,856, 499,712, 999,424" in row["statistic"]
    assert "successive ratios 2.00, 2.00, 2.00, 2.00" in row["statistic"]


def test_claims_carry_the_papers_values(inputs):
    tables, fits = inputs
    settings = Ouyang2024Settings.model_construct()
    rows = study.claims({"table": tables["evals"], "weight_changes": tables["weight_changes"]}, fits, settings)
    papers = {row["claim"]: row["paper"] for row in rows}
    assert papers["Unified QiD law: beta > 0 (paper 0.5251)"] == "0.5251"
    assert papers["QiD grows with training tokens at fixed size and bits (Fig. 3)"] == "0.5316"
