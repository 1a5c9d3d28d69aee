"""Every figure that draws a fit flags each parameter it uses that sits on a bound, and the marks themselves
(`qscaling.figures.caveats`) do what they say: the seed band, the bound flag and the extrapolation hatch and note.

Which parameters a figure uses is recorded, not declared: each fit is handed to the figure wrapped so that reading
a parameter, predicting, or evaluating its law with its parameters counts as using them. The figures are drawn from
the committed reference results (default and smoke), whose fits sit on bounds in every study.
"""

import sys
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pytest
from conftest import REPO_ROOT

from qscaling.figures import declared_figures, figure_inputs, load_figure_inputs, new_figure, resolve_function
from qscaling.figures.caveats import (
    BOUND_FLAG,
    EXTRAPOLATED,
    EXTRAPOLATED_GID,
    EXTRAPOLATED_NOTE,
    SEED_BAND_GID,
    bound_flag_text,
    extrapolation_note,
    flag_bounds,
    mark_extrapolation,
    parameter_symbol,
    seed_band,
)
from qscaling.pipeline import study_figure_modules

DEFAULT = REPO_ROOT / "reference" / "default" / "results"
CAVEATS = "qscaling.figures.caveats"
FITTED_SPECS = [spec for module in study_figure_modules() for spec in declared_figures(module) if spec.fits is not None]


def artifact_path(results: Path, artifact: str) -> Path:
    """Where a reference holds a table artifact: "learning_curves", "<study>" or "<study>/<name>"."""
    study, _, name = artifact.partition("/")
    if not name:
        return results / "tables" / f"{study}.parquet"
    table = results / "tables" / f"{study}_{name}.parquet"
    return table if table.exists() else results / "fits" / study / f"{name}.parquet"


def reference_inputs(spec, results: Path = DEFAULT) -> tuple[dict, dict]:
    """(tables, fits) as the workflow passes them to the figure, from a committed reference."""
    tables = {a: path for a in spec.tables.values() if (path := artifact_path(results, a)).exists()}
    fits = {study.name: {p.stem: p for p in sorted(study.glob("*.json"))} for study in (results / "fits").iterdir()}
    named = figure_inputs(spec, tables, fits)
    assert named is not None, f"{spec.target}: the reference lacks its inputs"
    return load_figure_inputs(named)


def _outside_the_marks() -> bool:
    """Whether the access comes from anywhere but the marks themselves (which read a fit to flag it)."""
    return sys._getframe(2).f_globals.get("__name__") != CAVEATS


class RecordedParams(Mapping):
    """A fit's parameters that note each one read."""

    def __init__(self, params: dict, used: set):
        self._params, self._used = params, used

    def __getitem__(self, name):
        if _outside_the_marks():
            self._used.add(name)
        return self._params[name]

    def __iter__(self):
        return iter(self._params)

    def __len__(self):
        return len(self._params)


class RecordedFit:
    """A fit as a figure receives it, noting which parameters the figure uses."""

    def __init__(self, fit):
        self.fit, self.used = fit, set()

    @property
    def params(self):
        return RecordedParams(self.fit.params, self.used)

    def predict(self, data):
        self.used.update(self.fit.params)
        return self.fit.predict(data)

    def __getattr__(self, name):
        return getattr(self.fit, name)


def figure_texts(fig) -> list[str]:
    """Every text a figure shows, each on one line: footers and figure texts, titles, labels, annotations,
    legends, table cells."""
    return [" ".join(text.get_text().split()) for text in fig.findobj(plt.Text)]


def unflagged(fig, recorded: dict) -> list[str]:
    """For each used parameter on its bound, the flag a figure's texts should carry and do not."""
    flags = [text[text.index(BOUND_FLAG) :] for text in figure_texts(fig) if BOUND_FLAG in text]
    missing = []
    for name, record in recorded.items():
        for parameter in sorted(record.used):
            if record.fit.at_bound(parameter):
                shown = f"{parameter_symbol(parameter)} = {record.fit.params[parameter]:.3g}"
                if not any(shown in flag for flag in flags):
                    missing.append(f"{name}: {shown}")
    return missing


@pytest.mark.parametrize("reference", ["default", "smoke"])
@pytest.mark.parametrize("spec", FITTED_SPECS, ids=[spec.target for spec in FITTED_SPECS])
def test_a_figure_flags_every_parameter_it_draws_on_a_bound(spec, reference):
    tables, fits = reference_inputs(spec, REPO_ROOT / "reference" / reference / "results")
    recorded = {name: RecordedFit(fit) for name, fit in fits.items()}
    fig = resolve_function(spec.function)(tables, recorded)
    try:
        missing = unflagged(fig, recorded)
    finally:
        plt.close(fig)
    assert not missing, f"{spec.target} draws parameters on a bound without saying so: {missing}"


