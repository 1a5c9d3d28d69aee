"""Where the fitter starts L-BFGS-B: a grid or a Sobol sample over each parameter's start range, or points given."""

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.stats import qmc

from qscaling.laws.law import Law

MAX_STARTS = 100_000


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


def resolve_starts(law: Law, starts, seed: int) -> np.ndarray:
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
