"""Compare two result trees: metric tables, fitted laws, claims verdicts and figures, with tolerances.

A result tree is a Snakemake working directory (or a `reference/<scale>` copy of one): its small outputs under
`figures/` and `results/` are compared file by file. Checkpoints, token shards and provenance records are left
out: they are inputs to the artifacts, not artifacts, and records carry wall-clock times.

    qscaling diff RUN_A RUN_B [--tolerances YAML] [--rtol R] [--atol A] [--column-tol loss=1e-3:0]
                              [--ignore-column NAME] [--noise-column delta=delta_se] [--noise-max Z]
                              [--noise-rms Z] [--prediction-tol R] [--figure-tol RMS] [--json|--markdown]

A profile such as reference/tolerances.yaml holds tolerances sized from measured cross-machine drift; why each
value is what it is: docs/operations.md.

Exit status: 0 when every artifact matches within tolerance, 1 otherwise, 2 on bad input.
"""

import argparse
import hashlib
import json
import math
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

# Only these kinds are artifacts; anything else under results/ is an intermediate (weights, shards, logs).
TABLE_SUFFIXES = (".parquet", ".csv", ".tsv")
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
JSON_SUFFIX = ".json"
# Under results/, these hold inputs or bookkeeping rather than reproduced numbers.
EXCLUDED_UNDER_RESULTS = ("runs", "data", "provenance", "report", "manifest.json")
# The root-mean-square change of a noise column is judged from this many rows up: over a handful of rows one
# flipped rounding alone decides it.
NOISE_RMS_MIN_ROWS = 20
# How many differing cells/values one artifact lists before summarising the rest.
MAX_DETAILS = 5
# A row says it was derived from a fit its data do not pin down (`qscaling.laws.result.ILL_CONDITIONED`) by a True
# `ill_conditioned` column or by this word in its `statistic` (a claims row).
ILL_CONDITIONED_MARK = "ill-conditioned"

STATUS_ORDER = ("changed", "missing", "extra", "within_tolerance", "identical")


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


def is_close(a, b, rtol: float, atol: float):
    """|a − b| ≤ atol + rtol·min(|a|, |b|), elementwise: relative to the smaller magnitude, so the order of the
    two runs does not matter and rtol = 1 means "within a factor 2 either way". atol is a floor for values that
    are exactly zero on one side; elsewhere rtol governs, however small the values (a fitted C_T ~1e-8)."""
    return np.abs(a - b) <= atol + rtol * np.minimum(np.abs(a), np.abs(b))


def _close(a, b, rtol: float, atol: float) -> bool:
    """`is_close` for two scalars; two missing values (None / NaN) match each other."""
    if _is_missing(a) or _is_missing(b):
        return _is_missing(a) and _is_missing(b)
    return bool(is_close(a, b, rtol, atol))


