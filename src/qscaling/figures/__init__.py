"""Figures: pure functions `figN(tables, fits) -> Figure`, one module per paper, plus deterministic saving.

A figure function reads tidy tables (pandas DataFrames) and fitted laws; it never trains, quantizes or fits. Each is
declared once, next to its function, with `@figure(...)`: which tables and fits it reads. The workflow makes one
rule per declared figure, named `<paper>_<name>` and writing `figures/<paper>/<name>.png` (see `declared_figures`).
"""

import importlib
import inspect
import json
import math
import os
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.colors import to_rgb
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedLocator, FuncFormatter, LogFormatterSciNotation, NullFormatter

from qscaling.atomic import atomic_path, write_text
from qscaling.laws import load_fit

# Keys matplotlib would otherwise fill with versions and dates, which break byte-identical reruns.
_NO_METADATA = {
    ".png": {"Software": None},
    ".pdf": {"Creator": None, "Producer": None, "CreationDate": None},
    ".svg": {"Creator": None, "Date": None},
}


def apply_style() -> None:
    """The one look shared by every figure."""
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind")
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, "svg.hashsalt": "qscaling"})


def new_figure(ncols: int = 1, nrows: int = 1, *, width: float = 4.0, height: float = 3.2, **kwargs):
    """A styled figure with a grid of axes, sized per panel."""
    apply_style()
    return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **kwargs)


# Marks the text `add_footer` makes, so `tidy_figure` can find it and move it under everything else.
FOOTER_GID = "qscaling-footer"
# WCAG 2 contrast ratio a series colour keeps against the white axes background (see `series_palette`).
MIN_SERIES_CONTRAST = 1.5


def add_footer(fig, text: str, color="0.35") -> None:
    """A small note under the axes: which constants, data or scale produced the figure. `tidy_figure` puts it
    below the lowest tick label, axis label or legend (several footers stack in the order added), wrapped to the
    width of what it sits under."""
    fig.text(0.01, 0, text, fontsize=6, color=color, ha="left", va="top", wrap=True, gid=FOOTER_GID)


def no_points(ax, text: str) -> None:
    """Say in the middle of an empty panel why it has nothing to draw."""
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=7, transform=ax.transAxes)


def interval_text(fit, name: str) -> str:
    """A fitted parameter's CI, or why it has none: held at the paper's value, or on its bound."""
    if fit.held_fixed(name):
        return "held at paper"
    return "[{:.3g}, {:.3g}]".format(*fit.ci[name]) + (" at bound" if fit.at_bound(name) else "")


