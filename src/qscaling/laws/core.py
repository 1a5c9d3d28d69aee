"""A scaling law as data (formula, parameters, bounds, paper constants) and the one fitter that serves all of them.

The fitter follows Hoffmann et al. (2022, App. D.2) as replicated by Besiroglu et al. (2024): a Huber loss
(δ = 1e-3, summed over points; a law of a degradation sets its own, DEGRADATION_HUBER_DELTA) on log(prediction)
− log(observation), minimised with L-BFGS-B from a grid of starting points; uncertainty comes from a seeded
bootstrap that re-fits resampled runs. A fit records the points it was fitted on and how well the data pin its
parameters down (the Jacobian's condition number), so that two fits can be compared by what they predict.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.stats import qmc
from threadpoolctl import threadpool_limits

from qscaling.atomic import write_text

HUBER_DELTA = 1e-3  # Hoffmann et al. (2022) App. D.2; Besiroglu et al. (2024) keep it.
# For a degradation (δ = quantized − reference loss) the log residuals are ~0.1–0.5, not ~1e-3: paired noise
# is a large share of a small δ. With δ = 1e-3 such a fit is least absolute deviations, whose optimum is a flat
# face rather than a point — measured: one objective value to 16 digits at k = 3.5 and k = 16.2 for the smoke
# QiD fit, picked between by BLAS kernel choice. δ = 1 keeps ordinary scatter quadratic (a unique optimum)
# and only a point off by more than a factor e linear.
DEGRADATION_HUBER_DELTA = 1.0
# A Jacobian (log prediction w.r.t. optimiser coordinates) with a larger condition number leaves some
# combination of parameters unidentified by the data: such fits are compared by prediction, not by parameter.
ILL_CONDITIONED = 1e6
# Forward-difference step in the optimiser's coordinates (log for scale parameters): residual changes stay
# far below HUBER_DELTA, so the quadratic zone of the loss is resolved.
_JACOBIAN_STEP = 1e-7
# Returned where a trial point makes a prediction non-positive or non-finite; L-BFGS-B's line search then backs off.
_INVALID_OBJECTIVE = 1e30
_LBFGS_OPTIONS = {"maxiter": 1000, "ftol": 1e-12, "gtol": 1e-8}
MAX_STARTS = 100_000


@dataclass(frozen=True)
class Param:
    """One law parameter: hard bounds for the optimiser and the range its start grid spans.

    `log=True` marks a positive scale factor (A, B, k, …): the optimiser then works on its logarithm, which is
    how Hoffmann et al. parametrise A = e^a and keeps constants spanning many decades well conditioned.
    """

    name: str
    low: float
    high: float
    start: tuple[float, float]
    log: bool = False

    def __post_init__(self):
        if not self.low < self.high:
            raise ValueError(f"param {self.name!r}: bounds must satisfy low < high, got ({self.low}, {self.high})")
        if self.log and self.low <= 0:
            raise ValueError(f"param {self.name!r}: a log-scale parameter needs low > 0, got {self.low}")
        if not (self.low <= self.start[0] <= self.start[1] <= self.high):
            raise ValueError(f"param {self.name!r}: start range {self.start} must lie within ({self.low}, {self.high})")

    def to_optimiser(self, value):
        return np.log(value) if self.log else np.asarray(value, dtype=float)

    def from_optimiser(self, value):
        return np.exp(value) if self.log else value


class PaperParams(dict):
    """A paper's reported constants for one variant of a law, plus where they come from.

    A plain dict of name -> value (so `law(paper_params, data)` works) with `source` saying which table or
    text the numbers were read from and what, if anything, was derived or assumed.
    """

    def __init__(self, values: Mapping[str, float], source: str):
        super().__init__(values)
        self.source = source


@dataclass(frozen=True)
class Law:
    """A scaling law: `function(params, inputs)` plus everything the fitter and the figures need to know.

    `function` receives two mappings of numpy arrays — parameters (each may be shaped (k, 1) to evaluate k
    parameter sets at once) and input columns (each shaped (n,)) — and returns the prediction, broadcast.
    """

    name: str
    formula: str
    params: tuple[Param, ...]
    inputs: tuple[str, ...]
    target: str
    function: Callable
    paper_params: dict[str, PaperParams] = field(default_factory=dict)
    description: str = ""
    huber_delta: float = HUBER_DELTA  # in log space: residuals beyond it count linearly, not quadratically
    # param -> the inputs whose variation pins it down (it is their exponent or coefficient): while all of them
    # are constant in a table, the param's effect is a constant factor or offset that another param already
    # supplies. A param not listed is pinned by the target's scale alone.
    identified_by: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(param.name for param in self.params)

    @property
    def bounds(self) -> tuple[tuple[float, float], ...]:
        return tuple((param.low, param.high) for param in self.params)

    def default_paper_params(self) -> PaperParams:
        """The first listed variant: the one a figure draws when no variant is named."""
        return next(iter(self.paper_params.values()))

    def reference_params(self) -> dict[str, float]:
        """A parameter set known to be sensible: the paper's default variant, or, for a law whose paper reports
        no constants (Kumar et al.'s Table 1 forms), the middle of each parameter's start range."""
        if self.paper_params:
            return dict(self.default_paper_params())
        return {p.name: float(p.from_optimiser(np.mean(p.to_optimiser(np.array(p.start))))) for p in self.params}

    def __call__(self, params: Mapping[str, float], data) -> np.ndarray:
        """Evaluate the law for one parameter set on a DataFrame or a dict of equal-length arrays."""
        values = self._check_params(params)
        columns = self.columns(data)
        n_rows = len(next(iter(columns.values()))) if columns else 1
        prediction = self.function(values, columns)
        return np.broadcast_to(np.asarray(prediction, dtype=float), (n_rows,)).copy()

    def evaluate_many(self, theta: np.ndarray, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """Predictions for k parameter sets at once: theta (k, p) in natural units -> (k, n)."""
        values = {name: theta[:, i, None] for i, name in enumerate(self.param_names)}
        n_rows = len(next(iter(columns.values())))
        return np.broadcast_to(self.function(values, columns), (theta.shape[0], n_rows))

    def columns(self, data) -> dict[str, np.ndarray]:
        """The law's input columns of `data` as float arrays, with a clear error for a missing column."""
        available = list(data.columns) if isinstance(data, pd.DataFrame) else list(data)
        missing = [name for name in self.inputs if name not in available]
        if missing:
            raise ValueError(
                f"law {self.name}: input column {missing[0]!r} missing; needs {list(self.inputs)}, got {available}"
            )
        arrays = {name: np.atleast_1d(np.asarray(data[name], dtype=float)) for name in self.inputs}
        lengths = {len(array) for array in arrays.values()}
        if len(lengths) > 1:
            sizes = {name: len(array) for name, array in arrays.items()}
            raise ValueError(f"law {self.name}: input columns must have equal lengths, got {sizes}")
        return arrays

    def _check_params(self, params: Mapping[str, float]) -> dict[str, float]:
        if not isinstance(params, Mapping):
            raise TypeError(f"law {self.name}: params must be a mapping name -> value, got {type(params).__name__}")
        missing = [name for name in self.param_names if name not in params]
        unknown = [name for name in params if name not in self.param_names]
        if missing or unknown:
            raise ValueError(
                f"law {self.name}: params missing {missing} / unknown {unknown}; expected {list(self.param_names)}"
            )
        return {name: float(params[name]) for name in self.param_names}


def start_grid(law: Law, per_param: int) -> np.ndarray:
    """A full factorial grid of starting points, `per_param` values per parameter across its start range.

    Values are evenly spaced in the optimiser's coordinates (log for scale factors), like Hoffmann et al.'s grid.
    Returns (per_param ** p, p) in natural units.
    """
    if per_param < 1:
        raise ValueError(f"starts: points per parameter must be >= 1, got {per_param}")
    count = per_param ** len(law.params)
    if count > MAX_STARTS:
        raise ValueError(
            f"starts: {per_param}^{len(law.params)} = {count} grid points for {law.name} exceeds {MAX_STARTS}; "
            "pass fewer points per parameter or an explicit set from start_sample()"
        )
    axes = []
    for param in law.params:
        low, high = param.to_optimiser(param.start[0]), param.to_optimiser(param.start[1])
        axes.append(param.from_optimiser(np.linspace(low, high, per_param) if per_param > 1 else [(low + high) / 2]))
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([axis.ravel() for axis in mesh], axis=1)


def start_sample(law: Law, count: int, seed: int = 0) -> np.ndarray:
    """`count` seeded scrambled-Sobol starting points over the start ranges, for laws with many parameters.

    Returns (count, p) in natural units.
    """
    if count < 1:
        raise ValueError(f"starts: sample size must be >= 1, got {count}")
    unit = qmc.Sobol(len(law.params), scramble=True, seed=seed).random(count)
    low = np.array([param.to_optimiser(param.start[0]) for param in law.params])
    high = np.array([param.to_optimiser(param.start[1]) for param in law.params])
    scaled = low + unit * (high - low)
    return np.stack([param.from_optimiser(scaled[:, i]) for i, param in enumerate(law.params)], axis=1)


def default_starts(law: Law, seed: int) -> np.ndarray:
    """A 3-point grid per parameter up to 5 parameters (243 starts); beyond that 128 Sobol points."""
    return start_grid(law, 3) if len(law.params) <= 5 else start_sample(law, 128, seed)


def _resolve_starts(law: Law, starts, seed: int) -> np.ndarray:
    if starts is None:
        return default_starts(law, seed)
    if isinstance(starts, (int, np.integer)) and not isinstance(starts, bool):
        return start_grid(law, int(starts))
    if isinstance(starts, Sequence) and starts and isinstance(starts[0], Mapping):
        return np.array([[float(start[name]) for name in law.param_names] for start in starts])
    array = np.asarray(starts, dtype=float)
    if array.ndim != 2 or array.shape[1] != len(law.params):
        raise ValueError(
            f"starts: expected an int (grid points per parameter), a list of param dicts or an array "
            f"(k, {len(law.params)}) for {law.name}; got shape {array.shape}"
        )
    return array


# ---------------------------------------------------------------------------------------------------------
# The objective and one L-BFGS-B run. Module-level so worker processes can receive them by reference.


def _to_natural(law: Law, z: np.ndarray) -> np.ndarray:
    return np.stack([param.from_optimiser(z[..., i]) for i, param in enumerate(law.params)], axis=-1)


def _objective(z: np.ndarray, law: Law, columns, log_target: np.ndarray, weight: np.ndarray):
    """Σ weight·Huber_δ(log pred − log y)/δ and its gradient (chain rule through a forward-difference Jacobian),
    δ = law.huber_delta.

    Dividing by δ leaves the minimiser unchanged and puts the loss on the scale of |residual| sums, so
    L-BFGS-B's tolerances mean the same thing for every law.
    """
    shifted = np.vstack([z, z + _JACOBIAN_STEP * np.eye(len(z))])
    with np.errstate(all="ignore"):
        prediction = law.evaluate_many(_to_natural(law, shifted), columns)
        residual = np.log(prediction) - log_target
    if not np.all(np.isfinite(residual)):
        return _INVALID_OBJECTIVE, np.zeros_like(z)
    r = residual[0]
    absolute = np.abs(r)
    delta = law.huber_delta
    loss = np.where(absolute <= delta, 0.5 * r * r / delta, absolute - 0.5 * delta)
    jacobian = (residual[1:] - r) / _JACOBIAN_STEP  # (p, n)
    psi = np.clip(r, -delta, delta) / delta
    # Plain numpy reductions, not BLAS dot products: BLAS results depend on memory alignment in the last bits,
    # which would make fits differ with how work was split among processes.
    return float(np.sum(weight * loss)), np.sum(jacobian * (weight * psi), axis=1)


def _minimise(law: Law, columns, log_target, weight, z_bounds, z_start):
    value, _ = _objective(z_start, law, columns, log_target, weight)
    if value >= _INVALID_OBJECTIVE:
        return math.inf, z_start
    result = minimize(
        _objective,
        z_start,
        args=(law, columns, log_target, weight),
        jac=True,
        method="L-BFGS-B",
        bounds=z_bounds,
        options=_LBFGS_OPTIONS,
    )
    return float(result.fun), result.x


def _run_starts(law, columns, log_target, weight, z_bounds, z_starts):
    """Fit from each start; returns (objectives (k,), optima (k, p))."""
    with _one_blas_thread():
        results = [_minimise(law, columns, log_target, weight, z_bounds, z) for z in z_starts]
    return np.array([value for value, _ in results]), np.array([z for _, z in results])


def _run_resamples(law, columns, log_target, z_bounds, z_start, weights):
    """Re-fit from `z_start` once per resample, given as a row-weight (count) vector; returns (k, p)."""
    with _one_blas_thread():
        return np.array([_minimise(law, columns, log_target, w, z_bounds, z_start)[1] for w in weights])


def _one_blas_thread():
    """L-BFGS-B's tiny BLAS calls slow down ~30x when OpenBLAS spreads them over busy cores; parallelism
    here comes from processes over starts and resamples instead."""
    return threadpool_limits(limits=1, user_api="blas")


def _parallel(function, fixed_args, chunks, n_jobs):
    """Apply function(*fixed_args, chunk) to each chunk, in order; processes only when n_jobs > 1."""
    if n_jobs <= 1 or len(chunks) <= 1:
        return [function(*fixed_args, chunk) for chunk in chunks]
    with ProcessPoolExecutor(max_workers=n_jobs) as pool:
        return list(pool.map(function, *([arg] * len(chunks) for arg in fixed_args), chunks))


def _chunks(array: np.ndarray, n_jobs: int) -> list[np.ndarray]:
    return [chunk for chunk in np.array_split(array, max(1, n_jobs)) if len(chunk)]


# ---------------------------------------------------------------------------------------------------------


@dataclass
class Fit:
    """A fitted law: best parameters, bootstrap CIs, goodness of fit and held-out error."""

    law: Law
    params: dict[str, float]
    ci: dict[str, tuple[float, float]]
    standard_errors: dict[str, float]
    r2: float
    rmse: float
    heldout_relative_error: float | None
    heldout_by_group: dict[str, float]
    target: str
    group_col: str | None
    n_points: int
    n_starts: int
    n_bootstrap: int
    seed: int
    objective: float
    ci_level: float = 0.95
    notes: list[str] = field(default_factory=list)
    jacobian_condition: float | None = None  # over the parameters not on a bound; None when all are
    points: dict = field(default_factory=dict)  # {"inputs": {column: [...]}, "observed": [...]}

    def predict(self, data) -> np.ndarray:
        return self.law(self.params, data)

    def at_bound(self, name: str) -> bool:
        """Whether the fitted `name` sits on one of its bounds (the optimum lies outside them)."""
        return any(note.startswith(f"{name} = ") and "is at its bound" in note for note in self.notes)

    def held_fixed(self, name: str) -> bool:
        """Whether `name` was supplied as a constant rather than fitted."""
        return any(note.startswith(f"{name} = ") and note.endswith("fixed, not fitted") for note in self.notes)

    def to_dict(self) -> dict:
        return {
            "law": self.law.name,
            "formula": self.law.formula,
            "inputs": list(self.law.inputs),
            "target": self.target,
            "params": self.params,
            "ci": {name: list(bounds) for name, bounds in self.ci.items()},
            "ci_level": self.ci_level,
            "standard_errors": self.standard_errors,
            "r2": self.r2,
            "rmse": self.rmse,
            "heldout_relative_error": self.heldout_relative_error,
            "heldout_by_group": self.heldout_by_group,
            "group_col": self.group_col,
            "n_points": self.n_points,
            "n_starts": self.n_starts,
            "n_bootstrap": self.n_bootstrap,
            "seed": self.seed,
            "objective": self.objective,
            "huber_delta": self.law.huber_delta,
            "jacobian_condition": self.jacobian_condition,
            "ill_conditioned": self.ill_conditioned,
            "notes": self.notes,
            "points": self.points,
            # The papers' own constants for this law, so a fit file can be read against them on its own.
            "paper": {
                variant: {"source": values.source, "params": dict(values)}
                for variant, values in self.law.paper_params.items()
            },
        }

    @property
    def ill_conditioned(self) -> bool:
        return self.jacobian_condition is not None and not self.jacobian_condition <= ILL_CONDITIONED

    def to_json(self, path: str | os.PathLike) -> Path:
        """Write the fit as JSON (atomically: a temp file renamed into place)."""
        write_text(path, json.dumps(_finite_or_none(self.to_dict()), indent=2, allow_nan=False) + "\n")
        return Path(path)

    @classmethod
    def from_dict(cls, data: Mapping, law: Law) -> Fit:
        def number(value):
            return math.nan if value is None else float(value)

        return cls(
            law=law,
            params={name: float(value) for name, value in data["params"].items()},
            ci={name: (number(low), number(high)) for name, (low, high) in data["ci"].items()},
            standard_errors={name: number(value) for name, value in data["standard_errors"].items()},
            r2=number(data["r2"]),
            rmse=number(data["rmse"]),
            heldout_relative_error=data["heldout_relative_error"],
            heldout_by_group={key: number(value) for key, value in data["heldout_by_group"].items()},
            target=data["target"],
            group_col=data["group_col"],
            n_points=int(data["n_points"]),
            n_starts=int(data["n_starts"]),
            n_bootstrap=int(data["n_bootstrap"]),
            seed=int(data["seed"]),
            objective=float(data["objective"]),
            ci_level=float(data["ci_level"]),
            notes=list(data["notes"]),
            # An infinite condition number is written as null beside "ill_conditioned": true.
            jacobian_condition=math.inf
            if data.get("ill_conditioned") and data.get("jacobian_condition") is None
            else data.get("jacobian_condition"),
            points=data.get("points", {}),
        )


def _finite_or_none(value):
    """JSON has no NaN: write a missing number as null."""
    if isinstance(value, dict):
        return {key: _finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _checked_columns(law: Law, table: pd.DataFrame, target: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
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
    non_positive = int((y <= 0).sum())
    if non_positive or not np.all(np.isfinite(y)):
        raise ValueError(
            f"fit {law.name}: target {target!r} must be finite and > 0 (the fit takes its log); "
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
    if bootstrap < 0:
        raise ValueError(f"fit {law.name}: bootstrap must be >= 0, got {bootstrap}")
    if not 0 < ci_level < 1:
        raise ValueError(f"fit {law.name}: ci_level must be in (0, 1), got {ci_level}")
    log_y = np.log(y)
    z_bounds = [(float(p.to_optimiser(p.low)), float(p.to_optimiser(p.high))) for p in law.params]
    natural_starts = _resolve_starts(law, starts, seed)
    z_starts = np.column_stack([p.to_optimiser(natural_starts[:, i]) for i, p in enumerate(law.params)])
    unit_weight = np.ones_like(y)

    outcomes = _parallel(_run_starts, (law, columns, log_y, unit_weight, z_bounds), _chunks(z_starts, n_jobs), n_jobs)
    objectives = np.concatenate([values for values, _ in outcomes])
    optima = np.concatenate([z for _, z in outcomes])
    if not np.any(np.isfinite(objectives)):
        raise ValueError(f"fit {law.name}: no starting point gave finite positive predictions; check inputs/bounds")
    best = int(np.argmin(objectives))  # first of equals: independent of how starts were split among workers
    z_best = optima[best]
    params = dict(zip(law.param_names, map(float, _to_natural(law, z_best))))
    prediction = law.evaluate_many(_to_natural(law, z_best[None]), columns)[0]
    notes = _bound_notes(law, params)
    condition = _jacobian_condition(law, columns, z_best, params)
    if condition is not None and not condition <= ILL_CONDITIONED:
        notes.append(
            f"ill-conditioned: Jacobian condition number {condition:.3g} > {ILL_CONDITIONED:g}; the data do "
            "not pin down every parameter — read its predictions and CIs, not its point values"
        )

    ci, standard_errors = _bootstrap(
        law, table, columns, log_y, z_bounds, z_best, bootstrap, run_col, seed, n_jobs, ci_level
    )
    heldout, by_group = _leave_one_group_out(law, table, columns, y, z_bounds, z_best, group_col, notes)
    residual = prediction - y
    return Fit(
        law=law,
        params=params,
        ci=ci,
        standard_errors=standard_errors,
        r2=float(1 - np.sum(residual**2) / np.sum((y - y.mean()) ** 2)),
        rmse=float(np.sqrt(np.mean(residual**2))),
        heldout_relative_error=heldout,
        heldout_by_group=by_group,
        target=target,
        group_col=group_col,
        n_points=len(y),
        n_starts=len(z_starts),
        n_bootstrap=bootstrap,
        seed=seed,
        objective=float(objectives[best]),
        ci_level=ci_level,
        notes=notes,
        jacobian_condition=condition,
        points={"inputs": {name: array.tolist() for name, array in columns.items()}, "observed": y.tolist()},
    )


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
    """Condition number of d log(prediction) / d(optimiser coordinates) over the parameters off their bounds."""
    on_bound = {note.split(" = ")[0] for note in _bound_notes(law, params)}
    free = [i for i, name in enumerate(law.param_names) if name not in on_bound]
    if not free:
        return None
    shifted = np.vstack([z_best, z_best + _JACOBIAN_STEP * np.eye(len(z_best))[free]])
    with np.errstate(all="ignore"):
        log_prediction = np.log(law.evaluate_many(_to_natural(law, shifted), columns))
    jacobian = (log_prediction[1:] - log_prediction[0]) / _JACOBIAN_STEP  # (free, n)
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


def _bootstrap(law, table, columns, log_y, z_bounds, z_best, count, run_col, seed, n_jobs, ci_level):
    names = law.param_names
    if count == 0:
        return {name: (math.nan, math.nan) for name in names}, {name: math.nan for name in names}
    if run_col is None:
        unit_of_row = np.arange(len(log_y))
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
    chunks = _chunks(weights, n_jobs)
    z = np.concatenate(_parallel(_run_resamples, (law, columns, log_y, z_bounds, z_best), chunks, n_jobs))
    theta = _to_natural(law, z)
    tail = 100 * (1 - ci_level) / 2
    low, high = np.percentile(theta, [tail, 100 - tail], axis=0)
    spread = theta.std(axis=0, ddof=1)
    ci = {name: (float(low[i]), float(high[i])) for i, name in enumerate(names)}
    return ci, {name: float(spread[i]) for i, name in enumerate(names)}


def _leave_one_group_out(law, table, columns, y, z_bounds, z_best, group_col, notes):
    """Mean |pred − y| / y over every point, each predicted by a fit that never saw its group (model size) and
    saw at least two others."""
    if group_col is None:
        return None, {}
    if group_col not in table.columns:
        raise ValueError(f"fit {law.name}: group_col {group_col!r} missing; columns are {list(table.columns)}")
    groups = table[group_col].to_numpy()
    unique = pd.unique(groups)
    if len(unique) < 2:
        notes.append(f"held-out error skipped: only one value of {group_col!r}")
        return None, {}
    log_y = np.log(y)
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
        with _one_blas_thread():
            _, z = _minimise(law, columns, log_y, weight, z_bounds, z_best)
        prediction = law.evaluate_many(_to_natural(law, z[None]), columns)[0]
        errors[held_out] = np.abs(prediction[held_out] - y[held_out]) / y[held_out]
        by_group[f"{value:g}" if isinstance(value, (float, np.floating)) else str(value)] = float(
            np.mean(errors[held_out])
        )
    if not by_group:
        return None, {}
    return float(np.nanmean(errors)), by_group


def compare_sources(law: Law, fit: Fit | None = None, variant: str | None = None) -> list[tuple[str, dict]]:
    """[(label, params)]: the paper's constants, then this run's fit when one exists — for overlays."""
    paper = law.paper_params[variant] if variant else law.default_paper_params()
    sources = [("paper", dict(paper))]
    if fit is not None:
        if fit.law.name != law.name:
            raise ValueError(f"fit for {fit.law.name!r} passed where a fit of {law.name!r} was expected")
        sources.append(("this run", dict(fit.params)))
    return sources
