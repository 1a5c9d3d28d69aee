"""The one fitter that serves every law (Hoffmann et al. 2022, App. D.2, as replicated by Besiroglu et al. 2024).

A Huber loss (δ = 1e-3, summed over points; a law of a degradation sets its own, DEGRADATION_HUBER_DELTA) on
log(prediction) − log(observation) — or prediction − observation for a law fitted on linear residuals, whose target
noise makes negative (Law.residuals) — minimised with L-BFGS-B from a grid of starting points; uncertainty comes from a
seeded bootstrap that re-fits resampled runs. A fit records the points it was fitted on and how well the data pin its
parameters down (the Jacobian's condition number), so that two fits can be compared by what they predict.
"""

import dataclasses
import math
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from qscaling.laws.law import Law
from qscaling.laws.optimiser import JACOBIAN_STEP, job_chunks, parallel, run_starts, to_natural
from qscaling.laws.resampling import bootstrap_intervals, leave_one_group_out
from qscaling.laws.result import ILL_CONDITIONED, Fit
from qscaling.laws.starts import resolve_starts


def _checked_columns(law: Law, table: pd.DataFrame, target: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The law's input columns and the target of `table`, refused where the fit cannot use them."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"fit {law.name}: table must be a pandas DataFrame, got {type(table).__name__}")
    if target not in table.columns:
        raise ValueError(f"fit {law.name}: target column {target!r} missing; columns are {list(table.columns)}")
    columns = law.columns(table)
    y = table[target].to_numpy(dtype=float)
    for name, array in {**columns, target: y}.items():
        bad = int(np.isnan(array).sum())
        if bad:
            raise ValueError(f"fit {law.name}: column {name!r} has {bad} NaN value(s); drop or fill them first")
    if not np.all(np.isfinite(y)):
        raise ValueError(f"fit {law.name}: target {target!r} has {int((~np.isfinite(y)).sum())} non-finite value(s)")
    non_positive = int((y <= 0).sum())
    if non_positive and law.residuals == "log":
        raise ValueError(
            f"fit {law.name}: target {target!r} must be > 0 (the fit takes its log); "
            f"{non_positive} row(s) are <= 0 — drop points below the noise floor explicitly before fitting"
        )
    if len(y) < len(law.params):
        raise ValueError(f"fit {law.name}: need at least {len(law.params)} points (one per parameter), got {len(y)}")
    return columns, y


def fit(
    law: Law,
    table: pd.DataFrame,
    *,
    target: str | None = None,
    starts=None,
    bootstrap: int = 200,
    group_col: str | None = "N",
    run_col: str | None = None,
    seed: int = 0,
    n_jobs: int = 1,
    ci_level: float = 0.95,
    fixed: Mapping[str, float] | None = None,
) -> Fit:
    """Fit `law` to `table` and measure how well it is determined.

    starts: None (law default), an int k (k^p grid over each parameter's start range), a list of param dicts,
    or an array (k, p). bootstrap: number of resamples (0 skips CIs); resampling draws runs — rows, or the
    distinct values of `run_col` when one evaluation table holds several rows per run. group_col: the column
    whose values are left out one at a time for the held-out error (None skips it). n_jobs: worker
    processes; results do not depend on it (every start and resample is seeded and solved independently).
    fixed: name -> value of parameters held at that value instead of fitted; `starts` and the one-point-per-
    parameter minimum then concern the free parameters only, and a fixed parameter's CI is (value, value).
    """
    if not isinstance(law, Law):
        raise TypeError(f"fit: law must be a Law (e.g. qscaling.laws.LAWS['chinchilla']), got {type(law).__name__}")
    if fixed:
        options = dict(starts=starts, bootstrap=bootstrap, group_col=group_col, run_col=run_col, seed=seed)
        return _fit_with_fixed(law, table, fixed, target=target, n_jobs=n_jobs, ci_level=ci_level, **options)
    target = target or law.target
    columns, y = _checked_columns(law, table, target)
    _check_options(law, bootstrap, ci_level)
    fit_y = law.residual_space(y)
    z_bounds, z_starts = _optimiser_bounds_and_starts(law, starts, seed)
    objective, z_best = _best_start(law, columns, fit_y, z_bounds, z_starts, n_jobs)
    params = dict(zip(law.param_names, map(float, to_natural(law, z_best))))
    quality = _quality(law, columns, y, z_best, params)
    ci, standard_errors = bootstrap_intervals(
        law, table, columns, fit_y, z_bounds, z_best, bootstrap, run_col, seed, n_jobs, ci_level
    )
    heldout, by_group = leave_one_group_out(law, table, columns, y, z_bounds, z_best, group_col, quality["notes"])
    return Fit(
        law=law,
        params=params,
        ci=ci,
        standard_errors=standard_errors,
        **quality,
        heldout_relative_error=heldout,
        heldout_by_group=by_group,
        target=target,
        group_col=group_col,
        n_points=len(y),
        n_starts=len(z_starts),
        n_bootstrap=bootstrap,
        seed=seed,
        objective=objective,
        ci_level=ci_level,
        points={"inputs": {name: array.tolist() for name, array in columns.items()}, "observed": y.tolist()},
    )


def _check_options(law: Law, bootstrap: int, ci_level: float) -> None:
    """`fit`'s resample count and CI level, refused where out of range."""
    if bootstrap < 0:
        raise ValueError(f"fit {law.name}: bootstrap must be >= 0, got {bootstrap}")
    if not 0 < ci_level < 1:
        raise ValueError(f"fit {law.name}: ci_level must be in (0, 1), got {ci_level}")


def _optimiser_bounds_and_starts(law: Law, starts, seed: int) -> tuple[list[tuple[float, float]], np.ndarray]:
    """The parameters' bounds and the starting points (`fit`'s `starts`) in optimiser coordinates."""
    z_bounds = [(float(p.to_optimiser(p.low)), float(p.to_optimiser(p.high))) for p in law.params]
    natural_starts = resolve_starts(law, starts, seed)
    z_starts = np.column_stack([p.to_optimiser(natural_starts[:, i]) for i, p in enumerate(law.params)])
    return z_bounds, z_starts


def _best_start(law: Law, columns, fit_y, z_bounds, z_starts, n_jobs) -> tuple[float, np.ndarray]:
    """L-BFGS-B from every start (unit weights): the lowest objective and its optimum, in optimiser coordinates."""
    unit_weight = np.ones_like(fit_y)
    outcomes = parallel(run_starts, (law, columns, fit_y, unit_weight, z_bounds), job_chunks(z_starts, n_jobs), n_jobs)
    objectives = np.concatenate([values for values, _ in outcomes])
    optima = np.concatenate([z for _, z in outcomes])
    if not np.any(np.isfinite(objectives)):
        raise ValueError(f"fit {law.name}: no starting point gave finite positive predictions; check inputs/bounds")
    best = int(np.argmin(objectives))  # first of equals: independent of how starts were split among workers
    return float(objectives[best]), optima[best]


def _quality(law: Law, columns, y: np.ndarray, z_best: np.ndarray, params: Mapping[str, float]) -> dict:
    """How well the optimum fits (R², RMSE in the target's units) and how well the data pin it down: the Jacobian's
    condition number and notes on parameters at a bound and on ill-conditioning."""
    residual = law.evaluate_many(to_natural(law, z_best[None]), columns)[0] - y
    condition = _jacobian_condition(law, columns, z_best, params)
    notes = _bound_notes(law, params)
    if condition is not None and not condition <= ILL_CONDITIONED:
        notes.append(
            f"ill-conditioned: Jacobian condition number {condition:.3g} > {ILL_CONDITIONED:g}; the data do "
            "not pin down every parameter — read its predictions and CIs, not its point values"
        )
    return {
        "r2": float(1 - np.sum(residual**2) / np.sum((y - y.mean()) ** 2)),
        "rmse": float(np.sqrt(np.mean(residual**2))),
        "jacobian_condition": condition,
        "notes": notes,
    }


class _WithFixed:
    """A law's function with some parameters supplied as constants (a class, not a closure: workers pickle it)."""

    def __init__(self, function: Callable, fixed: Mapping[str, float]):
        self.function, self.fixed = function, dict(fixed)

    def __call__(self, params, inputs):
        return self.function({**self.fixed, **params}, inputs)


def _fit_with_fixed(law: Law, table, fixed: Mapping[str, float], **options) -> Fit:
    """Fit the law whose parameters are the free ones, then report it as a fit of `law` with the fixed values."""
    unknown = [name for name in fixed if name not in law.param_names]
    if unknown:
        raise ValueError(f"fit {law.name}: fixed param {unknown[0]!r} unknown; params are {list(law.param_names)}")
    for param in law.params:
        if param.name in fixed and not param.low <= fixed[param.name] <= param.high:
            raise ValueError(
                f"fit {law.name}: fixed {param.name} = {fixed[param.name]:g} lies outside its bounds "
                f"({param.low:g}, {param.high:g})"
            )
    free = tuple(param for param in law.params if param.name not in fixed)
    if not free:
        raise ValueError(f"fit {law.name}: every parameter is fixed; nothing left to fit")
    values = {name: float(value) for name, value in fixed.items()}
    reduced = fit(dataclasses.replace(law, params=free, function=_WithFixed(law.function, values)), table, **options)
    in_order = law.param_names
    return dataclasses.replace(
        reduced,
        law=law,
        params={name: values[name] if name in values else reduced.params[name] for name in in_order},
        ci={name: (values[name], values[name]) if name in values else reduced.ci[name] for name in in_order},
        standard_errors={name: 0.0 if name in values else reduced.standard_errors[name] for name in in_order},
        notes=[f"{name} = {value:.6g} fixed, not fitted" for name, value in values.items()] + reduced.notes,
    )


def profile(law: Law, table, name: str, values, **options) -> pd.DataFrame:
    """`law` refitted with `name` held at each of `values`, every other parameter free (no bootstrap): one row per
    value with every parameter, the objective, the RMSE of the loss and the held-out error. Where the objective is
    flat over a range of `name`, the data do not identify it there — and the other parameters' runs along that
    ridge are what is left undetermined with it. `options` go to `fit` (group_col, run_col, starts, seed)."""
    rows = []
    for value in values:
        result = fit(law, table, fixed={name: float(value)}, bootstrap=0, **options)
        rows.append(
            {
                **result.params,
                "objective": result.objective,
                "rmse": result.rmse,
                "heldout_relative_error": result.heldout_relative_error,
            }
        )
    return pd.DataFrame(rows)


def _jacobian_condition(law: Law, columns, z_best: np.ndarray, params: Mapping[str, float]) -> float | None:
    """Condition number of d prediction / d(optimiser coordinates), the prediction in the law's residual space (log
    for most laws), over the parameters off their bounds."""
    on_bound = {note.split(" = ")[0] for note in _bound_notes(law, params)}
    free = [i for i, name in enumerate(law.param_names) if name not in on_bound]
    if not free:
        return None
    shifted = np.vstack([z_best, z_best + JACOBIAN_STEP * np.eye(len(z_best))[free]])
    with np.errstate(all="ignore"):
        prediction = law.residual_space(law.evaluate_many(to_natural(law, shifted), columns))
    jacobian = (prediction[1:] - prediction[0]) / JACOBIAN_STEP  # (free, n)
    if not np.all(np.isfinite(jacobian)):
        return math.inf
    singular = np.linalg.svd(jacobian, compute_uv=False)
    return float(singular[0] / singular[-1]) if singular[-1] > 0 else math.inf


def _bound_notes(law: Law, params: Mapping[str, float]) -> list[str]:
    """A parameter sitting on its bound means the optimum lies outside them: say so rather than hide it."""
    notes = []
    for param in law.params:
        value, low, high = params[param.name], param.low, param.high
        scale = (lambda v: math.log(v)) if param.log else (lambda v: v)
        span = scale(high) - scale(low)
        if min(scale(value) - scale(low), scale(high) - scale(value)) < 1e-6 * span:
            notes.append(f"{param.name} = {value:.6g} is at its bound ({low:g}, {high:g})")
    return notes
