"""Fitted laws (the JSON `Fit.to_json` writes), compared by parameters, or by predictions where the data do not pin
the parameters down."""

import json
import math
from pathlib import Path

import numpy as np

from qscaling.diff.tolerances import Tolerances
from qscaling.diff.values import scalars_close
from qscaling.laws import LAWS
from qscaling.laws.result import is_fit_dict


def compare_fits(a: dict, b: dict, tol: Tolerances) -> tuple[bool, list[str]]:
    """Fitted laws: same law and formula, then the same parameters within tolerance — or, where parameters
    moved (a fit the data pin down poorly trades one parameter against another), the same predictions at
    every point either fit saw, within `prediction_tol`, with every parameter's CIs overlapping."""
    if a.get("law") != b.get("law") or a.get("formula") != b.get("formula"):
        return False, [f"law {a.get('law')!r} vs {b.get('law')!r}"]
    params_a, params_b = a.get("params", {}), b.get("params", {})
    if set(params_a) != set(params_b):
        return False, [f"parameters {sorted(params_a)} vs {sorted(params_b)}"]
    moved, details = [], []
    for name in params_a:
        rtol, atol = tol.for_column(name)
        value_a, value_b = params_a[name], params_b[name]
        if not scalars_close(value_a, value_b, rtol, atol):
            moved.append(name)
            overlap = _intervals_overlap(a.get("ci", {}).get(name), b.get("ci", {}).get(name))
            ci_note = {True: "CIs overlap", False: "CIs do not overlap", None: "no CIs"}[overlap]
            details.append(f"{name}: {value_a!r} vs {value_b!r} beyond rtol={rtol:g} atol={atol:g} ({ci_note})")
        elif value_a != value_b:
            details.append(f"{name}: within tolerance ({value_a!r} vs {value_b!r})")
    if not moved:
        within = True
        for metric in ("r2", "rmse", "heldout_relative_error"):
            rtol, atol = tol.for_column(metric)
            if not scalars_close(a.get(metric), b.get(metric), rtol, atol):
                within = False
                details.append(f"{metric}: {a.get(metric)!r} vs {b.get(metric)!r} beyond rtol={rtol:g} atol={atol:g}")
        return within, details
    agree, prediction_details = _same_predictions(a, b, tol)
    if all(_ill_conditioned(doc) for doc in (a, b)):
        # The data do not pin such a fit's parameters down (its notes say so): where they land depends on float
        # noise, so only what the data do determine, the predictions, can be compared.
        details.extend([*prediction_details, "both fits ill-conditioned: judged by their predictions alone"])
        return agree, details
    overlapping = all(_intervals_overlap(a.get("ci", {}).get(n), b.get("ci", {}).get(n)) for n in moved)
    details.extend(prediction_details)
    if not overlapping:
        details.append("a moved parameter's CIs do not overlap")
    in_noise = True
    for name in moved:
        se = math.hypot(*(doc.get("standard_errors", {}).get(name) or math.nan for doc in (a, b)))
        z = abs(params_a[name] - params_b[name]) / se if se > 0 else math.inf
        if not z <= tol.noise_max:
            in_noise = False
            details.append(f"{name} moved by {z:.3g} bootstrap SEs > {tol.noise_max:g}")
    return agree and overlapping and in_noise, details


def _ill_conditioned(doc: dict) -> bool:
    """Whether a fit JSON's notes flag its Jacobian as ill-conditioned (`qscaling.laws.result.ILL_CONDITIONED`)."""
    return any(note.startswith("ill-conditioned") for note in doc.get("notes", []))


def _same_predictions(a: dict, b: dict, tol: Tolerances) -> tuple[bool, list[str]]:
    """Both parameter sets evaluated at the points of both fits: the largest relative difference."""
    law = LAWS.get(a["law"])
    points = [doc.get("points", {}).get("inputs") for doc in (a, b)]
    if law is None or not all(points):
        return False, ["parameters moved and the fits record no points to compare predictions at"]
    inputs = {name: np.concatenate([np.asarray(p[name], dtype=float) for p in points]) for name in law.inputs}
    with np.errstate(all="ignore"):
        predicted_a, predicted_b = law(a["params"], inputs), law(b["params"], inputs)
    change = np.abs(predicted_a - predicted_b) / np.maximum(np.abs(predicted_b), np.finfo(float).tiny)
    worst = float(np.max(change)) if change.size else 0.0
    within = bool(np.all(np.isfinite(change))) and worst <= tol.prediction_tol
    return within, [
        f"predictions at {change.size} points differ by ≤ {worst:.3g} (relative) "
        f"{'≤' if within else '>'} prediction-tol {tol.prediction_tol:g}"
    ]


def _intervals_overlap(ci_a, ci_b) -> bool | None:
    if not ci_a or not ci_b or None in (*ci_a, *ci_b):
        return None
    return max(ci_a[0], ci_b[0]) <= min(ci_a[1], ci_b[1])


def is_fit_file(path: Path) -> bool:
    """Whether a JSON file holds a fitted law (one that does not parse does not)."""
    try:
        return is_fit_dict(json.loads(path.read_text()))
    except json.JSONDecodeError:
        return False