def compact_number(value: float) -> str:
    """2000000 → '2M', 250000 → '250k', 0.003 → '0.003', 1e21 → '$10^{21}$' (mathtext): short tick labels for
    token, parameter and FLOP counts; beyond a thousand trillion or below a thousandth a power of ten reads
    better than a suffix ('1e+09T') or '1e-05'."""
    magnitude = abs(value)
    if magnitude >= 1e15 or 0 < magnitude < 1e-3:
        exponent = math.floor(math.log10(magnitude))
        mantissa = round(value / 10**exponent, 3)
        power = f"10^{{{exponent}}}"
        return f"${power}$" if mantissa == 1 else f"${mantissa:g}{{\\times}}{power}$"
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if magnitude >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def _relative_luminance(color) -> float:
    """WCAG 2 relative luminance of a colour (0 black … 1 white)."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(color)]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast_ratio(color, background="white") -> float:
    """WCAG 2 contrast ratio (L_light + 0.05) / (L_dark + 0.05): 1 for equal colours, 21 for black on white."""
    dark, light = sorted((_relative_luminance(color), _relative_luminance(background)))
    return (light + 0.05) / (dark + 0.05)


def series_palette(name: str, n: int) -> list:
    """`n` colours from the sequential colormap `name` (viridis, rocket, mako, …), dark to light, spread over
    its part that stays readable on white: the pale ends these maps finish on (viridis' yellow, rocket's and
    mako's near-white) would hide the last series, often the highest-bit or largest one."""
    colormap = matplotlib.colormaps[name]
    fractions = np.linspace(0, 1, 257)
    readable = [contrast_ratio(colormap(f)) >= MIN_SERIES_CONTRAST for f in fractions]
    end = fractions[readable.index(False) - 1] if not all(readable) else 1.0
    # Like seaborn's color_palette(name, n): evenly inside the range, neither end itself.
    return [colormap(f)[:3] for f in np.linspace(0, end, n + 2)[1:-1]]


def _mantissa(value: float) -> int:
    return round(value / 10 ** math.floor(math.log10(value))) if value > 0 else 0


# Minor ticks (mantissas within a decade) labelled on a log axis, densest last: the first set that shows at
# least two labels in view wins.
_LOG_MINOR_LABELS = ((), (2, 5), (2, 3, 5), tuple(range(2, 10)))


def _tidy_log_axes(fig) -> None:
    """Compact labels on log axes left at matplotlib's defaults; where fewer than two powers of ten are in view,
    minor ticks labelled too (×2, ×5, then more), so every log axis shows at least two values."""
    for ax in fig.axes:
        for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if axis.get_scale() != "log" or not isinstance(axis.get_major_formatter(), LogFormatterSciNotation):
                continue
            low, high = sorted(limits)
            majors = sum(low <= v <= high for v in axis.get_majorticklocs())
            minors = [_mantissa(v) for v in axis.get_minorticklocs() if low <= v <= high]
            labelled = next((subs for subs in _LOG_MINOR_LABELS if majors + sum(m in subs for m in minors) >= 2), None)
            axis.set_major_formatter(FuncFormatter(lambda value, _: compact_number(value)))
            if labelled is None:
                # A view narrower than the gap between two tick marks: two values of its own, with the fewest
                # significant digits (2 or more) that tell them apart.
                inner = np.geomspace(low, high, 4)[1:-1]
                digits = next(d for d in range(2, 17) if len({f"{v:.{d}g}" for v in inner}) == 2)
                axis.set_major_locator(FixedLocator([float(f"{v:.{digits}g}") for v in inner]))
                axis.set_minor_formatter(NullFormatter())
                continue
            axis.set_minor_formatter(
                FuncFormatter(lambda value, _, subs=labelled: compact_number(value) if _mantissa(value) in subs else "")
            )
            if labelled:
                _align_minor_labels(ax, axis.axis_name)


def _align_minor_labels(ax, name: str) -> None:
    """Minor tick labels of `ax`'s `name` axis ("x", "y") as far from it as major ones, on every axes sharing it
    (which share its formatters): a minor tick is shorter, and its label would sit closer by the difference, out
    of line with the major labels beside it."""
    for sibling in getattr(ax, f"get_shared_{name}_axes")().get_siblings(ax):
        axis = getattr(sibling, f"{name}axis")
        major, minor = axis.get_major_ticks(1), axis.get_minor_ticks(1)
        offset = major[0].get_tick_padding() + major[0].get_pad()
        axis.set_tick_params(which="minor", pad=offset - minor[0].get_tick_padding())


def _data_points(ax):
    """Pixel positions of what the axes plots in data coordinates: line vertices and scatter offsets (not
    axhline/axvline, which span the axes whatever the data)."""
    lines = [line for line in ax.get_lines() if line.get_transform().contains_branch(ax.transData)]
    scatters = [c for c in ax.collections if isinstance(c, PathCollection) and len(c.get_offsets())]
    points = [line.get_transform().transform(line.get_xydata()) for line in lines]
    points += [c.get_offset_transform().transform(c.get_offsets()) for c in scatters]
    return np.vstack([np.empty((0, 2)), *points])


def _move_legends_off_data(fig, renderer) -> None:
    """An axes legend that sits on plotted points (no free spot for loc="best") moves to the right of the
    rightmost panel of its row, where it covers nothing."""
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent(renderer)
        x, y = _data_points(ax).T
        if not ((x > box.x0) & (x < box.x1) & (y > box.y0) & (y < box.y1)).any():
            continue
        row = [other for other in fig.axes if other.bbox.y0 < ax.bbox.y1 and other.bbox.y1 > ax.bbox.y0]
        right = max(other.get_tightbbox(renderer).x1 for other in row) + 6 * fig.dpi / 72  # 6 pt gap
        # Anchored in axes coordinates, which saving at another dpi leaves in place.
        legend.set_bbox_to_anchor((ax.transAxes.inverted().transform((right, 0))[0], 1.0))
        legend.set_loc("upper left")


def _reaches_into_a_neighbour(ax, axes, renderer) -> bool:
    """Whether the axes' title, axis labels or tick labels lie over another panel's plotting area (more than a
    pixel); an inset, inside another axes' area, is no neighbour."""
    parts = [ax.title, ax.xaxis, ax.yaxis]
    boxes = [box for part in parts if part.get_visible() and (box := part.get_tightbbox(renderer)) is not None]
    neighbours = [other.bbox for other in axes if other is not ax and not ax.bbox.overlaps(other.bbox)]
    return any(
        min(box.x1, other.x1) - max(box.x0, other.x0) > 1 and min(box.y1, other.y1) - max(box.y0, other.y0) > 1
        for box in boxes
        for other in neighbours
    )


def _spread_panels(fig, renderer) -> None:
    """Panels spaced apart (tight_layout) where one's labels reach into a neighbour: a y label beside the panel to
    its left, tick labels wider than the gap."""
    axes = [ax for ax in fig.axes if ax.get_visible()]
    if any(_reaches_into_a_neighbour(ax, axes, renderer) for ax in axes):
        fig.tight_layout()
        fig.draw_without_rendering()


def _place_footers(fig, renderer) -> None:
    """Footers go under everything else the figure draws (rotated tick labels, x labels, legends below the
    axes), left-aligned with it, each under the one before: saving with bbox_inches="tight" then grows the canvas
    to include them."""
    footers = [text for text in fig.texts if text.get_gid() == FOOTER_GID]
    for footer in footers:
        footer.set_in_layout(False)
    width = fig.get_tightbbox(renderer).width * fig.dpi  # the footers' lines: as wide as what they sit under
    for footer in footers:
        content = fig.get_tightbbox(renderer)  # inches
        gap = 4 / 72
        footer.set_position((content.x0 / fig.get_figwidth(), (content.y0 - gap) / fig.get_figheight()))
        # Matplotlib wraps a text only while drawing it, so its measured box is one line per paragraph: the lines
        # are broken here instead, so that the next footer is placed under all of them.
        footer.set_text(_wrapped(footer, renderer, width))
        footer.set_wrap(False)
        footer.set_in_layout(True)


def _wrapped(text, renderer, width: float) -> str:
    """`text`'s string with each paragraph broken between words into lines at most `width` pixels wide."""
    font, lines = text.get_fontproperties(), []
    for paragraph in text.get_text().split("\n"):
        line = ""
        for word in paragraph.split(" "):
            longer = f"{line} {word}" if line else word
            if line and renderer.get_text_width_height_descent(longer, font, ismath=False)[0] > width:
                lines.append(line)
                longer = word
            line = longer
        lines.append(line)
    return "\n".join(lines)


# Table columns seaborn writes as legend titles (and as section headers inside a legend), in words.
COLUMN_TITLES = {
    "bits": "bit width",
    "P": "bit width P",
    "size": "model",
    "N": "N (non-embedding parameters)",
    "D": "D (training tokens)",
    "delta": "loss δ (nats)",
    "split": "held-out set",
}


def _name_legend_columns(fig) -> None:
    """Legend titles and section headers that are raw column names ("bits", "N") read as words."""
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    for legend in (legend for legend in legends if legend is not None):
        for text in [legend.get_title(), *legend.get_texts()]:
            if text.get_text() in COLUMN_TITLES:
                text.set_text(COLUMN_TITLES[text.get_text()])


def tidy_figure(fig) -> None:
    """The layout steps `save_figure` takes before writing: legend titles in words, log-axis labels, panels apart
    where labels reach into a neighbour, legends off the data, footers under everything. Positions are measured on
    a draw, so they follow the fonts and sizes actually used."""
    _name_legend_columns(fig)
    _tidy_log_axes(fig)
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    _spread_panels(fig, renderer)
    _move_legends_off_data(fig, renderer)
    _place_footers(fig, renderer)


def data_path(figure_path: str | os.PathLike) -> Path:
    """Where the data drawn in a figure is written: `fig2.png` → `fig2.data.json`."""
    return Path(figure_path).with_suffix(".data.json")


def _numbers(values) -> list:
    array = np.ma.filled(np.ma.asarray(values, dtype=float), np.nan)
    return [None if not math.isfinite(v) else float(v) for v in array.ravel()]


def _as_numbers_or_text(values) -> list:
    try:
        return _numbers(values)
    except (TypeError, ValueError):
        return [str(v) for v in np.asarray(values, dtype=object).ravel()]


def _collection_data(collection) -> dict:
    entry = {"kind": type(collection).__name__, "label": collection.get_label()}
    if isinstance(collection, LineCollection):
        entry["segments"] = [_numbers(segment) for segment in collection.get_segments()]
    elif isinstance(collection, PathCollection):
        entry["offsets"] = _numbers(collection.get_offsets())
    else:
        entry["paths"] = [_numbers(path.vertices) for path in collection.get_paths()]
    return entry


def figure_data(fig) -> dict:
    """What a figure draws, as data: per axes its labels, scales, limits, lines, markers, bars, texts and tables.

    Pixels follow every input: a fit that moved within its noise redraws a curve, shifts an axis limit and moves
    many pixels. `qscaling diff` reads this record to tell such a figure (same structure, numbers moved) from one
    whose content changed."""
    axes = []
    for ax in fig.axes:
        legend = ax.get_legend()
        axes.append(
            {
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
                "xscale": ax.get_xscale(),
                "yscale": ax.get_yscale(),
                "xlim": _numbers(ax.get_xlim()),
                "ylim": _numbers(ax.get_ylim()),
                "lines": [
                    {
                        "label": line.get_label(),
                        "x": _as_numbers_or_text(line.get_xdata()),
                        "y": _as_numbers_or_text(line.get_ydata()),
                    }
                    for line in ax.get_lines()
                ],
                "collections": [_collection_data(collection) for collection in ax.collections],
                "bars": [
                    _numbers([p.get_x(), p.get_y(), p.get_width(), p.get_height()])
                    for p in ax.patches
                    if isinstance(p, Rectangle)
                ],
                "texts": [text.get_text() for text in ax.texts],
                "legend": [text.get_text() for text in legend.get_texts()] if legend else [],
                "tables": [
                    [cell.get_text().get_text() for _, cell in sorted(table.get_celld().items())] for table in ax.tables
                ],
            }
        )
    return {"axes": axes, "texts": [text.get_text() for text in fig.texts]}


def save_figure(fig, path: str | os.PathLike) -> Path:
    """Write `fig` atomically with fixed metadata, so identical inputs give identical bytes, and the data it
    draws next to it (`data_path`)."""
    tidy_figure(fig)
    path = Path(path)
    data = json.dumps(figure_data(fig), separators=(",", ":"), allow_nan=False, ensure_ascii=False) + "\n"
    with atomic_path(path, suffix=path.suffix) as tmp:
        fig.savefig(tmp, metadata=_NO_METADATA.get(path.suffix, {}), bbox_inches="tight")
        plt.close(fig)
        write_text(data_path(path), data)
    return path


def load_figure_inputs(named_inputs: dict) -> tuple[dict, dict]:
    """(tables, fits) from a rule's named inputs: .parquet or .csv → DataFrame, .json → Fit.

    A fit that could not be made (its JSON holds `{"error": …}`) is left out; figures say when a fit is missing.
    """
    tables, fits = {}, {}
    for name, path in named_inputs.items():
        if str(path).endswith(".parquet"):
            tables[name] = pd.read_parquet(path)
        elif str(path).endswith(".csv"):
            tables[name] = pd.read_csv(path, keep_default_na=False, na_values=[""])
        elif str(path).endswith(".json") and "error" not in json.loads(Path(path).read_text()):
            fits[name] = load_fit(path)
    return tables, fits


def resolve_function(reference: str):
    """`"module:name"` → the function it names."""
    module_name, function_name = reference.split(":")
    return getattr(importlib.import_module(module_name), function_name)


@dataclass(frozen=True)
class FigureSpec:
    """One declared figure (or table): what it reads and where it goes."""

    paper: str
    name: str
    function: str  # "module:name", called as function(tables, fits, **options)
    tables: dict = field(default_factory=dict)  # key -> "learning_curves" | "<study>" (its table) | "<study>/<table>"
    fits: str | None = None  # "<study>" (all its fits, keyed by fit name) or "<study>/<fit>" (that one)
    law_only: bool = False  # drawn from the paper's constants; the study's inputs added only where it runs
    frame: str | None = None  # "module:name" giving a table's rows: the target is then a CSV plus its rendering
    caption: str | None = None  # caption file (absolute, or relative to the workflow's directory); None:
    # workflow/report/<paper>_<name>.rst
    options: tuple[tuple[str, str], ...] = ()  # keyword arguments of the function: one function, several figures

    @property
    def target(self) -> str:
        return f"{self.paper}_{self.name}"

    @property
    def outputs(self) -> dict:
        png = {"png": f"figures/{self.paper}/{self.name}.png"}
        return {"csv": f"figures/{self.paper}/{self.name}.csv", **png} if self.frame else png


def figure(
    *,
    tables: dict | None = None,
    fits: str | None = None,
    law_only: bool = False,
    frame: bool = False,
    caption: str | None = None,
):
    """Declare the decorated function a figure of its module's paper (the module's `PAPER`, else its name).

    `tables` maps the function's table keys to artifacts, `fits` names the fits it reads; `law_only`
    figures are drawn even where that study does not run. `frame=True`: a table, whose rows `<name>_frame` gives.
    `caption` is relative to the module's file.
    """

    def declare(function):
        function.figure_declaration = {
            "tables": dict(tables or {}),
            "fits": fits,
            "law_only": law_only,
            "frame": frame,
            "caption": caption,
        }
        return function

    return declare


def declared_figures(module) -> list[FigureSpec]:
    """The figures `module` declares, in definition order."""
    paper = getattr(module, "PAPER", module.__name__.rsplit(".", 1)[-1])
    specs = []
    for name, function in vars(module).items():
        declaration = getattr(function, "figure_declaration", None)
        if declaration is None or getattr(function, "__module__", None) != module.__name__:
            continue
        caption = declaration["caption"]
        specs.append(
            FigureSpec(
                paper,
                name,
                f"{module.__name__}:{name}",
                declaration["tables"],
                declaration["fits"],
                declaration["law_only"],
                f"{module.__name__}:{name}_frame" if declaration["frame"] else None,
                str(Path(inspect.getfile(module)).parent / caption) if caption else None,
            )
        )
    return specs


def figure_modules(extra: list[str] = ()) -> list:
    """This package's figure modules, then the named `extra` ones (plug-in studies' `FIGURES`)."""
    names = [f"{__name__}.{info.name}" for info in pkgutil.iter_modules(__path__)]
    return [importlib.import_module(name) for name in dict.fromkeys([*names, *extra])]


def figure_inputs(spec: FigureSpec, tables: dict, fits: dict) -> dict | None:
    """A figure's named inputs: `tables` maps artifact ids to paths, `fits` maps each study to {fit name: path}.
    None when a figure that is not law-only reads an artifact this workflow does not make."""
    inputs = {}
    for key, artifact in spec.tables.items():
        if artifact not in tables:
            if spec.law_only:
                continue
            return None
        inputs[key] = tables[artifact]
    if spec.fits is not None:
        study, _, name = spec.fits.partition("/")
        available = {fit: path for fit, path in fits.get(study, {}).items() if not name or fit == name}
        if not available and not spec.law_only:
            return None
        inputs.update(available)
    return inputs
