"""Figures, compared by their pixels and, where allowed, by the structure of what they draw (their .data.json)."""

import json
import shutil
import tempfile
from pathlib import Path

from qscaling.diff.artifacts import FIGURE_DATA_SUFFIX
from qscaling.diff.tolerances import Tolerances
from qscaling.diff.values import numbers_and_words


def figure_structure(doc):
    """A figure's data record with every number replaced by a placeholder and texts by their words: what stays
    when only the numbers drawn move."""
    if isinstance(doc, dict):
        return {key: figure_structure(value) for key, value in doc.items()}
    if isinstance(doc, list):
        if all(item is None or isinstance(item, (int, float)) for item in doc):
            return ("numbers", len(doc))
        return [figure_structure(item) for item in doc]
    if isinstance(doc, str):
        return tuple(numbers_and_words(doc)[1])
    return "number" if isinstance(doc, (int, float)) or doc is None else doc


def compare_figure_data(doc_a: dict, doc_b: dict) -> tuple[bool, list[str]]:
    """Two records of what a figure draws: the same structure (axes, labels, how many lines, points, texts)."""
    if figure_structure(doc_a) == figure_structure(doc_b):
        return True, ["same structure (axes, labels, lines, points, texts); the numbers drawn moved"]
    axes_a, axes_b = doc_a.get("axes", []), doc_b.get("axes", [])
    if len(axes_a) != len(axes_b):
        return False, [f"{len(axes_a)} vs {len(axes_b)} axes"]
    for index, (a, b) in enumerate(zip(axes_a, axes_b)):
        for key in a:
            if figure_structure(a.get(key)) != figure_structure(b.get(key)):
                return False, [f"axes {index} {key} differ: {str(a.get(key))[:120]} vs {str(b.get(key))[:120]}"]
    return False, ["figure texts differ"]


def _figure_data_of(path: Path):
    data = path.with_suffix(FIGURE_DATA_SUFFIX)
    return json.loads(data.read_text()) if data.is_file() else None


def compare_figures(path_a: Path, path_b: Path, tol: Tolerances) -> tuple[bool, list[str]]:
    """Bytes differ (checked by the caller): the RMS pixel difference from matplotlib's image comparison. With
    `figure_structure`, a figure beyond figure-tol whose drawn data moved (its inputs did, and are compared as
    artifacts of their own) but kept their structure is within tolerance; one whose data are byte-identical but
    whose pixels moved has changed how it draws."""
    within, details = _pixel_difference(path_a, path_b, tol)
    if within or not tol.figure_structure:
        return within, details
    data_a, data_b = _figure_data_of(path_a), _figure_data_of(path_b)
    if data_a is None or data_b is None:
        return False, details + ["no data record (.data.json) beside both figures to compare structure"]
    if data_a == data_b:
        return False, details + ["the data drawn are identical: the drawing itself changed"]
    same, more = compare_figure_data(data_a, data_b)
    return same, details + more


def _pixel_difference(path_a: Path, path_b: Path, tol: Tolerances) -> tuple[bool, list[str]]:
    # Imported only once a figure's bytes differ: importing matplotlib.testing.compare runs ghostscript, inkscape
    # and ImageMagick to find which converters exist.
    from matplotlib.testing.compare import comparable_formats, compare_images
    from matplotlib.testing.exceptions import ImageComparisonFailure

    if path_a.suffix.lstrip(".") not in comparable_formats():
        return False, [f"bytes differ and {path_a.suffix} cannot be rasterised here (no converter installed)"]
    # compare_images writes converted and diff images next to its inputs: work on copies, never in a run tree.
    with tempfile.TemporaryDirectory() as scratch:
        expected = shutil.copyfile(path_a, Path(scratch) / f"a{path_a.suffix}")
        actual = shutil.copyfile(path_b, Path(scratch) / f"b{path_b.suffix}")
        try:
            result = compare_images(str(expected), str(actual), tol=0, in_decorator=True)
        except ImageComparisonFailure as error:  # raised when the image sizes differ
            return False, [str(error).splitlines()[0]]
    rms = 0.0 if result is None else float(result["rms"])
    within = rms <= tol.figure_tol
    return within, [f"RMS {rms:.4f} {'≤' if within else '>'} figure-tol {tol.figure_tol:g}"]
