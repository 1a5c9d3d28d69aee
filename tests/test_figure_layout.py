"""Every declared figure, drawn from the committed reference tables and fits (smoke and default: some collisions
appear only with the default run's numbers), is legible: no text sits on
other text, log axes carry readable tick labels, legends and insets leave the data visible, series stand out from the axes
background and tick labels do not mix an exponent with a unit suffix ("1e+09T").

The checks read matplotlib's own artists after a draw, in the layout `save_figure` writes: the figure goes
through `tidy_figure` (the steps save_figure takes before saving) and is drawn at the saving resolution.
Saving with bbox_inches="tight" only crops or grows the canvas around the drawn artists; it moves none of them
relative to another, so overlaps and coverage measured here are those of the saved PNG.
"""

import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
import test_figure_caveats as caveat_tests
import yaml
from conftest import REPO_ROOT
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgba
from matplotlib.container import BarContainer
from matplotlib.ticker import FuncFormatter, NullFormatter

from qscaling.figures import (
    COLUMN_TITLES,
    add_footer,
    compact_number,
    declared_figures,
    figure_inputs,
    load_figure_inputs,
    new_figure,
    resolve_function,
    series_palette,
    tidy_figure,
)
from qscaling.pipeline import resolve, study_figure_modules

REFERENCE = REPO_ROOT / "reference"
# Two texts may touch (tick labels of one axis often do) but not share more than a pixel of the saved PNG.
OVERLAP_PX = 1.0
# WCAG 2 contrast ratio of a series against its axes background. WCAG's 3:1 for graphics would rule out the
# mid-range of every sequential palette (viridis' green is 2.0:1 on white); 1.5:1 still rules out the pale
# ends that vanish on white — viridis' yellow (1.3:1), rocket's and mako's near-white tails (1.1:1).
MIN_CONTRAST = 1.5
EXPONENT = re.compile(r"\d[eE][+-]?\d|10\^|\\times|×\s*10")
UNIT_SUFFIX = re.compile(r"\d\s?[kMGBT](?![A-Za-z])")


def ran_in(module, scale: str) -> bool:
    """A figure module the `scale` reference holds inputs for: the generic ones and those of the studies its preset
    configures (a study outside it, such as the seed study, checks its figure's layout on synthetic tables)."""
    raw = yaml.safe_load((REPO_ROOT / "config.yaml").read_text()) | {"scale": scale}
    configured = resolve(raw)[1]
    parts = module.__name__.split(".")
    return parts[1] != "studies" or parts[2] in configured


SCALES = ("smoke", "default")
SPECS = [spec for module in study_figure_modules() if ran_in(module, "smoke") for spec in declared_figures(module)]
CASES = [
    (scale, spec)
    for scale in SCALES
    for module in study_figure_modules()
    if ran_in(module, scale)
    for spec in declared_figures(module)
]


def artifact_path(artifact: str, scale: str = "smoke") -> Path:
    """Where the `scale` reference holds a table artifact: "learning_curves", "<study>" or "<study>/<name>"."""
    results = REFERENCE / scale / "results"
    study, _, name = artifact.partition("/")
    if not name:
        table = results / "tables" / f"{study}.parquet"
        return table if table.exists() else table.with_suffix(".csv")  # the law comparison is a CSV
    table = results / "tables" / f"{study}_{name}.parquet"
    return table if table.exists() else results / "fits" / study / f"{name}.parquet"


def reference_inputs(spec, scale: str = "smoke") -> tuple[dict, dict]:
    """(tables, fits) as the workflow passes them to the figure, from the `scale` reference."""
    tables = {a: artifact_path(a, scale) for a in spec.tables.values() if artifact_path(a, scale).exists()}
    fits = {
        study.name: {path.stem: path for path in sorted(study.glob("*.json"))}
        for study in sorted((REFERENCE / scale / "results" / "fits").iterdir())
    }
    named = figure_inputs(spec, tables, fits)
    assert named is not None, f"{spec.target}: the {scale} reference lacks its inputs"
    return load_figure_inputs(named)


