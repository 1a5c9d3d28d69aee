"""Figures draw their tables: the study figures, called on the committed reference/smoke tables and fits, have
the axes, series and points those tables imply, and plot the tables' numbers.

What a figure draws is read from `figure_data` (the record `save_figure` writes beside every PNG): per axes its
lines, marker collections and bars. A figure that renders but drops a size, a bit width or a point fails here.
"""

import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import test_figure_caveats as caveat_tests
from conftest import REPO_ROOT
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba

from qscaling.figures import common, data_path, declared_figures, figure_data, resolve_function
from qscaling.figures.caveats import (
    BOUND_FLAG,
    EXTRAPOLATED,
    EXTRAPOLATED_GID,
    SEED_BAND_GID,
    SEED_BAND_LABEL,
    parameter_symbol,
)
from qscaling.laws import load_fit
from qscaling.pipeline import study_figure_modules
from qscaling.studies.ahmadian2023 import figures as ahmadian_figures
from qscaling.studies.chen2025.analysis import main_grid as chen_main_grid
from qscaling.studies.kumar2024 import figures as kumar_figures
from qscaling.studies.ouyang2024 import figures as ouyang_figures

REFERENCE = REPO_ROOT / "reference" / "smoke"


def reference_table(path: str) -> pd.DataFrame:
    return pd.read_parquet(REFERENCE / "results" / path)


def reference_fits(study: str) -> dict:
    """The study's fitted laws by name, as load_figure_inputs passes them: fits that could not run left out."""
    paths = sorted((REFERENCE / "results" / "fits" / study).glob("*.json"))
    return {path.stem: load_fit(path) for path in paths if "error" not in json.loads(path.read_text())}


def drawn(fig) -> list[dict]:
    """The per-axes record of what `fig` draws (what save_figure writes as <figure>.data.json)."""
    record = figure_data(fig)
    plt.close(fig)
    return record["axes"]


def data_lines(axes: dict) -> list[tuple]:
    """The axes' lines that hold points, as ((x, y), …); seaborn's legend entries are empty lines."""
    return [tuple(zip(line["x"], line["y"])) for line in axes["lines"] if line["x"]]


def markers(axes: dict) -> list[tuple]:
    """Every scatter marker of the axes as (x, y) (offsets are recorded flattened)."""
    points = []
    for collection in axes["collections"]:
        if collection["kind"] == "PathCollection":
            offsets = collection["offsets"]
            points += list(zip(offsets[0::2], offsets[1::2]))
    return points


def bar_heights(axes: dict) -> list[float]:
    return [height for _, _, _, height in axes["bars"]]


def draws_data(record: dict) -> bool:
    """Some axes of a figure's record holds a line with points, a non-empty collection (markers, filled areas,
    contours), a bar or a table cell."""
    return any(
        data_lines(axes)
        or any(collection.get(key) for collection in axes["collections"] for key in ("offsets", "segments", "paths"))
        or axes["bars"]
        or any(axes["tables"])
        for axes in record["axes"]
    )


def figure_record(figure_path) -> dict:
    """The record saved beside a figure file."""
    return json.loads(data_path(figure_path).read_text())


def as_points(frame: pd.DataFrame, x: str, y: str) -> list[tuple]:
    return sorted(zip(frame[x].astype(float), frame[y].astype(float)))


def assert_same_series(drawn_series, expected_series):
    """The same series (each a sequence of (x, y) points, in any order) up to float rounding: seaborn passes
    values through a log-scale round trip or a mean over one value, which may move the last bit."""
    drawn_series = sorted(sorted(series) for series in drawn_series)
    expected_series = sorted(sorted(series) for series in expected_series)
    assert [len(series) for series in drawn_series] == [len(series) for series in expected_series]
    for got, want in zip(drawn_series, expected_series):
        np.testing.assert_allclose(np.array(got, dtype=float), np.array(want, dtype=float), rtol=1e-12)


