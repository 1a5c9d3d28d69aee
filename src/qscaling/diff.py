"""Compare two result trees: metric tables, fitted laws, claims verdicts and figures, with tolerances.

A result tree is a Snakemake working directory (or a `reference/<scale>` copy of one): its small outputs under
`figures/` and `results/` are compared file by file. Checkpoints, token shards and provenance records are left
out: they are inputs to the artifacts, not artifacts, and records carry wall-clock times.

    qscaling diff RUN_A RUN_B [--rtol R] [--atol A] [--column-tol loss=1e-3:0] [--ignore-column NAME]
                              [--figure-tol RMS] [--json|--markdown]

Exit status: 0 when every artifact matches within tolerance, 1 otherwise, 2 on bad input.
"""

import argparse
import hashlib
import json
import math
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

# Only these kinds are artifacts; anything else under results/ is an intermediate (weights, shards, logs).
TABLE_SUFFIXES = (".parquet", ".csv", ".tsv")
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
JSON_SUFFIX = ".json"
# Under results/, these hold inputs or bookkeeping rather than reproduced numbers.
EXCLUDED_UNDER_RESULTS = ("runs", "data", "provenance", "report", "manifest.json")
# How many differing cells/values one artifact lists before summarising the rest.
MAX_DETAILS = 5

STATUS_ORDER = ("changed", "missing", "extra", "within_tolerance", "identical")


@dataclass(frozen=True)
class Tolerances:
    """Relative/absolute tolerances for numbers (overridable per column or fit parameter) and RMS for images."""

    rtol: float = 0.0
    atol: float = 0.0
    figure_tol: float = 0.0
    columns: dict = field(default_factory=dict)  # name -> (rtol, atol)
    ignored: tuple = ()  # table columns left out (e.g. wall-clock timings)

    def for_column(self, name: str) -> tuple[float, float]:
        return self.columns.get(name, (self.rtol, self.atol))


@dataclass
class ArtifactDiff:
    path: str
    kind: str  # table | fit | json | figure
    status: str  # one of STATUS_ORDER
    details: list[str] = field(default_factory=list)

    @property
    def differs(self) -> bool:
        return self.status in ("changed", "missing", "extra")


def list_artifacts(root: Path) -> dict[str, Path]:
    """Relative path -> file for every comparable artifact of a result tree."""
    artifacts = {}
    for top in ("figures", "results"):
        base = root / top
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            relative = path.relative_to(root)
            if not path.is_file() or path.name.startswith("."):
                continue
            if top == "results" and relative.parts[1] in EXCLUDED_UNDER_RESULTS:
                continue
            if path.suffix in TABLE_SUFFIXES + FIGURE_SUFFIXES + (JSON_SUFFIX,) and not _inside_checkpoint(path):
                artifacts[relative.as_posix()] = path
    return artifacts


def _inside_checkpoint(path: Path) -> bool:
    # A trained or quantized checkpoint directory carries its own config JSONs next to the weights.
    return any(path.parent.glob("*.safetensors"))


def export_artifacts(run: str | Path, destination: str | Path) -> list[str]:
    """Copy a run's artifacts (what diff compares; never checkpoints) into `destination`, e.g. reference/smoke."""
    run, destination = Path(run), Path(destination)
    artifacts = list_artifacts(run)
    if not artifacts:
        raise ValueError(f"run {run}: holds no figures/ or results/ artifacts to export")
    if destination.exists():
        shutil.rmtree(destination)
    for relative, path in artifacts.items():
        (destination / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination / relative)
    return sorted(artifacts)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_table(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path, sep="\t" if path.suffix == ".tsv" else ",")


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _close(a, b, rtol: float, atol: float) -> bool:
    """numpy.isclose's rule (B is the reference); two missing values (None / NaN) match each other."""
    if _is_missing(a) or _is_missing(b):
        return _is_missing(a) and _is_missing(b)
    return abs(a - b) <= atol + rtol * abs(b)


