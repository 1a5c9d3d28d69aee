"""Two result trees compared artifact by artifact, each by its kind."""

import json
from pathlib import Path

from qscaling.diff.artifacts import STATUS_ORDER, ArtifactDiff, artifact_kind, list_artifacts, read_table, sha256_of
from qscaling.diff.figures import compare_figure_data, compare_figures
from qscaling.diff.fits import compare_fits, is_fit_file
from qscaling.diff.tables import compare_tables
from qscaling.diff.tolerances import DEFAULT_TOLERANCES, Tolerances
from qscaling.diff.values import compare_json
from qscaling.laws.result import is_fit_dict


def compare_artifact(relative: str, path_a: Path, path_b: Path, tol: Tolerances) -> ArtifactDiff:
    kind = artifact_kind(path_a)
    if sha256_of(path_a) == sha256_of(path_b):
        return ArtifactDiff(relative, "fit" if kind == "json" and is_fit_file(path_a) else kind, "identical")
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
        if is_fit_dict(doc_a) and is_fit_dict(doc_b):
            kind = "fit"
            within, details = compare_fits(doc_a, doc_b, tol)
        else:
            within, details = compare_json(doc_a, doc_b, tol)
    return ArtifactDiff(relative, kind, "within_tolerance" if within else "changed", details)


def diff_trees(run_a: str | Path, run_b: str | Path, tol: Tolerances = DEFAULT_TOLERANCES) -> list[ArtifactDiff]:
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