def test_learning_curves_draw_one_line_per_size_through_its_losses():
    curves = reference_table("tables/learning_curves.parquet")
    [axes] = drawn(common.learning_curves({"curves": curves}, {}))
    expected = [as_points(rows, "D", "loss") for _, rows in curves.groupby("N")]
    assert_same_series(data_lines(axes), expected)
    assert len(expected) == curves["size"].nunique() == 2
    assert [label.split(" ")[0] for label in axes["legend"]] == sorted(curves["size"].unique())


@pytest.fixture(scope="module")
def kumar_inputs():
    return {"ptq": reference_table("tables/kumar2024.parquet")}, reference_fits("kumar2024")


@pytest.mark.parametrize("figure, method", [("fig2", "gptq"), ("fig10", "awq"), ("fig11", "rtn")])
def test_kumar_ptq_grids_draw_every_size_bit_width_and_point(kumar_inputs, figure, method):
    tables, fits = kumar_inputs
    table = tables["ptq"]
    rows = table[(table["split"] == "val") & table["main"] & table["method"].isin([method, "none"])]
    sizes = sorted(rows["N"].unique())
    axes = drawn(getattr(kumar_figures, figure)(tables, fits))
    assert len(axes) == 2 * len(sizes)  # top row: δ_PTQ (linear) per size; bottom row: δ_PTQ > 0 (log) per size
    for column, n in enumerate(sizes):
        top, bottom = axes[column], axes[len(sizes) + column]
        size_rows = rows[(rows["N"] == n) & (rows["bits"] < 16)]
        # One line per bit width through every checkpoint's δ.
        expected = [as_points(bits_rows, "tokens_per_param", "delta") for _, bits_rows in size_rows.groupby("bits")]
        series = [zip(line["x"], line["y"]) for line in top["lines"] if line["label"].startswith("INT")]
        assert_same_series([tuple(points) for points in series], expected)
        quantized = size_rows[size_rows["delta"] > 0]
        assert_same_series([markers(bottom)], [as_points(quantized, "tokens_per_param", "delta")])
        # The fitted δ_PTQ law: one curve per bit width that has a point; and the paper's exponent as a guide.
        fitted = [line for line in bottom["lines"] if line["label"].startswith("this run's fit")]
        guides = [line for line in bottom["lines"] if line["label"].startswith("paper D^")]
        assert len(fitted) == (quantized["bits"].nunique() if f"ptq_{method}" in fits else 0)
        assert len(guides) == 1 and len(data_lines(bottom)) == len(fitted) + 1


def test_kumar_fig2_is_drawn_from_the_gptq_rows_only(kumar_inputs):
    tables, fits = kumar_inputs
    table = tables["ptq"]
    other_methods = table["method"].isin(["awq", "rtn"])
    moved = table.assign(loss=table["loss"].where(~other_methods, table["loss"] + 1.0))
    assert drawn(kumar_figures.fig2({"ptq": moved}, fits)) == drawn(kumar_figures.fig2(tables, fits))


def test_kumar_fig1_left_draws_the_smallest_model_per_bit_width(kumar_inputs):
    tables, fits = kumar_inputs
    table = tables["ptq"]
    rows = table[(table["split"] == "val") & table["main"] & table["method"].isin(["gptq", "none"])]
    rows = rows[rows["N"] == rows["N"].min()]
    [axes] = drawn(kumar_figures.fig1_left(tables, fits))
    lines = data_lines(axes)
    # Each bit width's loss curve, plus a one-point ★ per quantized width whose best budget is not its largest.
    curves = [line for line in lines if len(line) > 1]
    assert_same_series(
        curves, [as_points(bits_rows, "tokens_per_param", "loss") for _, bits_rows in rows.groupby("bits")]
    )
    best = [group.loc[group["loss"].idxmin()] for _, group in rows[rows["bits"] < 16].groupby("bits")]
    stars = [line[0] for line in lines if len(line) == 1]
    assert_same_series([stars], [[(b["tokens_per_param"], b["loss"]) for b in best if b["D"] < rows["D"].max()]])