def drawn_ticks(axis):
    """The ticks matplotlib draws: those whose location lies in the view (tick objects beyond it are reused)."""
    low, high = sorted(axis.get_view_interval())
    span = (high - low) * 1e-9
    major, minor = axis.get_majorticklocs(), axis.get_minorticklocs()
    ticks = list(zip(axis.get_major_ticks(len(major)), major)) + list(zip(axis.get_minor_ticks(len(minor)), minor))
    return [tick for tick, loc in ticks if low - span <= loc <= high + span]


def drawn_axes(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def shown_axes(ax):
    """The axes' x and y axis where they are drawn (ax.axis("off") hides both)."""
    return [axis for axis in (ax.xaxis, ax.yaxis) if ax.axison and axis.get_visible()]


def tick_labels(axis):
    return [label for tick in drawn_ticks(axis) for label in (tick.label1, tick.label2) if label.get_visible()]


def legends(fig):
    return [*fig.legends, *(ax.get_legend() for ax in drawn_axes(fig) if ax.get_legend())]


def named_texts(fig) -> list[tuple[str, object]]:
    """(description, Text) for every visible, non-empty text the figure draws."""
    texts = [("figure text", t) for t in fig.texts]
    for number, ax in enumerate(drawn_axes(fig)):
        where = f"axes {number}"
        texts += [(f"{where} title/annotation", t) for t in ax.get_children() if isinstance(t, plt.Text)]
        for axis in shown_axes(ax):
            name = axis.axis_name
            texts += [(f"{where} {name} label", axis.label), (f"{where} {name} offset", axis.offsetText)]
            texts += [(f"{where} {name} tick label", t) for t in tick_labels(axis)]
        texts += [
            (f"{where} table cell", cell.get_text()) for table in ax.tables for cell in table.get_celld().values()
        ]
    for legend in legends(fig):
        texts += [("legend title", legend.get_title())] + [("legend text", t) for t in legend.get_texts()]
    return [(name, t) for name, t in texts if t.get_visible() and t.get_text().strip()]


def text_corners(text, renderer) -> np.ndarray:
    """The 4 corners (pixels) of a text's rotated box: matplotlib reports only the axis-aligned box around it,
    which for rotated tick labels overlaps its neighbours' although the glyphs do not."""
    box = text.get_window_extent(renderer)
    angle = np.deg2rad(text.get_rotation())
    if angle % (np.pi / 2) == 0:
        return np.array([[box.x0, box.y0], [box.x1, box.y0], [box.x1, box.y1], [box.x0, box.y1]])
    rotation = text.get_rotation()
    text.set_rotation(0)
    upright = text.get_window_extent(renderer)
    text.set_rotation(rotation)
    half = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * [upright.width / 2, upright.height / 2]
    turn = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    # Rotation then alignment moves the box rigidly, so its centre is the centre of the reported box.
    return half @ turn.T + [(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2]


def overlap(a: np.ndarray, b: np.ndarray) -> float:
    """How deep two convex quadrilaterals overlap (pixels): the least overlap of their projections on every
    edge normal (separating-axis theorem); ≤ 0 where some axis separates them."""
    depth = np.inf
    for corners in (a, b):
        for edge in np.diff(np.vstack([corners, corners[:1]]), axis=0):
            normal = np.array([-edge[1], edge[0]]) / np.hypot(*edge)
            pa, pb = a @ normal, b @ normal
            depth = min(depth, min(pa.max(), pb.max()) - max(pa.min(), pb.min()))
    return depth


def overlapping_texts(fig, renderer) -> list[str]:
    texts = [(name, t, text_corners(t, renderer)) for name, t in named_texts(fig)]
    return [
        f"{name_a} {a.get_text()!r} overlaps {name_b} {b.get_text()!r} by {depth:.1f} px"
        for i, (name_a, a, corners_a) in enumerate(texts)
        for name_b, b, corners_b in texts[i + 1 :]
        if (depth := overlap(corners_a, corners_b)) > OVERLAP_PX
    ]


def axes_texts(ax, number) -> list[tuple[str, object]]:
    """(description, Text) for the title, axis labels and tick labels an axes draws around itself."""
    texts = [(f"axes {number} title", text) for text in (ax.title, ax._left_title, ax._right_title)]
    for axis in shown_axes(ax):
        texts += [(f"axes {number} {axis.axis_name} label", axis.label)]
        texts += [(f"axes {number} {axis.axis_name} tick label", t) for t in tick_labels(axis)]
    return [(name, t) for name, t in texts if t.get_visible() and t.get_text().strip()]


def box_corners(box) -> np.ndarray:
    return np.array([[box.x0, box.y0], [box.x1, box.y0], [box.x1, box.y1], [box.x0, box.y1]])


def texts_over_other_axes(fig, renderer) -> list[str]:
    """A panel's title, axis label or tick label drawn over a neighbouring panel's plotting area (an inset, whose
    area lies inside another's, is no neighbour)."""
    problems = []
    axes = drawn_axes(fig)
    for number, ax in enumerate(axes):
        texts = [(name, t, text_corners(t, renderer)) for name, t in axes_texts(ax, number)]
        for other_number, other in enumerate(axes):
            if other is ax or ax.bbox.overlaps(other.bbox):
                continue
            area = box_corners(other.bbox)
            problems += [
                f"{name} {text.get_text()!r} lies {depth:.1f} px over axes {other_number}"
                for name, text, corners in texts
                if (depth := overlap(corners, area)) > OVERLAP_PX
            ]
    return problems


def handle_colour(handle) -> tuple | None:
    """The colour a legend entry shows: a line's, else a patch's or collection's face (its edge where hollow)."""
    if isinstance(handle, plt.Line2D):
        return to_rgba(handle.get_color())
    faces = handle.get_facecolor() if hasattr(handle, "get_facecolor") else []
    faces = [faces] if np.ndim(faces) == 1 else list(faces)
    if len(faces) and to_rgba(faces[0])[3] > 0:
        return to_rgba(faces[0])
    edges = handle.get_edgecolor() if hasattr(handle, "get_edgecolor") else []
    edges = [edges] if np.ndim(edges) == 1 else list(edges)
    return to_rgba(edges[0]) if len(edges) else None


def series_recoloured(fig) -> list[str]:
    """A legend label (a size, a bit width) shown in one colour in one panel and another in the next."""
    colours = {}
    for number, ax in enumerate(drawn_axes(fig)):
        legend = ax.get_legend()
        if legend is None:
            continue
        for text, handle in zip(legend.get_texts(), legend.legend_handles):
            colour = handle_colour(handle) if handle is not None else None
            if colour is not None:
                colours.setdefault(text.get_text(), {}).setdefault(tuple(np.round(colour[:3], 3)), []).append(number)
    return [
        f"{label!r} changes colour between panels: " + "; ".join(f"{c} in axes {a}" for c, a in shown.items())
        for label, shown in colours.items()
        if len(shown) > 1
    ]


def unlabelled_log_axes(fig) -> list[str]:
    """Log axes with fewer than 2 labelled ticks in view; axes whose labels are hidden on purpose (a shared
    axis labelled on its neighbour) are left out."""
    problems = []
    for number, ax in enumerate(drawn_axes(fig)):
        for axis in shown_axes(ax):
            ticks = drawn_ticks(axis)
            hidden = not any(label.get_visible() for tick in ticks for label in (tick.label1, tick.label2))
            labelled = [label.get_text() for label in tick_labels(axis) if label.get_text().strip()]
            if axis.get_scale() == "log" and not hidden and len(labelled) < 2:
                problems.append(f"axes {number} log {axis.axis_name} axis labels only {labelled}")
    return problems


def ragged_tick_labels(fig, renderer) -> list[str]:
    """Axes whose tick labels do not line up: on an x axis, labels whose tops differ by more than a pixel (a minor
    tick's label drawn at another distance from the axis than a major one's); on a y axis, their aligned edges."""
    problems = []
    for number, ax in enumerate(drawn_axes(fig)):
        for axis in shown_axes(ax):
            edges = {}
            for label in tick_labels(axis):
                if label.get_text().strip():
                    box = label.get_window_extent(renderer)
                    if axis.axis_name == "x":
                        side = label.get_va()
                        edge = box.y1 if side == "top" else box.y0
                    else:
                        side = label.get_ha()
                        edge = box.x1 if side == "right" else box.x0 if side == "left" else (box.x0 + box.x1) / 2
                    edges.setdefault(side, []).append((edge, label.get_text()))
            for found in edges.values():
                values = [edge for edge, _ in found]
                if max(values) - min(values) > 1.0:
                    texts = [text for _, text in found]
                    problems.append(f"axes {number} {axis.axis_name} tick labels {texts} off one line")
    return problems


def data_points(ax) -> np.ndarray:
    """Pixel positions of the axes' plotted points inside its view: line vertices and markers in data
    coordinates (not axhline/axvline, which span the axes) and scatter offsets."""
    points = [np.empty((0, 2))]
    for line in ax.get_lines():
        if line.get_visible() and line.get_transform().contains_branch(ax.transData):
            points.append(line.get_transform().transform(line.get_xydata()))
    for collection in ax.collections:
        if isinstance(collection, PathCollection) and collection.get_visible() and len(collection.get_offsets()):
            points.append(collection.get_offset_transform().transform(collection.get_offsets()))
    points = np.vstack(points)
    points = points[np.isfinite(points).all(axis=1)]
    return points[[ax.bbox.contains(x, y) for x, y in points]] if len(points) else points


def legends_over_data(fig, renderer) -> list[str]:
    problems = []
    owners = [(ax.get_legend(), [ax]) for ax in drawn_axes(fig) if ax.get_legend()]
    for legend, axes in owners + [(legend, drawn_axes(fig)) for legend in fig.legends]:
        box = legend.get_window_extent(renderer)
        for ax in axes:
            covered = [(x, y) for x, y in data_points(ax) if box.x0 < x < box.x1 and box.y0 < y < box.y1]
            if covered:
                labels = [t.get_text() for t in legend.get_texts()]
                problems.append(f"legend {labels} covers {len(covered)} data points of axes {fig.axes.index(ax)}")
    return problems


def axes_over_data(fig, renderer) -> list[str]:
    """An inset (a smaller axes drawn over another's area, not a twin sharing it; Axes.inset_axes makes one that
    fig.axes does not list) that hides the other's points."""
    problems = []
    axes = drawn_axes(fig)
    axes += [child for ax in axes for child in ax.child_axes if child.get_visible()]
    for number, inset in enumerate(axes):
        box = inset.bbox
        for other_number, other in enumerate(axes):
            smaller = box.width * box.height < other.bbox.width * other.bbox.height
            if other is inset or not smaller or not box.overlaps(other.bbox):
                continue
            covered = [(x, y) for x, y in data_points(other) if box.x0 < x < box.x1 and box.y0 < y < box.y1]
            if covered:
                problems.append(f"axes {number} covers {len(covered)} data points of axes {other_number}")
    return problems


def relative_luminance(rgb) -> float:
    """WCAG 2 relative luminance of an sRGB colour."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a, b) -> float:
    high, low = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def over(color, background) -> np.ndarray:
    """`color` as it shows over an opaque `background` (alpha blended)."""
    rgba = to_rgba(color)
    return np.array(rgba[:3]) * rgba[3] + np.array(background[:3]) * (1 - rgba[3])


def series_name(artist) -> str:
    label = artist.get_label()
    return "(unlabelled)" if label is None or label.startswith("_") else repr(label)


def series_colors(ax) -> list[tuple[str, object]]:
    """(artist, colour) for every line, marker, scatter point and bar the axes draws."""
    colors = []
    for line in ax.get_lines():
        if not line.get_visible() or not len(line.get_xdata()):
            continue
        if line.get_linestyle() not in ("None", "") and line.get_linewidth() > 0:
            colors.append((f"line {series_name(line)}", line.get_color()))
        if line.get_marker() not in ("None", "", " ", None):
            face = line.get_markerfacecolor()
            marker = face if to_rgba(face)[3] > 0 else line.get_markeredgecolor()
            colors.append((f"markers {series_name(line)}", marker))
    for collection in ax.collections:
        if isinstance(collection, PathCollection) and collection.get_visible() and len(collection.get_offsets()):
            faces, edges = collection.get_facecolors(), collection.get_edgecolors()
            # A hollow point (transparent face) shows its edge, as a hollow line marker does above.
            shown = [
                face if face[3] > 0 or not len(edges) else edges[index % len(edges)] for index, face in enumerate(faces)
            ]
            colors += [(f"scatter {series_name(collection)}", c) for c in (shown if len(faces) else edges)]
    for container in ax.containers:
        if isinstance(container, BarContainer):
            colors += [(f"bar {series_name(container)}", patch.get_facecolor()) for patch in container.patches]
    return colors


def faint_series(fig) -> list[str]:
    problems = set()
    for number, ax in enumerate(drawn_axes(fig)):
        background = over(ax.get_facecolor(), to_rgba(fig.get_facecolor()))
        for name, color in series_colors(ax):
            shown = over(color, background)
            if (ratio := contrast(shown, background)) < MIN_CONTRAST:
                problems.add(f"axes {number} {name} colour {tuple(np.round(shown, 2))} contrast {ratio:.2f}")
    return sorted(problems)


def exponent_with_suffix(fig) -> list[str]:
    labels = {label.get_text() for ax in drawn_axes(fig) for axis in shown_axes(ax) for label in tick_labels(axis)}
    return sorted(f"tick label {text!r}" for text in labels if EXPONENT.search(text) and UNIT_SUFFIX.search(text))


def raw_column_legends(fig) -> list[str]:
    """Legend titles or headers that are a table's column name rather than words."""
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    texts = [text for legend in legends if legend is not None for text in [legend.get_title(), *legend.get_texts()]]
    return [f"legend text {text.get_text()!r}" for text in texts if text.get_text() in COLUMN_TITLES]


CHECKS = {
    "overlapping texts": lambda fig, renderer: overlapping_texts(fig, renderer),
    "texts over another panel": texts_over_other_axes,
    "a series changes colour between panels": lambda fig, renderer: series_recoloured(fig),
    "raw column names in legends": lambda fig, renderer: raw_column_legends(fig),
    "log axes without two labels": lambda fig, renderer: unlabelled_log_axes(fig),
    "legends over data": legends_over_data,
    "insets over data": axes_over_data,
    "faint series": lambda fig, renderer: faint_series(fig),
    "exponent and unit suffix": lambda fig, renderer: exponent_with_suffix(fig),
    "ragged tick labels": ragged_tick_labels,
}


def drawn_as_saved(fig, tidy=True):
    """The renderer of `fig` drawn as save_figure writes it: tidied, at the saving resolution."""
    if tidy:
        tidy_figure(fig)
    fig.set_dpi(plt.rcParams["savefig.dpi"])
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def layout_problems(fig, tidy=True) -> dict[str, list[str]]:
    """Each check's findings on `fig`, drawn as save_figure saves it (closed afterwards)."""
    try:
        renderer = drawn_as_saved(fig, tidy)
        found = {name: check(fig, renderer) for name, check in CHECKS.items()}
    finally:
        plt.close(fig)
    return {name: problems for name, problems in found.items() if problems}


@pytest.mark.parametrize("scale, spec", CASES, ids=[f"{scale}-{spec.target}" for scale, spec in CASES])
def test_figure_layout_is_legible(scale, spec):
    tables, fits = reference_inputs(spec, scale)
    problems = layout_problems(resolve_function(spec.function)(tables, fits))
    assert not problems, f"{scale} {spec.target}:\n" + json.dumps(problems, indent=1, ensure_ascii=False)


def test_every_declared_figure_is_checked():
    assert len(SPECS) > 30
    assert {spec.target for scale, spec in CASES if scale == "default"} >= {spec.target for spec in SPECS}


# The checks themselves: each finds the defect it names on a small figure made to have it, and the tidying
# save_figure does removes the ones it is meant to.


def small_figure():
    fig, axes = new_figure(width=3.0, height=2.4)
    return fig, axes[0][0]


def test_overlapping_texts_are_found_but_rotated_neighbours_that_miss_are_not():
    fig, ax = small_figure()
    ax.text(0.5, 0.5, "first label", transform=ax.transAxes)
    ax.text(0.52, 0.5, "second label", transform=ax.transAxes)
    assert "overlapping texts" in layout_problems(fig)
    fig, ax = small_figure()
    ax.set_xticks(range(6), [f"variant {i}" for i in range(6)], rotation=30, ha="right")
    assert "overlapping texts" not in layout_problems(fig)


def test_a_footer_goes_below_rotated_tick_labels():
    fig, ax = small_figure()
    ax.set_xticks(range(4), ["a long variant name"] * 4, rotation=60, ha="right")
    ax.set_xlabel("variant")
    add_footer(fig, "a footer long enough to wrap across the figure's width, under every label of the axes")
    assert not layout_problems(fig)


def test_a_log_axis_showing_one_power_of_ten_gets_two_labels():
    def one_power():
        fig, ax = small_figure()
        ax.set(xscale="log", xlim=(1.1e3, 8.7e4))  # 1.9 decades, one of them labelled: 1e4
        ax.xaxis.set_minor_formatter(NullFormatter())
        return fig

    assert "log axes without two labels" in layout_problems(one_power(), tidy=False)
    assert not layout_problems(one_power())


def test_a_log_axis_narrower_than_its_third_significant_digit_gets_two_distinct_labels():
    fig, ax = small_figure()
    ax.set(yscale="log", ylim=(9.86e3, 9.95e3))  # both inner points round to 9.9k at two significant digits
    assert not layout_problems(fig)
    labels = [label.get_text() for label in ax.get_yticklabels() if label.get_text()]
    assert len(labels) == len(set(labels)) == 2, labels


def test_minor_and_major_tick_labels_of_a_log_axis_share_one_line():
    def minor_labels():
        fig, ax = small_figure()
        ax.plot([3e5, 8e6], [1, 2])
        ax.set(xscale="log")
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda value, _: compact_number(value)))
        ax.tick_params(axis="x", which="minor", pad=8)  # as a style whose minor ticks are shorter leaves them
        return fig

    assert "ragged tick labels" in layout_problems(minor_labels(), tidy=False)
    assert not layout_problems(minor_labels())