def compare_tables(a: pd.DataFrame, b: pd.DataFrame, tol: Tolerances) -> tuple[bool, list[str]]:
    """(within tolerance, details). Rows are compared in order: write_table fixes the row order."""
    details = []
    if list(a.columns) != list(b.columns):
        only_a = [c for c in a.columns if c not in b.columns]
        only_b = [c for c in b.columns if c not in a.columns]
        return False, [f"columns differ: only in A {only_a}, only in B {only_b}"
                       if only_a or only_b else "column order differs"]
    if len(a) != len(b):
        return False, [f"row count {len(a)} vs {len(b)}"]
    within = True
    for column in a.columns:
        if column in tol.ignored:
            continue
        left, right = a[column].to_numpy(), b[column].to_numpy()
        if pd.api.types.is_numeric_dtype(a[column]) and pd.api.types.is_numeric_dtype(b[column]) \
                and not pd.api.types.is_bool_dtype(a[column]):
            rtol, atol = tol.for_column(column)
            left, right = left.astype(float), right.astype(float)
            both_nan = np.isnan(left) & np.isnan(right)
            bad = ~both_nan & ~(np.abs(left - right) <= atol + rtol * np.abs(right))
            exact = bool(np.all(both_nan | (left == right)))
            if bad.any():
                within = False
                rows = np.flatnonzero(bad)
                worst = rows[np.nanargmax(np.abs(left[rows] - right[rows]))]
                details.append(f"{column}: {len(rows)} of {len(a)} rows beyond rtol={rtol:g} atol={atol:g}; "
                               f"largest at row {worst}: {left[worst]:.10g} vs {right[worst]:.10g}")
            elif not exact:
                details.append(f"{column}: within rtol={rtol:g} atol={atol:g} "
                               f"(max |Δ| {np.nanmax(np.abs(left - right)):.3g})")
        else:
            unequal = [i for i in range(len(a)) if not _same_value(left[i], right[i])]
            if unequal:
                within = False
                shown = ", ".join(f"row {i}: {left[i]!r} → {right[i]!r}" for i in unequal[:MAX_DETAILS])
                details.append(f"{column}: {len(unequal)} rows differ ({shown})")
    return within, details