def compare_tables(a: pd.DataFrame, b: pd.DataFrame, tol: Tolerances) -> tuple[bool, list[str]]:
    """(within tolerance, details). Rows are compared in order: write_table fixes the row order."""
    details = []
    if list(a.columns) != list(b.columns):
        only_a = [c for c in a.columns if c not in b.columns]
        only_b = [c for c in b.columns if c not in a.columns]
        return False, [
            f"columns differ: only in A {only_a}, only in B {only_b}" if only_a or only_b else "column order differs"
        ]
    if len(a) != len(b):
        return False, [f"row count {len(a)} vs {len(b)}"]
    within = True
    unidentified = _unidentified_rows(a, b)
    if unidentified.any():
        details.append(
            f"{int(unidentified.sum())} rows derived from an ill-conditioned fit on both sides: their numbers are "
            "not compared, their words and verdicts are"
        )
    for column in a.columns:
        if column in tol.ignored:
            continue
        left, right = a[column].to_numpy(), b[column].to_numpy()
        if (
            pd.api.types.is_numeric_dtype(a[column])
            and pd.api.types.is_numeric_dtype(b[column])
            and not pd.api.types.is_bool_dtype(a[column])
        ):
            rtol, atol = tol.for_column(column)
            left, right = left.astype(float), right.astype(float)
            both_nan = np.isnan(left) & np.isnan(right)
            bad = ~both_nan & ~is_close(left, right, rtol, atol) & ~unidentified
            exact = bool(np.all(both_nan | (left == right)))
            noise = _within_noise(a, b, column, bad, tol) if bad.any() else None
            if noise is not None and noise[0]:
                details.append(
                    f"{column}: {int(bad.sum())} of {len(a)} rows beyond rtol={rtol:g} atol={atol:g}, {noise[1]}"
                )
            elif bad.any():
                within = False
                rows = np.flatnonzero(bad)
                # A value against NaN is the largest difference there is.
                worst = rows[np.argmax(np.nan_to_num(np.abs(left[rows] - right[rows]), nan=np.inf))]
                details.append(
                    f"{column}: {len(rows)} of {len(a)} rows beyond rtol={rtol:g} atol={atol:g}; "
                    f"largest at row {worst}: {left[worst]:.10g} vs {right[worst]:.10g}"
                    + (f"; {noise[1]}" if noise else "")
                )
            elif not exact:
                details.append(
                    f"{column}: within rtol={rtol:g} atol={atol:g} (max |Δ| {np.nanmax(np.abs(left - right)):.3g})"
                )
        else:
            unequal = [i for i in range(len(a)) if not _same_value(left[i], right[i])]
            rtol, atol = tol.for_column(column)
            beyond = [
                i
                for i in unequal
                if not (
                    isinstance(left[i], str)
                    and isinstance(right[i], str)
                    and text_within(left[i], right[i], rtol, atol, numbers=not unidentified[i])
                )
            ]
            borderline = [i for i in beyond if _borderline_verdict(a, b, column, i, tol)]
            beyond = [i for i in beyond if i not in borderline]
            if borderline:
                shown = ", ".join(f"row {i}: {left[i]!r} → {right[i]!r}" for i in borderline[:MAX_DETAILS])
                details.append(
                    f"{column}: {len(borderline)} borderline verdicts ({shown}): a CI bound within tolerance "
                    f"crosses {'0' if column == 'verdict' else 'the paper value'}"
                )
            if beyond:
                within = False
                shown = ", ".join(f"row {i}: {left[i]!r} → {right[i]!r}" for i in beyond[:MAX_DETAILS])
                details.append(f"{column}: {len(beyond)} rows differ ({shown})")
            quoting = [i for i in unequal if i not in beyond and i not in borderline]
            if quoting:
                details.append(f"{column}: {len(quoting)} rows quote numbers within rtol={rtol:g} atol={atol:g}")
    return within, details