def test_a_legend_on_the_data_is_found_and_moved_off_it():
    def covered():
        fig, ax = small_figure()
        grid = np.linspace(0, 1, 30)
        for offset in np.linspace(0, 1, 8):
            ax.plot(grid, grid * 0 + offset, "o", ms=2, label=f"series {offset:.2f}")
        ax.legend(fontsize=6)
        return fig

    assert "legends over data" in layout_problems(covered(), tidy=False)
    assert not layout_problems(covered())


def test_an_inset_over_points_is_found_but_a_twin_axes_is_not():
    fig, ax = small_figure()
    ax.plot(np.linspace(0, 1, 20), np.linspace(0, 1, 20) ** 0.2, "o")  # the upper left holds points
    inset = ax.inset_axes([0.05, 0.55, 0.4, 0.4])
    inset.plot([0, 1], [0, 1])
    found = layout_problems(fig, tidy=False).get("insets over data", [])
    assert len(found) == 1 and found[0].startswith("axes 1 covers") and found[0].endswith("data points of axes 0")
    fig, ax = small_figure()
    ax.plot(np.linspace(0, 1, 20), np.linspace(0, 1, 20), "o")
    ax.twinx().plot([0, 1], [1, 0], "o")
    assert "insets over data" not in layout_problems(fig, tidy=False)


