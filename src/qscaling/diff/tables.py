"""Metric and claims tables, compared column by column: numbers within tolerance or within their measured noise,
words exactly, verdicts that float noise alone flipped reported as borderline."""

import math
import re

import numpy as np
import pandas as pd

from qscaling.diff.artifacts import MAX_DETAILS
from qscaling.diff.tolerances import Tolerances
from qscaling.diff.values import NUMBER, is_close, same_value, scalars_close, text_within

# The root-mean-square change of a noise column is judged from this many rows up: over a handful of rows one
# flipped rounding alone decides it.
NOISE_RMS_MIN_ROWS = 20
# A row says it was derived from a fit its data do not pin down (`qscaling.laws.result.ILL_CONDITIONED`) by a True
# `ill_conditioned` column or by this word in its `statistic` (a claims row).
ILL_CONDITIONED_MARK = "ill-conditioned"


def compare_tables(a: pd.DataFrame, b: pd.DataFrame, tol: Tolerances) -> tuple[bool, list[str]]:
    """(within tolerance, details). Rows are compared in order: write_table fixes the row order."""
    if list(a.columns) != list(b.columns):
        only_a = [c for c in a.columns if c not in b.columns]
        only_b = [c for c in b.columns if c not in a.columns]
        return False, [
            f"columns differ: only in A {only_a}, only in B {only_b}" if only_a or only_b else "column order differs"
        ]
    if len(a) != len(b):
        return False, [f"row count {len(a)} vs {len(b)}"]
    within, details = True, []
    unidentified = _unidentified_rows(a, b)
    if unidentified.any():
        details.append(
            f"{int(unidentified.sum())} rows derived from an ill-conditioned fit on both sides: their numbers are "
            "not compared, their words and verdicts are"
        )
    for column in a.columns:
        if column in tol.ignored:
            continue
        numeric = (
            pd.api.types.is_numeric_dtype(a[column])
            and pd.api.types.is_numeric_dtype(b[column])
            and not pd.api.types.is_bool_dtype(a[column])
        )
        compare_column = _compare_numbers if numeric else _compare_values
        ok, more = compare_column(a, b, column, unidentified, tol)
        within, details = within and ok, details + more
    return within, details


def _compare_numbers(a: pd.DataFrame, b: pd.DataFrame, column: str, unidentified: np.ndarray, tol: Tolerances):
    """A numeric column: each row within tolerance, or the column within its measured noise (`noise_columns`);
    rows derived from an ill-conditioned fit on both sides are not compared."""
    rtol, atol = tol.for_column(column)
    left, right = a[column].to_numpy().astype(float), b[column].to_numpy().astype(float)
    both_nan = np.isnan(left) & np.isnan(right)
    bad = ~both_nan & ~is_close(left, right, rtol, atol) & ~unidentified
    exact = bool(np.all(both_nan | (left == right)))
    noise = _within_noise(a, b, column, bad, tol) if bad.any() else None
    if noise is not None and noise[0]:
        return True, [f"{column}: {int(bad.sum())} of {len(a)} rows beyond rtol={rtol:g} atol={atol:g}, {noise[1]}"]
    if bad.any():
        rows = np.flatnonzero(bad)
        # A value against NaN is the largest difference there is.
        worst = rows[np.argmax(np.nan_to_num(np.abs(left[rows] - right[rows]), nan=np.inf))]
        return False, [
            f"{column}: {len(rows)} of {len(a)} rows beyond rtol={rtol:g} atol={atol:g}; "
            f"largest at row {worst}: {left[worst]:.10g} vs {right[worst]:.10g}" + (f"; {noise[1]}" if noise else "")
        ]
    if not exact:
        return True, [f"{column}: within rtol={rtol:g} atol={atol:g} (max |Δ| {np.nanmax(np.abs(left - right)):.3g})"]
    return True, []


def _compare_values(a: pd.DataFrame, b: pd.DataFrame, column: str, unidentified: np.ndarray, tol: Tolerances):
    """Any other column: equal cells, texts that differ only in numbers within tolerance (whatever numbers, on rows
    derived from an ill-conditioned fit on both sides), or verdicts that float noise alone flipped."""
    left, right = a[column].to_numpy(), b[column].to_numpy()
    unequal = [i for i in range(len(a)) if not same_value(left[i], right[i])]
    rtol, atol = tol.for_column(column)
    beyond = [
        i
        for i in unequal
        if not (
            isinstance(left[i], str)
            and isinstance(right[i], str)
            and text_within(left[i], right[i], rtol, atol, numbers=not unidentified[i])
        )
    ]
    borderline = [i for i in beyond if _borderline_verdict(a, b, column, i, tol)]
    beyond = [i for i in beyond if i not in borderline]
    details = []
    if borderline:
        shown = ", ".join(f"row {i}: {left[i]!r} → {right[i]!r}" for i in borderline[:MAX_DETAILS])
        details.append(
            f"{column}: {len(borderline)} borderline verdicts ({shown}): a CI bound within tolerance "
            f"crosses {'0' if column == 'verdict' else 'the paper value'}"
        )
    if beyond:
        shown = ", ".join(f"row {i}: {left[i]!r} → {right[i]!r}" for i in beyond[:MAX_DETAILS])
        details.append(f"{column}: {len(beyond)} rows differ ({shown})")
    quoting = [i for i in unequal if i not in beyond and i not in borderline]
    if quoting:
        details.append(f"{column}: {len(quoting)} rows quote numbers within rtol={rtol:g} atol={atol:g}")
    return not beyond, details


