"""Refits on reweighted data: bootstrap CIs over resampled runs and the leave-one-group-out held-out error."""

import math

import numpy as np
import pandas as pd

from qscaling.laws.optimiser import job_chunks, minimise, one_blas_thread, parallel, run_resamples, to_natural


def bootstrap_intervals(law, table, columns, fit_y, z_bounds, z_best, count, run_col, seed, n_jobs, ci_level):
    """(CI, standard error) per parameter from `count` refits, each started at the optimum `z_best`, on runs
    drawn with replacement (rows, or the distinct values of `run_col`); NaN when `count` is 0."""
    names = law.param_names
    if count == 0:
        return {name: (math.nan, math.nan) for name in names}, {name: math.nan for name in names}
    if run_col is None:
        unit_of_row = np.arange(len(fit_y))
    else:
        if run_col not in table.columns:
            raise ValueError(f"fit {law.name}: run_col {run_col!r} missing; columns are {list(table.columns)}")
        unit_of_row, _ = pd.factorize(table[run_col])
    n_units = int(unit_of_row.max()) + 1
    rng = np.random.default_rng(seed)
    # A resample is a count per run; a row's weight is its run's count (equivalent to duplicating rows).
    draws = rng.integers(0, n_units, size=(count, n_units))
    counts = np.stack([np.bincount(row, minlength=n_units) for row in draws])
    weights = counts[:, unit_of_row].astype(float)
    chunks = job_chunks(weights, n_jobs)
    z = np.concatenate(parallel(run_resamples, (law, columns, fit_y, z_bounds, z_best), chunks, n_jobs))
    theta = to_natural(law, z)
    tail = 100 * (1 - ci_level) / 2
    low, high = np.percentile(theta, [tail, 100 - tail], axis=0)
    spread = theta.std(axis=0, ddof=1)
    ci = {name: (float(low[i]), float(high[i])) for i, name in enumerate(names)}
    return ci, {name: float(spread[i]) for i, name in enumerate(names)}


def leave_one_group_out(law, table, columns, y, z_bounds, z_best, group_col, notes):
    """Mean |pred − y| / y over every point, each predicted by a fit that never saw its group (model size) and
    saw at least two others. A law fitted on linear residuals (a δ that can be ≤ 0) divides by the mean |y| of the
    held-out group instead: a point's own δ near 0 would make its relative error meaningless."""
    if group_col is None:
        return None, {}
    if group_col not in table.columns:
        raise ValueError(f"fit {law.name}: group_col {group_col!r} missing; columns are {list(table.columns)}")
    groups = table[group_col].to_numpy()
    unique = pd.unique(groups)
    if len(unique) < 2:
        notes.append(f"held-out error skipped: only one value of {group_col!r}")
        return None, {}
    fit_y = law.residual_space(y)
    errors = np.full(len(y), np.nan)
    by_group = {}
    for value in unique:
        held_out = groups == value
        if (~held_out).sum() < len(law.params):
            notes.append(f"held-out fit without {group_col}={value} skipped: fewer points than parameters")
            continue
        if len(pd.unique(groups[~held_out])) < 2:
            # One remaining value pins nothing of the law's dependence on it: the fit, started from the full
            # optimum, would keep the held-out points' exponent and "predict" them perfectly.
            notes.append(f"held-out fit without {group_col}={value} skipped: the rest has a single {group_col}")
            continue
        weight = (~held_out).astype(float)
        with one_blas_thread():
            _, z = minimise(law, columns, fit_y, weight, z_bounds, z_best)
        prediction = law.evaluate_many(to_natural(law, z[None]), columns)[0]
        errors[held_out] = law.relative_errors(prediction[held_out], y[held_out])
        by_group[f"{value:g}" if isinstance(value, (float, np.floating)) else str(value)] = float(
            np.mean(errors[held_out])
        )
    if not by_group:
        return None, {}
    return float(np.nanmean(errors)), by_group
