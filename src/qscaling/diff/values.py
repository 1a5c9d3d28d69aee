"""Numbers, texts that quote numbers, and JSON documents, compared within tolerances."""

import math
import re
from dataclasses import replace

import numpy as np
import pandas as pd

from qscaling.diff.tolerances import Tolerances

NUMBER = re.compile(r"[-+−]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def is_close(a, b, rtol: float, atol: float):
    """|a − b| ≤ atol + rtol·min(|a|, |b|), elementwise: relative to the smaller magnitude, so the order of the
    two runs does not matter and rtol = 1 means "within a factor 2 either way". atol is a floor for values that
    are exactly zero on one side; elsewhere rtol governs, however small the values (a fitted C_T ~1e-8)."""
    return np.abs(a - b) <= atol + rtol * np.minimum(np.abs(a), np.abs(b))


def scalars_close(a, b, rtol: float, atol: float) -> bool:
    """`is_close` for two scalars; two missing values (None / NaN) match each other."""
    if _is_missing(a) or _is_missing(b):
        return _is_missing(a) and _is_missing(b)
    return bool(is_close(a, b, rtol, atol))


def numbers_and_words(text: str) -> tuple[list[float], list[str]]:
    """The numbers a text quotes, and the words around them."""
    words = NUMBER.split(text)
    numbers = [float(match.replace("−", "-")) for match in NUMBER.findall(text)]
    return numbers, words


def text_within(a: str, b: str, rtol: float, atol: float, numbers: bool = True) -> bool:
    """Two texts that differ only in the numbers they quote, each within tolerance ('slope = 1.561 (5 points)');
    with `numbers` False, whatever numbers they quote."""
    numbers_a, words_a = numbers_and_words(a)
    numbers_b, words_b = numbers_and_words(b)
    return words_a == words_b and (
        not numbers or all(scalars_close(x, y, rtol, atol) for x, y in zip(numbers_a, numbers_b))
    )


def same_value(a, b) -> bool:
    """Two table cells equal: arrays element by element, missing values (None, NA, NaN) matching each other."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if a is None or b is None or a is pd.NA or b is pd.NA:
        return (a is None or a is pd.NA) and (b is None or b is pd.NA)
    return a == b or (pd.isna(a) and pd.isna(b))


def compare_json(a, b, tol: Tolerances, where: str = "") -> tuple[bool, list[str]]:
    """Any other JSON document: numbers within tolerance (per key name), everything else exactly."""
    if isinstance(a, dict) and isinstance(b, dict):
        details, within = [], True
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                within = False
                details.append(f"{where}{key}: only in {'B' if key not in a else 'A'}")
                continue
            rtol, atol = tol.for_column(str(key))
            key_tol = replace(tol, rtol=rtol, atol=atol)
            ok, more = compare_json(a[key], b[key], key_tol, f"{where}{key}.")
            within, details = within and ok, details + more
        return within, details
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        details, within = [], True
        for index, (left, right) in enumerate(zip(a, b)):
            ok, more = compare_json(left, right, tol, f"{where}{index}.")
            within, details = within and ok, details + more
        return within, details
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        if scalars_close(float(a), float(b), tol.rtol, tol.atol):
            return True, []
        return False, [f"{where.rstrip('.')}: {a!r} vs {b!r} beyond rtol={tol.rtol:g} atol={tol.atol:g}"]
    if a == b or (isinstance(a, str) and isinstance(b, str) and text_within(a, b, tol.rtol, tol.atol)):
        return True, []
    return False, [f"{where.rstrip('.')}: {a!r} vs {b!r}"]
