"""How far two artifacts may differ: the Tolerances type, read from a YAML profile and the command line.

A profile such as reference/tolerances.yaml holds tolerances sized from measured cross-machine drift; why each
value is what it is: docs/operations.md.
"""

from dataclasses import dataclass, field
from pathlib import Path

import yaml


@dataclass(frozen=True)
class Tolerances:
    """Relative/absolute tolerances for numbers (overridable per column or fit parameter) and RMS for images."""

    rtol: float = 0.0
    atol: float = 0.0
    figure_tol: float = 0.0
    columns: dict = field(default_factory=dict)  # name -> (rtol, atol)
    ignored: tuple = ()  # table columns left out (e.g. wall-clock timings)
    prediction_tol: float = 0.0  # largest relative change of a fit's predictions when its parameters moved
    noise_columns: dict = field(default_factory=dict)  # column -> its standard-error column: compared in SEs
    noise_max: float = 3.0  # largest |Δ| / SE of one row of a noise column
    noise_rms: float = 0.5  # largest root-mean-square |Δ| / SE over a noise column's rows
    figure_structure: bool = False  # a figure beyond figure_tol whose drawn data kept their structure passes

    def for_column(self, name: str) -> tuple[float, float]:
        return self.columns.get(name, (self.rtol, self.atol))


DEFAULT_TOLERANCES = Tolerances()  # every option at its default: no rtol, atol or figure-tol, no noise columns


def parse_column_tolerance(text: str) -> tuple[str, tuple[float, float]]:
    """'loss=1e-3' or 'loss=1e-3:1e-6' → ('loss', (rtol, atol))."""
    name, sep, values = text.partition("=")
    parts = values.split(":")
    try:
        if not sep or not name or len(parts) > 2:
            raise ValueError
        rtol, atol = float(parts[0]), float(parts[1]) if len(parts) == 2 else 0.0
    except ValueError:
        raise ValueError(
            f"--column-tol {text!r}: expected COLUMN=RTOL or COLUMN=RTOL:ATOL, e.g. loss=1e-3:1e-6"
        ) from None
    if rtol < 0 or atol < 0:
        raise ValueError(f"--column-tol {text!r}: tolerances must be ≥ 0")
    return name, (rtol, atol)


SCALAR_TOLERANCES = ("rtol", "atol", "figure_tol", "prediction_tol", "noise_max", "noise_rms")


def load_tolerances(path: str | Path) -> dict:
    """A tolerance profile (YAML): the scalar tolerances, `columns: {name: [rtol, atol]}`, `noise_columns:
    {column: se_column}` and `ignore_columns: [...]` — e.g. reference/tolerances.yaml."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--tolerances {path}: no such file")
    profile = yaml.safe_load(path.read_text()) or {}
    known = {*SCALAR_TOLERANCES, "columns", "noise_columns", "ignore_columns", "figure_structure"}
    unknown = sorted(set(profile) - known)
    if unknown:
        raise ValueError(f"--tolerances {path}: unknown key {unknown[0]!r} (valid: {', '.join(sorted(known))})")
    for name, pair in (profile.get("columns") or {}).items():
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, (int, float)) for v in pair)):
            raise ValueError(f"--tolerances {path}: columns.{name} must be [rtol, atol], got {pair!r}")
    return profile


def tolerances_from_args(args) -> Tolerances:
    profile = load_tolerances(args.tolerances) if args.tolerances else {}
    scalars = {name: float(profile.get(name, getattr(Tolerances, name))) for name in SCALAR_TOLERANCES}
    scalars.update({name: getattr(args, name) for name in SCALAR_TOLERANCES if getattr(args, name) is not None})
    for option, value in scalars.items():
        if value < 0:
            raise ValueError(f"--{option.replace('_', '-')} {value}: must be ≥ 0")
    columns = {name: tuple(map(float, pair)) for name, pair in (profile.get("columns") or {}).items()}
    columns.update(parse_column_tolerance(text) for text in args.column_tol)
    noise_columns = dict(profile.get("noise_columns") or {})
    noise_columns.update(parse_noise_column(text) for text in args.noise_column)
    ignored = tuple(profile.get("ignore_columns") or ()) + tuple(args.ignore_column)
    figure_structure = bool(profile.get("figure_structure", False)) or args.figure_structure
    return Tolerances(
        columns=columns, ignored=ignored, noise_columns=noise_columns, figure_structure=figure_structure, **scalars
    )


def parse_noise_column(text: str) -> tuple[str, str]:
    """'delta' → ('delta', 'delta_se'); 'qid=delta_se' → ('qid', 'delta_se')."""
    name, _, se_name = text.partition("=")
    if not name:
        raise ValueError(f"--noise-column {text!r}: expected COLUMN or COLUMN=SE_COLUMN")
    return name, se_name or f"{name}_se"