GUIDE = ouyang_figures.GUIDE_LABEL  # Fig. 3's slope guide: the paper's exponent, not a fit


@pytest.fixture(scope="module")
def ouyang_inputs():
    tables = {
        "evals": reference_table("tables/ouyang2024.parquet"),
        "one_factor": reference_table("fits/ouyang2024/one_factor.parquet"),
        "weight_changes": reference_table("tables/ouyang2024_weight_changes.parquet"),
    }
    return tables, reference_fits("ouyang2024")


def test_ouyang_fig2_draws_each_size_and_bit_widths_qid_gap_above_its_losses(ouyang_inputs):
    """The losses get a panel of their own under each size's gaps: an inset over the gaps hid some of their
    points."""
    tables, fits = ouyang_inputs
    table = tables["evals"]
    rows = table[(table["split"] == "val") & table["method"].isin(["gptq", "none"])]
    gaps = rows[(rows["method"] == "gptq") & (rows["delta"] > 0)]
    sizes = sorted(rows["N"].unique())
    axes = drawn(ouyang_figures.fig2(tables, fits))
    panels, losses = axes[: len(sizes)], axes[len(sizes) :]
    assert len(losses) == len(sizes)
    for panel, loss, n in zip(panels, losses, sizes):
        assert panel["yscale"] == "log"
        size_gaps = gaps[gaps["N"] == n]
        assert_same_series(data_lines(panel), [as_points(g, "D", "delta") for _, g in size_gaps.groupby("bits")])
        size_rows = rows[rows["N"] == n]
        assert_same_series(data_lines(loss), [as_points(g, "D", "loss") for _, g in size_rows.groupby("bits")])


@pytest.mark.parametrize(
    "figure, factor, panel_by, law", [("fig3", "D", "N", "qid_tokens"), ("fig4", "N", "bits", "qid_size")]
)
def test_ouyang_one_factor_figures_draw_every_gptq_qid_and_fit(ouyang_inputs, figure, factor, panel_by, law):
    tables, fits = ouyang_inputs
    table, fitted = tables["evals"], tables["one_factor"]
    rows = table[(table["method"] == "gptq") & (table["split"] == "val") & (table["delta"] > 0)]
    panels = sorted(rows[panel_by].unique())
    axes = drawn(getattr(ouyang_figures, figure)(tables, fits))
    assert len(axes) == len(panels)
    for panel, value in zip(axes, panels):
        subset = rows[rows[panel_by] == value]
        assert_same_series([markers(panel)], [as_points(subset, factor, "delta")])
        # The one-factor fits of this law have a column per grouping factor; a law with no fits has none.
        fits_here = fitted[fitted["law"] == law]
        fits_here = fits_here[fits_here[panel_by] == value] if len(fits_here) else fits_here
        fit_lines = [line for line in panel["lines"] if line["x"] and line["label"] != GUIDE]
        assert len(fit_lines) == len(fits_here)


def test_ouyang_fig3_draws_a_fit_line_per_one_factor_fit(ouyang_inputs):
    """The smoke reference fits no QiD-vs-tokens law (too few points per group): give every (N, bits) group one;
    each is drawn, as the law's values over the panel's tokens."""
    tables, fits = ouyang_inputs
    rows = tables["evals"]
    rows = rows[(rows["method"] == "gptq") & (rows["split"] == "val") & (rows["delta"] > 0)]
    groups = rows[["N", "bits"]].drop_duplicates().sort_values(["N", "bits"])
    one_factor = groups.assign(law="qid_tokens", b=1e-6, beta=0.5)  # δ = b·D^β (ouyang2024.qid_tokens)
    axes = drawn(ouyang_figures.fig3({**tables, "one_factor": one_factor}, fits))
    assert len(axes) == groups["N"].nunique()
    for panel, (_, group) in zip(axes, groups.groupby("N")):
        lines = [tuple(zip(ln["x"], ln["y"])) for ln in panel["lines"] if ln["x"] and ln["label"] != GUIDE]
        assert len(lines) == len(group)
        for line in lines:
            D, delta = np.array(line).T
            np.testing.assert_allclose(delta, 1e-6 * D**0.5, rtol=1e-12)