_NUMBER = re.compile(r"[-+−]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _numbers_and_words(text: str) -> tuple[list[float], list[str]]:
    words = _NUMBER.split(text)
    numbers = [float(match.replace("−", "-")) for match in _NUMBER.findall(text)]
    return numbers, words


def text_within(a: str, b: str, rtol: float, atol: float, numbers: bool = True) -> bool:
    """Two texts that differ only in the numbers they quote, each within tolerance ('slope = 1.561 (5 points)');
    with `numbers` False, whatever numbers they quote."""
    numbers_a, words_a = _numbers_and_words(a)
    numbers_b, words_b = _numbers_and_words(b)
    return words_a == words_b and (not numbers or all(_close(x, y, rtol, atol) for x, y in zip(numbers_a, numbers_b)))


def _unidentified_rows(a: pd.DataFrame, b: pd.DataFrame) -> np.ndarray:
    """Rows both tables mark as derived from an ill-conditioned fit. Such a fit's parameters land wherever float
    noise puts them (its JSON is judged by its predictions alone), so a quantity computed from them — a claim's
    statistic, P* of each bootstrap refit — has no value to compare; what it says in words, and the verdict, does."""

    def marked(table: pd.DataFrame) -> np.ndarray:
        mark = np.zeros(len(table), dtype=bool)
        if "ill_conditioned" in table.columns:
            mark |= table["ill_conditioned"].fillna(False).astype(bool).to_numpy()
        if "statistic" in table.columns:
            mark |= table["statistic"].astype(str).str.contains(ILL_CONDITIONED_MARK, regex=False).to_numpy()
        return mark

    return marked(a) & marked(b)


_INTERVAL = re.compile(rf"^\[({_NUMBER.pattern}), ({_NUMBER.pattern})\]")


def _interval_of(text) -> tuple[float, float] | None:
    match = _INTERVAL.match(text) if isinstance(text, str) else None
    return None if match is None else tuple(float(bound.replace("−", "-")) for bound in match.groups())


def _borderline_verdict(a: pd.DataFrame, b: pd.DataFrame, column: str, row: int, tol: Tolerances) -> bool:
    """A claims verdict decided by where its CI ("[low, high] …") lies: 0 for the direction (`verdict`), the
    paper's value for `magnitude`. A flip is borderline, not a changed finding, when both CIs agree within the
    `ci` tolerance and a bound crosses that threshold: float noise alone then decides the verdict."""
    if column not in ("verdict", "magnitude") or "ci" not in a.columns or "ci" not in b.columns:
        return False
    threshold = 0.0
    if column == "magnitude":
        threshold = pd.to_numeric(a.at[row, "paper"], errors="coerce") if "paper" in a.columns else math.nan
    ci_a, ci_b = _interval_of(a.at[row, "ci"]), _interval_of(b.at[row, "ci"])
    if ci_a is None or ci_b is None or pd.isna(threshold):
        return False
    rtol, atol = tol.for_column("ci")
    agree = all(_close(x, y, rtol, atol) for x, y in zip(ci_a, ci_b))
    crosses = any((x - threshold) * (y - threshold) <= 0 for x, y in zip(ci_a, ci_b))
    return agree and crosses


def _within_noise(a: pd.DataFrame, b: pd.DataFrame, column: str, bad: np.ndarray, tol: Tolerances):
    """For a column measured with a standard error (`noise_columns`): (within, detail) from the changes in units
    of the two rows' combined SE over the rows that have one, or None when the column has none. Cross-machine
    float noise flips a few roundings (a GPTQ column, a W8A8 activation) and moves those rows by up to ~1.5 SE;
    a change of method moves every row of it: the largest and the root-mean-square change tell them apart."""
    se_column = tol.noise_columns.get(column)
    if se_column is None or se_column not in a.columns or se_column not in b.columns:
        return None
    change = np.abs(a[column].to_numpy(float) - b[column].to_numpy(float))
    se = np.hypot(a[se_column].to_numpy(float), b[se_column].to_numpy(float))
    measured = se > 0
    if (bad & ~measured).any():
        return False, f"{int((bad & ~measured).sum())} moved rows have no {se_column}"
    z = change[measured] / se[measured]
    largest, rms = float(z.max()), float(np.sqrt(np.mean(z**2)))
    rms_applies = len(z) >= NOISE_RMS_MIN_ROWS
    within = largest <= tol.noise_max and (rms <= tol.noise_rms or not rms_applies)
    rms_text = (
        f"rms {rms:.3g} {'≤' if rms <= tol.noise_rms else '>'} {tol.noise_rms:g}"
        if rms_applies
        else f"rms {rms:.3g} (not judged below {NOISE_RMS_MIN_ROWS} rows)"
    )
    return within, (
        f"in units of {se_column} over {len(z)} rows: largest {largest:.3g} "
        f"{'≤' if largest <= tol.noise_max else '>'} {tol.noise_max:g}, {rms_text}"
    )


def _same_value(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if a is None or b is None or a is pd.NA or b is pd.NA:
        return (a is None or a is pd.NA) and (b is None or b is pd.NA)
    return a == b or (pd.isna(a) and pd.isna(b))


def compare_fits(a: dict, b: dict, tol: Tolerances) -> tuple[bool, list[str]]:
    """Fitted laws: same law and formula, then the same parameters within tolerance — or, where parameters
    moved (a fit the data pin down poorly trades one parameter against another), the same predictions at
    every point either fit saw, within `prediction_tol`, with every parameter's CIs overlapping."""
    if a.get("law") != b.get("law") or a.get("formula") != b.get("formula"):
        return False, [f"law {a.get('law')!r} vs {b.get('law')!r}"]
    params_a, params_b = a.get("params", {}), b.get("params", {})
    if set(params_a) != set(params_b):
        return False, [f"parameters {sorted(params_a)} vs {sorted(params_b)}"]
    moved, details = [], []
    for name in params_a:
        rtol, atol = tol.for_column(name)
        value_a, value_b = params_a[name], params_b[name]
        if not _close(value_a, value_b, rtol, atol):
            moved.append(name)
            overlap = _intervals_overlap(a.get("ci", {}).get(name), b.get("ci", {}).get(name))
            ci_note = {True: "CIs overlap", False: "CIs do not overlap", None: "no CIs"}[overlap]
            details.append(f"{name}: {value_a!r} vs {value_b!r} beyond rtol={rtol:g} atol={atol:g} ({ci_note})")
        elif value_a != value_b:
            details.append(f"{name}: within tolerance ({value_a!r} vs {value_b!r})")
    if not moved:
        within = True
        for metric in ("r2", "rmse", "heldout_relative_error"):
            rtol, atol = tol.for_column(metric)
            if not _close(a.get(metric), b.get(metric), rtol, atol):
                within = False
                details.append(f"{metric}: {a.get(metric)!r} vs {b.get(metric)!r} beyond rtol={rtol:g} atol={atol:g}")
        return within, details
    agree, prediction_details = _same_predictions(a, b, tol)
    if all(_ill_conditioned(doc) for doc in (a, b)):
        # The data do not pin such a fit's parameters down (its notes say so): where they land depends on float
        # noise, so only what the data do determine, the predictions, can be compared.
        details.extend([*prediction_details, "both fits ill-conditioned: judged by their predictions alone"])
        return agree, details
    overlapping = all(_intervals_overlap(a.get("ci", {}).get(n), b.get("ci", {}).get(n)) for n in moved)
    details.extend(prediction_details)
    if not overlapping:
        details.append("a moved parameter's CIs do not overlap")
    in_noise = True
    for name in moved:
        se = math.hypot(*(doc.get("standard_errors", {}).get(name) or math.nan for doc in (a, b)))
        z = abs(params_a[name] - params_b[name]) / se if se > 0 else math.inf
        if not z <= tol.noise_max:
            in_noise = False
            details.append(f"{name} moved by {z:.3g} bootstrap SEs > {tol.noise_max:g}")
    return agree and overlapping and in_noise, details


def _ill_conditioned(doc: dict) -> bool:
    """Whether a fit JSON's notes flag its Jacobian as ill-conditioned (`qscaling.laws.result.ILL_CONDITIONED`)."""
    return any(note.startswith("ill-conditioned") for note in doc.get("notes", []))


def _same_predictions(a: dict, b: dict, tol: Tolerances) -> tuple[bool, list[str]]:
    """Both parameter sets evaluated at the points of both fits: the largest relative difference."""
    from qscaling.laws import LAWS

    law = LAWS.get(a["law"])
    points = [doc.get("points", {}).get("inputs") for doc in (a, b)]
    if law is None or not all(points):
        return False, ["parameters moved and the fits record no points to compare predictions at"]
    inputs = {name: np.concatenate([np.asarray(p[name], dtype=float) for p in points]) for name in law.inputs}
    with np.errstate(all="ignore"):
        predicted_a, predicted_b = law(a["params"], inputs), law(b["params"], inputs)
    change = np.abs(predicted_a - predicted_b) / np.maximum(np.abs(predicted_b), np.finfo(float).tiny)
    worst = float(np.max(change)) if change.size else 0.0
    within = bool(np.all(np.isfinite(change))) and worst <= tol.prediction_tol
    return within, [
        f"predictions at {change.size} points differ by ≤ {worst:.3g} (relative) "
        f"{'≤' if within else '>'} prediction-tol {tol.prediction_tol:g}"
    ]


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
            rtol, atol = tol.for_column(str(key))
            key_tol = replace(tol, rtol=rtol, atol=atol)
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
    if a == b or (isinstance(a, str) and isinstance(b, str) and text_within(a, b, tol.rtol, tol.atol)):
        return True, []
    return False, [f"{where.rstrip('.')}: {a!r} vs {b!r}"]


FIGURE_DATA_SUFFIX = ".data.json"  # qscaling.figures.data_path: what a figure draws, beside it


def figure_structure(doc):
    """A figure's data record with every number replaced by a placeholder and texts by their words: what stays
    when only the numbers drawn move."""
    if isinstance(doc, dict):
        return {key: figure_structure(value) for key, value in doc.items()}
    if isinstance(doc, list):
        if all(item is None or isinstance(item, (int, float)) for item in doc):
            return ("numbers", len(doc))
        return [figure_structure(item) for item in doc]
    if isinstance(doc, str):
        return tuple(_numbers_and_words(doc)[1])
    return "number" if isinstance(doc, (int, float)) or doc is None else doc


def compare_figure_data(doc_a: dict, doc_b: dict) -> tuple[bool, list[str]]:
    """Two records of what a figure draws: the same structure (axes, labels, how many lines, points, texts)."""
    if figure_structure(doc_a) == figure_structure(doc_b):
        return True, ["same structure (axes, labels, lines, points, texts); the numbers drawn moved"]
    axes_a, axes_b = doc_a.get("axes", []), doc_b.get("axes", [])
    if len(axes_a) != len(axes_b):
        return False, [f"{len(axes_a)} vs {len(axes_b)} axes"]
    for index, (a, b) in enumerate(zip(axes_a, axes_b)):
        for key in a:
            if figure_structure(a.get(key)) != figure_structure(b.get(key)):
                return False, [f"axes {index} {key} differ: {str(a.get(key))[:120]} vs {str(b.get(key))[:120]}"]
    return False, ["figure texts differ"]


def _figure_data_of(path: Path):
    data = path.with_suffix(FIGURE_DATA_SUFFIX)
    return json.loads(data.read_text()) if data.is_file() else None


def compare_figures(path_a: Path, path_b: Path, tol: Tolerances) -> tuple[bool, list[str]]:
    """Bytes differ (checked by the caller): the RMS pixel difference from matplotlib's image comparison. With
    `figure_structure`, a figure beyond figure-tol whose drawn data moved (its inputs did, and are compared as
    artifacts of their own) but kept their structure is within tolerance; one whose data are byte-identical but
    whose pixels moved has changed how it draws."""
    within, details = _pixel_difference(path_a, path_b, tol)
    if within or not tol.figure_structure:
        return within, details
    data_a, data_b = _figure_data_of(path_a), _figure_data_of(path_b)
    if data_a is None or data_b is None:
        return False, details + ["no data record (.data.json) beside both figures to compare structure"]
    if data_a == data_b:
        return False, details + ["the data drawn are identical: the drawing itself changed"]
    same, more = compare_figure_data(data_a, data_b)
    return same, details + more


def _pixel_difference(path_a: Path, path_b: Path, tol: Tolerances) -> tuple[bool, list[str]]:
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
    if path.name.endswith(FIGURE_DATA_SUFFIX):
        return "figure-data"
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
    elif kind == "figure-data":
        doc_a, doc_b = json.loads(path_a.read_text()), json.loads(path_b.read_text())
        if tol.figure_structure:
            within, details = compare_figure_data(doc_a, doc_b)
        else:
            within, details = compare_json(doc_a, doc_b, tol)
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
    lines = [
        f"A: {run_a}",
        f"B: {run_b}",
        "  ".join(f"{status.replace('_', ' ')}: {count}" for status, count in counts.items()),
    ]
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
    lines = [
        f"### qscaling diff: `{run_a}` vs `{run_b}`",
        "",
        " · ".join(f"{status.replace('_', ' ')}: **{count}**" for status, count in counts.items()),
        "",
    ]
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
    import yaml

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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", metavar="RUN_A", help="result tree (working directory or reference/<scale>)")
    parser.add_argument("run_b", metavar="RUN_B", help="result tree compared against RUN_A")
    parser.add_argument(
        "--tolerances",
        metavar="YAML",
        help="a tolerance profile (e.g. reference/tolerances.yaml); options given here override it",
    )
    parser.add_argument("--rtol", type=float, help="relative tolerance for numbers (default 0)")
    parser.add_argument("--atol", type=float, help="absolute tolerance for numbers (default 0)")
    parser.add_argument(
        "--column-tol",
        action="append",
        default=[],
        metavar="NAME=RTOL[:ATOL]",
        help="tolerance for one table column or fit parameter (repeatable)",
    )
    parser.add_argument(
        "--ignore-column",
        action="append",
        default=[],
        metavar="NAME",
        help="leave a table column out of the comparison (repeatable), e.g. a wall-clock timing",
    )
    parser.add_argument(
        "--noise-column",
        action="append",
        default=[],
        metavar="NAME[=SE_NAME]",
        help="compare a table column in units of its standard-error column (default NAME_se), "
        "bounded by --noise-max per row and --noise-rms over the rows (repeatable)",
    )
    parser.add_argument(
        "--noise-max",
        type=float,
        help="largest change of one row of a noise column, in SEs "
        "(default 3); also bounds a moved fit parameter in bootstrap SEs",
    )
    parser.add_argument(
        "--noise-rms", type=float, help="largest root-mean-square change over a noise column, in SEs (default 0.5)"
    )
    parser.add_argument(
        "--prediction-tol",
        type=float,
        help="for a fit whose parameters moved beyond tolerance: the largest relative change of its "
        "predictions, at the points either fit saw, still accepted (default 0)",
    )
    parser.add_argument(
        "--figure-structure",
        action="store_true",
        help="accept a figure beyond --figure-tol whose drawn data (its .data.json) kept their "
        "structure: its inputs moved, and are compared on their own",
    )
    parser.add_argument(
        "--figure-tol",
        type=float,
        help="largest RMS pixel difference (0–255 scale) accepted for figures whose bytes differ",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="machine-readable output")
    output.add_argument("--markdown", action="store_true", help="a Markdown table (e.g. for a CI comment)")


def run(args) -> int:
    tol = tolerances_from_args(args)
    diffs = diff_trees(args.run_a, args.run_b, tol)
    if args.json:
        print(
            json.dumps(
                {
                    "run_a": str(args.run_a),
                    "run_b": str(args.run_b),
                    "tolerances": asdict(tol),
                    "counts": summary_counts(diffs),
                    "artifacts": [asdict(d) for d in diffs],
                },
                indent=2,
            )
        )
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
            rows.append(
                {
                    "fit": fit_name,
                    "law": None,
                    "parameter": None,
                    "value": None,
                    "ci_low": None,
                    "ci_high": None,
                    "r2": None,
                    "n_points": None,
                    "note": doc.get("error", "not a fit"),
                }
            )
            continue
        for name, value in doc["params"].items():
            low, high = doc.get("ci", {}).get(name) or (None, None)
            rows.append(
                {
                    "fit": fit_name,
                    "law": doc["law"],
                    "parameter": name,
                    "value": value,
                    "ci_low": low,
                    "ci_high": high,
                    "r2": doc.get("r2"),
                    "n_points": doc.get("n_points"),
                    "note": "; ".join(doc.get("notes", [])),
                }
            )
    return pd.DataFrame(
        rows, columns=["fit", "law", "parameter", "value", "ci_low", "ci_high", "r2", "n_points", "note"]
    )
