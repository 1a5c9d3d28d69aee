"""A fitted law (parameters, CIs, goodness of fit, held-out error, the points it saw) and its JSON round trip."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qscaling.atomic import write_text
from qscaling.laws.law import Law

# A Jacobian (log prediction w.r.t. optimiser coordinates) with a larger condition number leaves some
# combination of parameters unidentified by the data: such fits are compared by prediction, not by parameter.
ILL_CONDITIONED = 1e6


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


def is_fit_dict(doc) -> bool:
    """Whether a JSON document is a fitted law as `Fit.to_dict` writes it (a fit that could not run at a scale is
    written as `{"error": ...}` instead)."""
    return isinstance(doc, dict) and {"law", "params", "ci"} <= set(doc)


def _finite_or_none(value):
    """JSON has no NaN: write a missing number as null."""
    if isinstance(value, dict):
        return {key: _finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def compare_sources(law: Law, fit: Fit | None = None, variant: str | None = None) -> list[tuple[str, dict]]:
    """[(label, params)]: the paper's constants, then this run's fit when one exists — for overlays."""
    paper = law.paper_params[variant] if variant else law.default_paper_params()
    sources = [("paper", dict(paper))]
    if fit is not None:
        if fit.law.name != law.name:
            raise ValueError(f"fit for {fit.law.name!r} passed where a fit of {law.name!r} was expected")
        sources.append(("this run", dict(fit.params)))
    return sources
