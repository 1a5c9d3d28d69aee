"""Figures: pure functions `figN(tables, fits) -> Figure`, one module per paper, plus deterministic saving.

A figure function reads tidy tables (pandas DataFrames) and fitted laws; it never trains, quantizes or fits.
"""

import json
import math
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

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


def add_footer(fig, text: str) -> None:
    """A small note under the axes: which constants, data or scale produced the figure."""
    # Below the figure's own area: saving with bbox_inches="tight" grows the canvas to include it, so it never
    # overlaps the x label.
    fig.text(0.01, -0.01, text, fontsize=6, color="0.35", ha="left", va="top")


def compact_number(value: float) -> str:
    """2000000 → '2M', 250000 → '250k', 0.003 → '0.003': short tick labels for token and parameter counts."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def _tidy_log_axes(fig) -> None:
    """Compact labels on log axes left at matplotlib's defaults; minor labels (×2, ×5) only on short spans,
    where the defaults would print overlapping '3×10^4'-style labels."""
    from matplotlib.ticker import FuncFormatter, LogFormatterSciNotation

    for ax in fig.axes:
        for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if axis.get_scale() != "log" or not isinstance(axis.get_major_formatter(), LogFormatterSciNotation):
                continue
            low, high = sorted(abs(v) for v in limits)
            short = low > 0 and math.log10(high / low) < 1.5

            def minor(value, _):
                mantissa = round(value / 10 ** math.floor(math.log10(value))) if value > 0 else 0
                return compact_number(value) if short and mantissa in (2, 5) else ""

            axis.set_major_formatter(FuncFormatter(lambda value, _: compact_number(value)))
            axis.set_minor_formatter(FuncFormatter(minor))


def save_figure(fig, path: str | os.PathLike) -> Path:
    """Write `fig` atomically with fixed metadata, so identical inputs give identical bytes."""
    _tidy_log_axes(fig)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
    fig.savefig(tmp, metadata=_NO_METADATA.get(path.suffix, {}), bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)
    return path


def load_figure_inputs(named_inputs: dict) -> tuple[dict, dict]:
    """(tables, fits) from a rule's named inputs: .parquet → DataFrame, .json → Fit.

    A fit that could not be made (its JSON holds `{"error": …}`) is left out; figures say when a fit is missing.
    """
    import pandas as pd

    tables, fits = {}, {}
    for name, path in named_inputs.items():
        if str(path).endswith(".parquet"):
            tables[name] = pd.read_parquet(path)
        elif str(path).endswith(".json") and "error" not in json.loads(Path(path).read_text()):
            from qscaling.laws import load_fit

            fits[name] = load_fit(path)
    return tables, fits


def resolve_function(reference: str):
    """`"module:name"` → the function it names."""
    import importlib

    module_name, function_name = reference.split(":")
    return getattr(importlib.import_module(module_name), function_name)
