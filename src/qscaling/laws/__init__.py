"""Scaling laws of the five papers as declarative objects, one fitter for all of them, derived quantities.

from qscaling.laws import LAWS, fit, load_fit
law = LAWS["sun2025.capybara"]
law(law.default_paper_params(), table)          # evaluate
result = fit(law, table, bootstrap=200)          # params, CIs, R², RMSE, held-out error
result.to_json("results/fits/capybara.json"); load_fit("results/fits/capybara.json")
"""

import json
from pathlib import Path

from qscaling.laws import baseline, chen2025, efficiency2025, kumar2024, ouyang2024, sun2025
from qscaling.laws.fitter import fit, profile
from qscaling.laws.law import Law, PaperParams, Param
from qscaling.laws.result import Fit, compare_sources
from qscaling.laws.starts import start_grid, start_sample

LAWS: dict[str, Law] = {
    law.name: law
    for law in (
        baseline.CHINCHILLA,
        baseline.CHINCHILLA_TIED,
        baseline.KAPLAN,
        kumar2024.PTQ,
        kumar2024.NEFF,
        kumar2024.UNIFIED,
        *kumar2024.FORMS.values(),
        ouyang2024.QID,
        ouyang2024.QID_TOKENS,
        ouyang2024.QID_SIZE,
        ouyang2024.QID_BITS,
        ouyang2024.QID_FIXED_BITS,
        chen2025.QAT,
        sun2025.CAPYBARA,
        sun2025.EXPONENT,
        sun2025.MANTISSA,
        sun2025.BLOCK,
        efficiency2025.QUEST,
        efficiency2025.QUARTET,
    )
}

_DERIVED = {
    "kumar2024": kumar2024,
    "ouyang2024": ouyang2024,
    "chen2025": chen2025,
    "sun2025": sun2025,
    "panferov2025": efficiency2025,
    "castro2025": efficiency2025,
}


def get_law(name: str) -> Law:
    """LAWS[name] with an error that lists the valid names."""
    if name not in LAWS:
        raise ValueError(f"law {name!r} unknown; valid: {', '.join(LAWS)}")
    return LAWS[name]


def derived_quantities(law_name: str, params) -> dict:
    """Paper-specific quantities (P*, D_crit, optimal layouts, tokens to a QiD…) for a parameter set."""
    module = _DERIVED.get(law_name.split(".")[0])
    return module.derived_quantities(law_name, params) if module else {}


def try_fit(law_name: str, rows, **options) -> Fit | str:
    """A Fit of LAWS[law_name] to `rows` (`fit`'s options), or the one-line reason it could not be made (too few
    points, non-positive targets, …)."""
    try:
        return fit(LAWS[law_name], rows, **options)
    except ValueError as error:
        return f"{law_name}: {error}"


def load_fit(path) -> Fit:
    """Read a fit written by `Fit.to_json`."""
    data = json.loads(Path(path).read_text())
    return Fit.from_dict(data, get_law(data["law"]))


__all__ = [
    "LAWS", "Fit", "Law", "PaperParams", "Param", "compare_sources", "derived_quantities", "fit", "get_law",
    "load_fit", "profile", "start_grid", "start_sample", "try_fit",
]  # fmt: skip
