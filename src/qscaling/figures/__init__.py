"""Figures: pure functions `figN(tables, fits) -> Figure`, one module per paper, plus deterministic saving.

A figure function reads tidy tables (pandas DataFrames) and fitted laws; it never trains, quantizes or fits.
"""

import json
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
    fig.text(0.01, 0.005, text, fontsize=6, color="0.35", ha="left", va="bottom")


def save_figure(fig, path: str | os.PathLike) -> Path:
    """Write `fig` atomically with fixed metadata, so identical inputs give identical bytes."""
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