def test_ahmadian_fig2_draws_one_bar_per_ablation_level(tmp_path):
    tables = {
        "evals": reference_table("tables/ahmadian2023.parquet"),
        "proxies": reference_table("tables/ahmadian2023_proxies.parquet"),
        "values": reference_table("tables/ahmadian2023_values.parquet"),
    }
    table = tables["evals"]
    rows = table[table["final"] & (table["method"] == "w8a8")]
    factors = [f for f in ("weight_decay", "dropout", "grad_clip") if f in set(rows["factor"])]
    assert factors, "the smoke reference ablates no training choice: this test would show nothing"
    axes = drawn(ahmadian_figures.fig2(tables, {}))
    assert len(axes) == 2 * len(factors)  # top: % accuracy change; bottom: loss δ
    for column, factor in enumerate(factors):
        subset = rows[rows["factor"] == factor]
        top, bottom = axes[column], axes[len(factors) + column]
        assert bar_heights(top) == pytest.approx(subset["pct_change"].tolist())
        assert bar_heights(bottom) == pytest.approx(subset["delta"].tolist())
        assert len(markers(top)) == len(subset)  # the paper's value for each level, where it has one
        assert top["title"] and np.isfinite(bar_heights(bottom)).all()


def test_every_committed_reference_figure_draws_data():
    records = sorted((REFERENCE / "figures").rglob("*.data.json"))
    assert len(records) > 30
    empty = [path.relative_to(REFERENCE).as_posix() for path in records if not draws_data(json.loads(path.read_text()))]
    assert empty == []


# The open issue's figures, drawn from reference/default where it was seen: each test names what the figure must
# show beside its data.

SPECS_BY_TARGET = {spec.target: spec for module in study_figure_modules() for spec in declared_figures(module)}


def default_figure(target: str):
    """The figure `target` as the workflow draws it from reference/default's tables and fits."""
    spec = SPECS_BY_TARGET[target]
    tables, fits = caveat_tests.reference_inputs(spec)
    return resolve_function(spec.function)(tables, fits), tables, fits


def seed_bands(ax) -> list:
    return [c for c in ax.collections if c.get_gid() == SEED_BAND_GID]


def half_widths(band) -> np.ndarray:
    return np.array([abs(segment[1, 1] - segment[0, 1]) / 2 for segment in band.get_segments()])


COMPARISONS_OF_SEPARATE_RUNS = [
    "chen2025_fig2", "chen2025_fig4", "chen2025_fig7", "chen2025_fig9", "chen2025_fig13", "chen2025_fig14",
    "sun2025_fig3", "sun2025_fig8", "sun2025_fig9", "sun2025_fig13",
    "kumar2024_fig4", "kumar2024_fig20", "kumar2024_fig14", "kumar2024_fig1_right",
    "ahmadian2023_fig1", "ahmadian2023_fig2", "ahmadian2023_fig3",
]  # fmt: skip


@pytest.mark.parametrize("target", COMPARISONS_OF_SEPARATE_RUNS)
def test_a_figure_comparing_separately_trained_runs_draws_the_seed_band(target):
    fig, _, _ = default_figure(target)
    bands = [band for ax in fig.axes for band in seed_bands(ax)]
    footer = " ".join(text.get_text() for text in fig.texts)
    plt.close(fig)
    assert bands and all(len(band.get_segments()) for band in bands), f"{target}: no seed band"
    assert SEED_BAND_LABEL in footer