def test_a_pale_series_is_found_and_series_palette_avoids_it():
    fig, ax = small_figure()
    ax.plot([1, 2], [1, 2], color="#fde725")  # viridis' last colour
    assert "faint series" in layout_problems(fig)
    assert min(contrast(color, (1, 1, 1)) for color in series_palette("viridis", 16)) >= MIN_CONTRAST
    assert min(contrast(color, (1, 1, 1)) for color in series_palette("mako", 3)) >= MIN_CONTRAST


def test_a_hollow_point_is_judged_by_its_edge():
    fig, ax = small_figure()
    ax.scatter([1, 2], [1, 2], facecolors=["C0", "none"], edgecolors="C0")
    assert "faint series" not in layout_problems(fig)
    fig, ax = small_figure()
    ax.scatter([1, 2], [1, 2], facecolors="none", edgecolors="#fde725")
    assert "faint series" in layout_problems(fig)


def test_tick_labels_with_an_exponent_and_a_suffix_are_found():
    fig, ax = small_figure()
    ax.set_xticks([0, 1], ["1e+09T", "1e+10T"])
    assert "exponent and unit suffix" in layout_problems(fig)


@pytest.mark.parametrize(
    "value, label",
    [
        (2e6, "2M"),
        (2.5e5, "250k"),
        (0.003, "0.003"),
        (5e14, "500T"),
        (1e21, "$10^{21}$"),
        (3e-5, "$3{\\times}10^{-5}$"),
    ],
)
def test_compact_number(value, label):
    assert compact_number(value) == label