def _same_value(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if a is None or b is None or a is pd.NA or b is pd.NA:
        return (a is None or a is pd.NA) and (b is None or b is pd.NA)
    return a == b or (pd.isna(a) and pd.isna(b))


def compare_fits(a: dict, b: dict, tol: Tolerances) -> tuple[bool, list[str]]:
    """Fitted laws: same law and formula; each parameter within tolerance; report CIs that stop overlapping."""
    if a.get("law") != b.get("law") or a.get("formula") != b.get("formula"):
        return False, [f"law {a.get('law')!r} vs {b.get('law')!r}"]
    within, details = True, []
    params_a, params_b = a.get("params", {}), b.get("params", {})
    if set(params_a) != set(params_b):
        return False, [f"parameters {sorted(params_a)} vs {sorted(params_b)}"]
    for name in params_a:
        rtol, atol = tol.for_column(name)
        value_a, value_b = params_a[name], params_b[name]
        if not _close(value_a, value_b, rtol, atol):
            within = False
            overlap = _intervals_overlap(a.get("ci", {}).get(name), b.get("ci", {}).get(name))
            ci_note = {True: "CIs overlap", False: "CIs do not overlap", None: "no CIs"}[overlap]
            details.append(f"{name}: {value_a!r} vs {value_b!r} beyond rtol={rtol:g} atol={atol:g} ({ci_note})")
        elif value_a != value_b:
            details.append(f"{name}: within tolerance ({value_a!r} vs {value_b!r})")
    for metric in ("r2", "rmse", "heldout_relative_error"):
        rtol, atol = tol.for_column(metric)
        if not _close(a.get(metric), b.get(metric), rtol, atol):
            within = False
            details.append(f"{metric}: {a.get(metric)!r} vs {b.get(metric)!r} beyond rtol={rtol:g} atol={atol:g}")
    return within, details


def _intervals_overlap(ci_a, ci_b) -> bool | None:
    if not ci_a or not ci_b or None in (*ci_a, *ci_b):
        return None
    return max(ci_a[0], ci_b[0]) <= min(ci_a[1], ci_b[1])


def compare_json(a, b, tol: Tolerances, where: str = "") -> tuple[bool, list[str]]:
    """Any other JSON document: numbers within tolerance (per key name), everything else exactly."""
    if isinstance(a, dict) and isinstance(b, dict):
        details, within = [], True
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                within = False
                details.append(f"{where}{key}: only in {'B' if key not in a else 'A'}")
                continue
            key_tol = Tolerances(*tol.for_column(str(key)), tol.figure_tol, tol.columns, tol.ignored)
            ok, more = compare_json(a[key], b[key], key_tol, f"{where}{key}.")
            within, details = within and ok, details + more
        return within, details
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        details, within = [], True
        for index, (left, right) in enumerate(zip(a, b)):
            ok, more = compare_json(left, right, tol, f"{where}{index}.")
            within, details = within and ok, details + more
        return within, details
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        if _close(float(a), float(b), tol.rtol, tol.atol):
            return True, []
        return False, [f"{where.rstrip('.')}: {a!r} vs {b!r} beyond rtol={tol.rtol:g} atol={tol.atol:g}"]
    if a == b:
        return True, []
    return False, [f"{where.rstrip('.')}: {a!r} vs {b!r}"]


def compare_figures(path_a: Path, path_b: Path, tol: Tolerances) -> tuple[bool, list[str]]:
    """Bytes differ (checked by the caller): the RMS pixel difference from matplotlib's image comparison."""
    from matplotlib.testing.compare import comparable_formats, compare_images
    from matplotlib.testing.exceptions import ImageComparisonFailure

    if path_a.suffix.lstrip(".") not in comparable_formats():
        return False, [f"bytes differ and {path_a.suffix} cannot be rasterised here (no converter installed)"]
    # compare_images writes converted and diff images next to its inputs: work on copies, never in a run tree.
    with tempfile.TemporaryDirectory() as scratch:
        expected = shutil.copyfile(path_a, Path(scratch) / f"a{path_a.suffix}")
        actual = shutil.copyfile(path_b, Path(scratch) / f"b{path_b.suffix}")
        try:
            result = compare_images(str(expected), str(actual), tol=0, in_decorator=True)
        except ImageComparisonFailure as error:  # raised when the image sizes differ
            return False, [str(error).splitlines()[0]]
    rms = 0.0 if result is None else float(result["rms"])
    within = rms <= tol.figure_tol
    return within, [f"RMS {rms:.4f} {'≤' if within else '>'} figure-tol {tol.figure_tol:g}"]


def artifact_kind(path: Path) -> str:
    if path.suffix in FIGURE_SUFFIXES:
        return "figure"
    if path.suffix in TABLE_SUFFIXES:
        return "table"
    return "json"


def compare_artifact(relative: str, path_a: Path, path_b: Path, tol: Tolerances) -> ArtifactDiff:
    kind = artifact_kind(path_a)
    if sha256_of(path_a) == sha256_of(path_b):
        return ArtifactDiff(relative, "fit" if kind == "json" and _is_fit(path_a) else kind, "identical")
    if kind == "figure":
        within, details = compare_figures(path_a, path_b, tol)
    elif kind == "table":
        try:
            within, details = compare_tables(read_table(path_a), read_table(path_b), tol)
        except (ValueError, OSError) as error:
            within, details = False, [f"cannot read as a table: {error}"]
    else:
        try:
            doc_a, doc_b = json.loads(path_a.read_text()), json.loads(path_b.read_text())
        except json.JSONDecodeError as error:
            return ArtifactDiff(relative, "json", "changed", [f"not valid JSON: {error}"])
        if _is_fit_doc(doc_a) and _is_fit_doc(doc_b):
            kind = "fit"
            within, details = compare_fits(doc_a, doc_b, tol)
        else:
            within, details = compare_json(doc_a, doc_b, tol)
    return ArtifactDiff(relative, kind, "within_tolerance" if within else "changed", details)


def _is_fit_doc(doc) -> bool:
    return isinstance(doc, dict) and {"law", "params", "ci"} <= set(doc)


def _is_fit(path: Path) -> bool:
    try:
        return _is_fit_doc(json.loads(path.read_text()))
    except json.JSONDecodeError:
        return False


def diff_trees(run_a: str | Path, run_b: str | Path, tol: Tolerances = Tolerances()) -> list[ArtifactDiff]:
    """Every artifact of either tree with its status, sorted by path."""
    roots = [Path(run_a), Path(run_b)]
    for label, root in zip("AB", roots):
        if not root.is_dir():
            raise FileNotFoundError(f"run {label} {root}: not a directory")
    artifacts_a, artifacts_b = list_artifacts(roots[0]), list_artifacts(roots[1])
    if not artifacts_a and not artifacts_b:
        raise ValueError(f"runs {roots[0]} and {roots[1]}: neither holds figures/ or results/ artifacts")
    diffs = []
    for relative in sorted(set(artifacts_a) | set(artifacts_b)):
        if relative not in artifacts_b:
            diffs.append(ArtifactDiff(relative, artifact_kind(artifacts_a[relative]), "missing", ["only in A"]))
        elif relative not in artifacts_a:
            diffs.append(ArtifactDiff(relative, artifact_kind(artifacts_b[relative]), "extra", ["only in B"]))
        else:
            diffs.append(compare_artifact(relative, artifacts_a[relative], artifacts_b[relative], tol))
    return diffs


def summary_counts(diffs: list[ArtifactDiff]) -> dict[str, int]:
    return {status: sum(d.status == status for d in diffs) for status in STATUS_ORDER}


def format_text(diffs: list[ArtifactDiff], run_a, run_b) -> str:
    counts = summary_counts(diffs)
    lines = [f"A: {run_a}", f"B: {run_b}",
             "  ".join(f"{status.replace('_', ' ')}: {count}" for status, count in counts.items())]
    for diff in diffs:
        if diff.status == "identical":
            continue
        lines.append(f"{diff.status.upper():>16}  {diff.kind:<6}  {diff.path}")
        lines.extend(f"{'':>26}{detail}" for detail in diff.details[:MAX_DETAILS])
        if len(diff.details) > MAX_DETAILS:
            lines.append(f"{'':>26}… {len(diff.details) - MAX_DETAILS} more")
    differing = sum(d.differs for d in diffs)
    lines.append(f"{differing} artifact(s) differ beyond tolerance" if differing else "no difference beyond tolerance")
    return "\n".join(lines)


def format_markdown(diffs: list[ArtifactDiff], run_a, run_b) -> str:
    counts = summary_counts(diffs)
    lines = [f"### qscaling diff: `{run_a}` vs `{run_b}`", "",
             " · ".join(f"{status.replace('_', ' ')}: **{count}**" for status, count in counts.items()), ""]
    shown = [d for d in diffs if d.status != "identical"]
    if shown:
        lines += ["| status | kind | artifact | details |", "|---|---|---|---|"]
        for diff in shown:
            detail = "<br>".join(d.replace("|", "\\|") for d in diff.details[:MAX_DETAILS])
            lines.append(f"| {diff.status.replace('_', ' ')} | {diff.kind} | `{diff.path}` | {detail} |")
    else:
        lines.append("All artifacts are byte-identical.")
    return "\n".join(lines) + "\n"


def parse_column_tolerance(text: str) -> tuple[str, tuple[float, float]]:
    """'loss=1e-3' or 'loss=1e-3:1e-6' → ('loss', (rtol, atol))."""
    name, sep, values = text.partition("=")
    parts = values.split(":")
    try:
        if not sep or not name or len(parts) > 2:
            raise ValueError
        rtol, atol = float(parts[0]), float(parts[1]) if len(parts) == 2 else 0.0
    except ValueError:
        raise ValueError(f"--column-tol {text!r}: expected COLUMN=RTOL or COLUMN=RTOL:ATOL, e.g. loss=1e-3:1e-6") \
            from None
    if rtol < 0 or atol < 0:
        raise ValueError(f"--column-tol {text!r}: tolerances must be ≥ 0")
    return name, (rtol, atol)


def tolerances_from_args(args) -> Tolerances:
    for option in ("rtol", "atol", "figure_tol"):
        if getattr(args, option) < 0:
            raise ValueError(f"--{option.replace('_', '-')} {getattr(args, option)}: must be ≥ 0")
    columns = dict(parse_column_tolerance(text) for text in args.column_tol)
    return Tolerances(args.rtol, args.atol, args.figure_tol, columns, tuple(args.ignore_column))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", metavar="RUN_A", help="result tree (working directory or reference/<scale>)")
    parser.add_argument("run_b", metavar="RUN_B", help="result tree compared against RUN_A")
    parser.add_argument("--rtol", type=float, default=0.0, help="relative tolerance for numbers (default 0)")
    parser.add_argument("--atol", type=float, default=0.0, help="absolute tolerance for numbers (default 0)")
    parser.add_argument("--column-tol", action="append", default=[], metavar="NAME=RTOL[:ATOL]",
                        help="tolerance for one table column or fit parameter (repeatable)")
    parser.add_argument("--ignore-column", action="append", default=[], metavar="NAME",
                        help="leave a table column out of the comparison (repeatable), e.g. a wall-clock timing")
    parser.add_argument("--figure-tol", type=float, default=0.0,
                        help="largest RMS pixel difference (0–255 scale) accepted for figures whose bytes differ")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="machine-readable output")
    output.add_argument("--markdown", action="store_true", help="a Markdown table (e.g. for a CI comment)")