def test_chen_fig4_band_is_the_claims_sigma_seed_not_the_evaluation_error():
    fig, tables, _ = default_figure("chen2025_fig4")
    sigma = float(tables["ratio"]["sigma_seed"].iloc[0])
    assert sigma > 0
    for ax in fig.axes:
        [points] = [line for line in ax.get_lines() if line.get_marker() == "o"]
        [band] = seed_bands(ax)
        np.testing.assert_allclose(half_widths(band), 2 * sigma)
        assert [s[0, 0] for s in band.get_segments()] == pytest.approx(list(points.get_xdata()))
    plt.close(fig)


def test_chen_fig9_band_of_a_mean_over_k_runs_is_sigma_over_root_k():
    fig, tables, _ = default_figure("chen2025_fig9")
    sigma = float(tables["ratio"]["sigma_seed"].iloc[0])
    right = fig.axes[1]
    rows = tables["evals"]
    rows = rows[(rows["seed"] == rows["seed"].min()) & ~rows["diverged"] & (rows["precision"] == "W4A4")]
    counts = rows[chen_main_grid(rows)].groupby("G")["delta"].count()
    first = seed_bands(right)[0]
    np.testing.assert_allclose(half_widths(first), 2 * sigma / np.sqrt(counts.to_numpy()))
    plt.close(fig)


def test_chen_fig1_draws_this_runs_fit_and_says_it_is_extrapolated():
    fig, _, fits = default_figure("chen2025_fig1")
    fit = fits["qat"]
    cut = fig.axes[1]
    [line] = [line for line in cut.get_lines() if line.get_label() == "this run's fit"]
    N = np.asarray(line.get_xdata(), float)
    inputs = fit.points["inputs"]
    ratio = np.median(np.asarray(inputs["D"], float) / np.asarray(inputs["N"], float))
    expected = fit.predict({"N": N, "D": ratio * N, "G": np.full_like(N, 128.0)})
    np.testing.assert_allclose(line.get_ydata(), expected, rtol=1e-12)
    assert N.min() <= min(inputs["N"]) and N.max() >= 1e11  # from the sizes it saw to the paper's
    assert [c for c in cut.collections if c.get_gid() == EXTRAPOLATED_GID]
    footer = " ".join(" ".join(text.get_text().split()) for text in fig.texts)
    assert f"{EXTRAPOLATED} to N 31.6M–100B" in footer and BOUND_FLAG in footer
    plt.close(fig)


def test_kumar_fig1_left_stars_only_a_turn_beyond_its_noise_and_draws_error_bars():
    fig, tables, _ = default_figure("kumar2024_fig1_left")
    ax = fig.axes[0]
    n = tables["ptq"]["N"].min()
    turns = kumar_figures.turn_ups(tables["ptq"], n)
    stars = {
        (float(star.get_xdata()[0]), float(star.get_ydata()[0])): to_rgba(star.get_markerfacecolor())[3] == 1
        for star in ax.get_lines()
        if star.get_marker() == "*"
    }
    assert len(turns) and len(stars) == len(turns)
    for turn in turns.itertuples():  # filled ★ for a rise beyond 2 s.e., hollow ☆ for one within it
        assert stars[(turn.D_best / n, turn.loss_best)] == (turn.rise > 2 * turn.rise_se), turn
    lines = [c for c in ax.collections if isinstance(c, LineCollection) and len(c.get_segments())]
    bands = [c for c in lines if c.get_gid() == SEED_BAND_GID]
    series = tables["ptq"]["bits"].nunique()
    assert len(lines) - len(bands) == series  # one set of error bars per series, no PTQ included
    assert len(bands) == series  # and its seed band, from the points trained at other seeds
    plt.close(fig)


