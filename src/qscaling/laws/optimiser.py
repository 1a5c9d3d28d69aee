"""The fitter's objective (a Huber loss on log or linear residuals, as the law says) and its L-BFGS-B runs, serial or over processes.

Module-level functions, so that worker processes receive them by reference.
"""

import math
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from qscaling.laws.law import Law

# Forward-difference step in the optimiser's coordinates (log for scale parameters): residual changes stay
# far below HUBER_DELTA, so the quadratic zone of the loss is resolved.
JACOBIAN_STEP = 1e-7
# Returned where a trial point makes a prediction non-positive or non-finite; L-BFGS-B's line search then backs off.
_INVALID_OBJECTIVE = 1e30
_LBFGS_OPTIONS = {"maxiter": 1000, "ftol": 1e-12, "gtol": 1e-8}


def to_natural(law: Law, z: np.ndarray) -> np.ndarray:
    """Optimiser coordinates (..., p) -> parameter values (..., p): exp of the log-scale parameters."""
    return np.stack([param.from_optimiser(z[..., i]) for i, param in enumerate(law.params)], axis=-1)


def _objective(z: np.ndarray, law: Law, columns, target: np.ndarray, weight: np.ndarray):
    """Σ weight·Huber_δ(pred − y)/δ, both in the law's residual space (log or linear), and its gradient (chain
    rule through a forward-difference Jacobian), δ = law.huber_delta.

    Dividing by δ leaves the minimiser unchanged and puts the loss on the scale of |residual| sums, so
    L-BFGS-B's tolerances mean the same thing for every law.
    """
    shifted = np.vstack([z, z + JACOBIAN_STEP * np.eye(len(z))])
    with np.errstate(all="ignore"):
        prediction = law.evaluate_many(to_natural(law, shifted), columns)
        residual = law.residual_space(prediction) - target
    if not np.all(np.isfinite(residual)):
        return _INVALID_OBJECTIVE, np.zeros_like(z)
    r = residual[0]
    absolute = np.abs(r)
    delta = law.huber_delta
    loss = np.where(absolute <= delta, 0.5 * r * r / delta, absolute - 0.5 * delta)
    jacobian = (residual[1:] - r) / JACOBIAN_STEP  # (p, n)
    psi = np.clip(r, -delta, delta) / delta
    # Plain numpy reductions, not BLAS dot products: BLAS results depend on memory alignment in the last bits,
    # which would make fits differ with how work was split among processes.
    return float(np.sum(weight * loss)), np.sum(jacobian * (weight * psi), axis=1)


def minimise(law: Law, columns, target, weight, z_bounds, z_start):
    """One L-BFGS-B run from `z_start`: (objective, optimum), or (inf, z_start) where the start predicts nothing."""
    value, _ = _objective(z_start, law, columns, target, weight)
    if value >= _INVALID_OBJECTIVE:
        return math.inf, z_start
    result = minimize(
        _objective,
        z_start,
        args=(law, columns, target, weight),
        jac=True,
        method="L-BFGS-B",
        bounds=z_bounds,
        options=_LBFGS_OPTIONS,
    )
    return float(result.fun), result.x


def run_starts(law, columns, target, weight, z_bounds, z_starts):
    """Fit from each start; returns (objectives (k,), optima (k, p))."""
    with one_blas_thread():
        results = [minimise(law, columns, target, weight, z_bounds, z) for z in z_starts]
    return np.array([value for value, _ in results]), np.array([z for _, z in results])


def run_resamples(law, columns, target, z_bounds, z_start, weights):
    """Re-fit from `z_start` once per resample, given as a row-weight (count) vector; returns (k, p)."""
    with one_blas_thread():
        return np.array([minimise(law, columns, target, w, z_bounds, z_start)[1] for w in weights])


def one_blas_thread():
    """L-BFGS-B's tiny BLAS calls slow down ~30x when OpenBLAS spreads them over busy cores; parallelism
    here comes from processes over starts and resamples instead."""
    return threadpool_limits(limits=1, user_api="blas")


def parallel(function, fixed_args, chunks, n_jobs):
    """Apply function(*fixed_args, chunk) to each chunk, in order; processes only when n_jobs > 1."""
    if n_jobs <= 1 or len(chunks) <= 1:
        return [function(*fixed_args, chunk) for chunk in chunks]
    with ProcessPoolExecutor(max_workers=n_jobs) as pool:
        return list(pool.map(function, *([arg] * len(chunks) for arg in fixed_args), chunks))


def job_chunks(array: np.ndarray, n_jobs: int) -> list[np.ndarray]:
    """`array`'s rows in up to `n_jobs` consecutive, non-empty chunks."""
    return [chunk for chunk in np.array_split(array, max(1, n_jobs)) if len(chunk)]