def test_the_bound_flag_test_finds_a_figure_that_draws_a_fit_on_a_bound_silently():
    spec = next(spec for spec in FITTED_SPECS if spec.target == "sun2025_fig3")
    tables, fits = reference_inputs(spec)
    recorded = {name: RecordedFit(fit) for name, fit in fits.items()}
    fig, axes = new_figure()
    grid = np.geomspace(16, 256, 5)
    axes[0][0].plot(grid, recorded["block"].predict({"N": grid * 0 + 2e4, "D": grid * 0 + 5e5, "B": grid}))
    assert unflagged(fig, recorded)
    flag_bounds(fig, {"this run's block-size fit": recorded["block"]})
    assert not unflagged(fig, recorded)
    plt.close(fig)


@pytest.fixture
def block_fit():
    """What the marks read of a fit: the inputs of the points it was fitted on."""
    return SimpleNamespace(points={"inputs": {"N": [2e4, 4e4, 8e4, 2e4], "D": [2.5e5, 5e5, 1e6, 1e6]}})


def test_bound_flag_names_each_parameter_on_its_bound_only_where_one_is():
    class Bounded:
        params = {"gamma_N": 0.0, "k": 0.02, "nu": 10.0}
        notes = ["gamma_N = 0 is at its bound (0, 2)", "nu = 10 is at its bound (0, 10)"]

        def at_bound(self, name):
            return any(note.startswith(f"{name} = ") for note in self.notes)

    text = bound_flag_text(Bounded(), "this run's fit")
    assert text.startswith(BOUND_FLAG) and "γ_N = 0" in text and "ν = 10" in text and "k =" not in text
    assert bound_flag_text(Bounded(), "this run's fit", drawn=("k",)) is None
    fig, _ = new_figure()
    flag_bounds(fig, {"this run's fit": Bounded(), "a missing fit": None})
    assert [t.get_text() for t in fig.texts] == [text]
    plt.close(fig)


def test_a_seed_band_is_two_sds_each_side_of_each_point_and_keeps_the_view():
    fig, axes = new_figure()
    ax = axes[0][0]
    ax.plot([1, 2, 3], [0.1, 0.2, 0.3], "o")
    view = ax.get_ylim()
    seed_band(ax, [1, 2, 3], [0.1, 0.2, 0.3], 0.5, "C0")
    [band] = [c for c in ax.collections if c.get_gid() == SEED_BAND_GID]
    np.testing.assert_allclose([s[:, 1] for s in band.get_segments()], [[-0.9, 1.1], [-0.8, 1.2], [-0.7, 1.3]])
    assert ax.get_ylim() == view
    seed_band(ax, [1], [0.1], float("nan"), "C0")  # no seed repeats: nothing drawn
    assert len([c for c in ax.collections if c.get_gid() == SEED_BAND_GID]) == 1
    plt.close(fig)


def test_extrapolation_is_hatched_beyond_the_fitted_range_and_noted_once(block_fit):
    fig, axes = new_figure(2, 1)
    for ax in axes[0]:
        ax.plot([5e3, 4e5], [1, 2])
        ax.set_xscale("log")
    low, high = 2e4, 8e4
    assert mark_extrapolation(axes[0][0], block_fit, "N")
    hatches = [c for c in axes[0][0].collections if c.get_gid() == EXTRAPOLATED_GID]
    spans = sorted(tuple(np.round(np.sort(np.unique(c.get_paths()[0].vertices[:, 0])), 6)) for c in hatches)
    assert len(spans) == 2 and spans[0][-1] == pytest.approx(low) and spans[1][0] == pytest.approx(high)
    mark_extrapolation(axes[0][1], block_fit, "N")
    assert [t.get_text() for t in fig.texts].count(EXTRAPOLATED_NOTE) == 1
    fig2, inside = new_figure()
    inside[0][0].plot([low, high], [1, 2])
    assert not mark_extrapolation(inside[0][0], block_fit, "N", (low, high))  # the view's margins are not drawn
    plt.close(fig)
    plt.close(fig2)


def test_an_extrapolation_note_names_the_fitted_and_the_drawn_ranges(block_fit):
    note = extrapolation_note(block_fit, {"N": (7e9, 4.05e11), "D": (3e5, 9e5)})
    assert note == f"fitted on N 20k–80k, {EXTRAPOLATED} to N 7B–405B"
    assert extrapolation_note(block_fit, {"D": (3e5, 9e5)}) == ""