def test_ahmadian_fig1_draws_binomial_error_bars_opts_stand_in_and_the_papers_table_4():
    fig, tables, _ = default_figure("ahmadian2023_fig1")
    accuracy, change, paper = fig.axes
    rows = tables["evals"]
    rows = rows[rows["final"] & rows["factor"].isin(["recipe", "outlier_prone"]) & (rows["method"] == "none")]
    assert ahmadian_figures.items_per_task(rows) == 128
    p = rows[list(ahmadian_figures.TASK_COLUMNS)].to_numpy(float)
    se = np.sqrt((p * (1 - p)).sum(axis=1) / 128) / p.shape[1]
    drawn_bars = sorted(
        round(abs(s[1, 1] - s[0, 1]) / 2, 9)
        for c in accuracy.collections
        if isinstance(c, LineCollection) and c.get_gid() != SEED_BAND_GID
        for s in c.get_segments()
    )
    assert set(np.round(1.96 * se, 9)) <= set(drawn_bars)
    assert any("OPT's stand-in" in text.get_text() for text in accuracy.get_legend().get_texts())
    expected = [100 * (w8a8 / base - 1) for base, w8a8, _ in ahmadian_figures.PAPER_TABLE4.values()]
    assert [patch.get_height() for patch in paper.patches] == pytest.approx(expected)
    assert seed_bands(accuracy) and seed_bands(change)
    plt.close(fig)


def test_sun_fig3_warns_of_each_block_parameter_on_its_bound_and_of_no_other():
    fig, _, fits = default_figure("sun2025_fig3")
    footer = " ".join(" ".join(text.get_text().split()) for text in fig.texts)
    block = fits["block"]
    on_bound = [name for name in block.params if block.at_bound(name)]
    warning = footer[footer.index(BOUND_FLAG) :] if BOUND_FLAG in footer else ""
    assert ("this run's block-size fit" in warning) == bool(on_bound)
    for name, value in block.params.items():
        assert (f"{parameter_symbol(name)} = {value:.3g}" in warning) == (name in on_bound), name
    plt.close(fig)


def lab(colour) -> np.ndarray:
    """CIE L*a*b* (D65) of an sRGB colour."""
    rgb = np.array(to_rgba(colour)[:3])
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    xyz /= [0.95047, 1.0, 1.08883]
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


# Colour difference (CIE76 ΔE) two series of one axes keep at least: ~2 is a just-noticeable difference between
# patches side by side; thin lines far apart need several times more to be matched to their legend entry.
MIN_SERIES_DELTA_E = 15


def test_sun_fig5_series_can_be_told_apart_and_a_nu_on_its_bound_is_flagged():
    fig, _, fits = default_figure("sun2025_fig5")
    ax = fig.axes[0]
    colours = [lab(handle.get_color()) for handle in ax.get_legend().legend_handles]
    closest = min(np.linalg.norm(a - b) for i, a in enumerate(colours) for b in colours[i + 1 :])
    assert closest >= MIN_SERIES_DELTA_E
    footer = " ".join(" ".join(text.get_text().split()) for text in fig.texts)
    capybara = fits["capybara"]
    warning = footer[footer.index(BOUND_FLAG) :] if BOUND_FLAG in footer else ""
    flagged = "this run's Capybara fit: " in warning and f"ν = {capybara.params['nu']:.3g}" in warning
    assert flagged == capybara.at_bound("nu")
    plt.close(fig)


def test_ouyang_fig1_says_this_runs_fit_is_extrapolated_from_its_own_sizes():
    fig, _, _ = default_figure("ouyang2024_fig1")
    legend = [text.get_text() for text in fig.axes[-1].get_legend().get_texts()]
    footer = " ".join(" ".join(text.get_text().split()) for text in fig.texts)
    assert f"this run's fit ({EXTRAPOLATED})" in legend
    assert f"fitted on N 20.9k–201k, D 252k–8M, {EXTRAPOLATED} to N 7B–405B, D 1B–100T" in footer
    plt.close(fig)
