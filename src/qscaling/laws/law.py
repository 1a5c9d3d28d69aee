"""A scaling law as data: formula, parameters (bounds, start ranges, scale), inputs, the papers' constants and the
Huber δ its fit uses."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

HUBER_DELTA = 1e-3  # Hoffmann et al. (2022) App. D.2; Besiroglu et al. (2024) keep it.
# For a degradation (δ = quantized − reference loss) the log residuals are ~0.1–0.5, not ~1e-3: paired noise
# is a large share of a small δ. With δ = 1e-3 such a fit is least absolute deviations, whose optimum is a flat
# face rather than a point — measured: one objective value to 16 digits at k = 3.5 and k = 16.2 for the smoke
# QiD fit, picked between by BLAS kernel choice. δ = 1 keeps ordinary scatter quadratic (a unique optimum)
# and only a point off by more than a factor e linear.
DEGRADATION_HUBER_DELTA = 1.0
# A degradation law fitted on linear residuals (`residuals="linear"`) takes its Huber δ in the target's units
# (nats): seed-to-seed scatter of a δ (a few hundredths) stays quadratic, a diverged or spiked seed (tenths) linear.
LINEAR_DEGRADATION_HUBER_DELTA = 0.1
RESIDUAL_SPACES = ("log", "linear")


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
    huber_delta: float = HUBER_DELTA  # in the residuals' space: residuals beyond it count linearly, not quadratically
    # "log": log(prediction) − log(observation), for a positive target (a loss). "linear": prediction − observation,
    # for a target that noise makes negative (a degradation δ measured as a difference of two noisy losses): a
    # log-space fit must drop δ ≤ 0, which keeps the points that noise pushed up and biases the law upward.
    residuals: str = "log"
    # param -> the inputs whose variation pins it down (it is their exponent or coefficient): while all of them
    # are constant in a table, the param's effect is a constant factor or offset that another param already
    # supplies. A param not listed is pinned by the target's scale alone.
    identified_by: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # param -> (input, value): a parameter of one level of an input (a precision's efficiency) that acts only on
    # rows where the input takes that value. A table pins it only with rows at that level and rows at a level
    # no such parameter acts on (where the factor is 1 and the law's other constants are measured).
    levels: dict[str, tuple[str, float]] = field(default_factory=dict)
    # inputs where +inf is a value the law defines (a precision of inf bits: the tensor is kept unquantized)
    infinite_allowed: tuple[str, ...] = ()

    def __post_init__(self):
        if self.residuals not in RESIDUAL_SPACES:
            raise ValueError(f"law {self.name}: residuals must be one of {RESIDUAL_SPACES}, got {self.residuals!r}")

    def residual_space(self, values):
        """Values (targets or predictions) in the space whose differences the fit's loss reads."""
        return np.log(values) if self.residuals == "log" else np.asarray(values, dtype=float)

    def relative_errors(self, predicted, observed) -> np.ndarray:
        """|predicted − observed| per point, relative to the observation — or, for a law fitted on linear residuals
        (a δ that can be ≤ 0, where a point's own value makes a ratio meaningless), to the points' mean |observed|."""
        observed = np.asarray(observed, dtype=float)
        scale = observed if self.residuals == "log" else np.mean(np.abs(observed))
        return np.abs(np.asarray(predicted, dtype=float) - observed) / scale

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
