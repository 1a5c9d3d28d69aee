"""A result tree's artifacts (tables, JSON, figures and their data records): where they lie, their kinds, a copy
of them, and the record of how one compared.

Checkpoints, token shards and provenance records are left out: they are inputs to the artifacts, not artifacts,
and records carry wall-clock times.
"""

import hashlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

# Only these kinds are artifacts; anything else under results/ is an intermediate (weights, shards, logs).
TABLE_SUFFIXES = (".parquet", ".csv", ".tsv")
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
JSON_SUFFIX = ".json"
# Under results/, these hold inputs or bookkeeping rather than reproduced numbers.
EXCLUDED_UNDER_RESULTS = ("runs", "data", "provenance", "report", "manifest.json")
FIGURE_DATA_SUFFIX = ".data.json"  # qscaling.figures.data_path: what a figure draws, beside it
# How many differing cells/values one artifact lists before summarising the rest.
MAX_DETAILS = 5

STATUS_ORDER = ("changed", "missing", "extra", "within_tolerance", "identical")


@dataclass
class ArtifactDiff:
    """How one artifact compared: its status and, where it is not identical, what differs."""

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


def artifact_kind(path: Path) -> str:
    if path.name.endswith(FIGURE_DATA_SUFFIX):
        return "figure-data"
    if path.suffix in FIGURE_SUFFIXES:
        return "figure"
    if path.suffix in TABLE_SUFFIXES:
        return "table"
    return "json"