def _unidentified_rows(a: pd.DataFrame, b: pd.DataFrame) -> np.ndarray:
    """Rows both tables mark as derived from an ill-conditioned fit. Such a fit's parameters land wherever float
    noise puts them (its JSON is judged by its predictions alone), so a quantity computed from them — a claim's
    statistic, P* of each bootstrap refit — has no value to compare; what it says in words, and the verdict, does."""

    def marked(table: pd.DataFrame) -> np.ndarray:
        mark = np.zeros(len(table), dtype=bool)
        if "ill_conditioned" in table.columns:
            mark |= table["ill_conditioned"].fillna(False).astype(bool).to_numpy()
        if "statistic" in table.columns:
            mark |= table["statistic"].astype(str).str.contains(ILL_CONDITIONED_MARK, regex=False).to_numpy()
        return mark

    return marked(a) & marked(b)


_INTERVAL = re.compile(rf"^\[({NUMBER.pattern}), ({NUMBER.pattern})\]")


def _interval_of(text) -> tuple[float, float] | None:
    match = _INTERVAL.match(text) if isinstance(text, str) else None
    return None if match is None else tuple(float(bound.replace("−", "-")) for bound in match.groups())


def _borderline_verdict(a: pd.DataFrame, b: pd.DataFrame, column: str, row: int, tol: Tolerances) -> bool:
    """A claims verdict decided by where its CI ("[low, high] …") lies: 0 for the direction (`verdict`), the
    paper's value for `magnitude`. A flip is borderline, not a changed finding, when both CIs agree within the
    `ci` tolerance and a bound crosses that threshold: float noise alone then decides the verdict."""
    if column not in ("verdict", "magnitude") or "ci" not in a.columns or "ci" not in b.columns:
        return False
    threshold = 0.0
    if column == "magnitude":
        threshold = pd.to_numeric(a.at[row, "paper"], errors="coerce") if "paper" in a.columns else math.nan
    ci_a, ci_b = _interval_of(a.at[row, "ci"]), _interval_of(b.at[row, "ci"])
    if ci_a is None or ci_b is None or pd.isna(threshold):
        return False
    rtol, atol = tol.for_column("ci")
    agree = all(scalars_close(x, y, rtol, atol) for x, y in zip(ci_a, ci_b))
    crosses = any((x - threshold) * (y - threshold) <= 0 for x, y in zip(ci_a, ci_b))
    return agree and crosses


def _within_noise(a: pd.DataFrame, b: pd.DataFrame, column: str, bad: np.ndarray, tol: Tolerances):
    """For a column measured with a standard error (`noise_columns`): (within, detail) from the changes in units
    of the two rows' combined SE over the rows that have one, or None when the column has none. Cross-machine
    float noise flips a few roundings (a GPTQ column, a W8A8 activation) and moves those rows by up to ~1.5 SE;
    a change of method moves every row of it: the largest and the root-mean-square change tell them apart."""
    se_column = tol.noise_columns.get(column)
    if se_column is None or se_column not in a.columns or se_column not in b.columns:
        return None
    change = np.abs(a[column].to_numpy(float) - b[column].to_numpy(float))
    se = np.hypot(a[se_column].to_numpy(float), b[se_column].to_numpy(float))
    measured = se > 0
    if (bad & ~measured).any():
        return False, f"{int((bad & ~measured).sum())} moved rows have no {se_column}"
    z = change[measured] / se[measured]
    largest, rms = float(z.max()), float(np.sqrt(np.mean(z**2)))
    rms_applies = len(z) >= NOISE_RMS_MIN_ROWS
    within = largest <= tol.noise_max and (rms <= tol.noise_rms or not rms_applies)
    rms_text = (
        f"rms {rms:.3g} {'≤' if rms <= tol.noise_rms else '>'} {tol.noise_rms:g}"
        if rms_applies
        else f"rms {rms:.3g} (not judged below {NOISE_RMS_MIN_ROWS} rows)"
    )
    return within, (
        f"in units of {se_column} over {len(z)} rows: largest {largest:.3g} "
        f"{'≤' if largest <= tol.noise_max else '>'} {tol.noise_max:g}, {rms_text}"
    )