def run(args) -> int:
    tol = tolerances_from_args(args)
    diffs = diff_trees(args.run_a, args.run_b, tol)
    if args.json:
        print(json.dumps({"run_a": str(args.run_a), "run_b": str(args.run_b), "tolerances": asdict(tol),
                          "counts": summary_counts(diffs), "artifacts": [asdict(d) for d in diffs]}, indent=2))
    elif args.markdown:
        print(format_markdown(diffs, args.run_a, args.run_b), end="")
    else:
        print(format_text(diffs, args.run_a, args.run_b))
    return 1 if any(d.differs for d in diffs) else 0


def fits_table(paths) -> pd.DataFrame:
    """Every fitted law as rows (one per parameter, with its CI and the fit's R²): the report's law table.

    A fit file holding `{"error": ...}` (the fit could not run at this scale) becomes one row with the reason.
    """
    rows = []
    for path in paths:
        doc = json.loads(Path(path).read_text())
        fit_name = f"{Path(path).parent.name}/{Path(path).stem}"
        if not _is_fit_doc(doc):
            rows.append({"fit": fit_name, "law": None, "parameter": None, "value": None, "ci_low": None,
                         "ci_high": None, "r2": None, "n_points": None, "note": doc.get("error", "not a fit")})
            continue
        for name, value in doc["params"].items():
            low, high = doc.get("ci", {}).get(name) or (None, None)
            rows.append({"fit": fit_name, "law": doc["law"], "parameter": name, "value": value, "ci_low": low,
                         "ci_high": high, "r2": doc.get("r2"), "n_points": doc.get("n_points"),
                         "note": "; ".join(doc.get("notes", []))})
    return pd.DataFrame(rows, columns=["fit", "law", "parameter", "value", "ci_low", "ci_high", "r2", "n_points",
                                       "note"])