def test_a_raw_column_name_as_legend_title_is_found_and_tidied_into_words():
    fig, ax = small_figure()
    ax.plot([1, 2], [1, 2], label="4-bit")
    ax.legend(title="bits")
    assert raw_column_legends(fig) == ["legend text 'bits'"]
    tidy_figure(fig)
    assert raw_column_legends(fig) == [] and ax.get_legend().get_title().get_text() == "bit width"
    plt.close(fig)


def test_kumar_fig4_labels_clear_the_panel_to_their_left_and_each_size_keeps_its_colour():
    """As drawn from reference/default, where its three budgets' panels showed both defects."""
    spec = next(spec for spec in SPECS if spec.target == "kumar2024_fig4")
    tables, fits = caveat_tests.reference_inputs(spec)
    fig = resolve_function(spec.function)(tables, fits)
    assert len(fig.axes) == 3
    problems = layout_problems(fig)
    assert not problems, json.dumps(problems, indent=1, ensure_ascii=False)


def test_a_label_over_the_next_panel_and_a_recoloured_series_are_found():
    fig, axes = new_figure(2, 1, width=2.0, height=2.4)
    for ax, colour in zip(axes[0], ("C0", "C1")):
        ax.plot([1, 2], [1, 2], color=colour, label="N 20k")
        ax.legend(fontsize=6)
    axes[0][1].set_ylabel("a y label long enough to need room", labelpad=40)
    found = layout_problems(fig, tidy=False)
    assert "texts over another panel" in found and "a series changes colour between panels" in found
