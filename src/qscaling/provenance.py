"""Provenance: for every output a machine-readable record of where it came from.

`results/provenance/<output path>.json` holds the producing rule, its wildcards and params, every input with
its sha256, the output's own sha256, code version (git describe + dirty flag), key package versions, the scale
preset and start/end times. Written atomically after the job's outputs exist. `job_context(snakemake)` wraps a
rule's script: logging and stderr to the rule's log, thread count, and the records on success.
`results/manifest.json` gathers every record of the working directory; it is merged under a file lock as each
job finishes, so an interrupted run still leaves a valid manifest of what it finished.
"""

import contextlib
import datetime
import fcntl
import functools
import json
import logging
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from qscaling.atomic import write_json
from qscaling.data.fetch import sha256_file

PACKAGES = (
    "qscaling",
    "torch",
    "transformers",
    "tokenizers",
    "snakemake",
    "numpy",
    "pandas",
    "scipy",
    "matplotlib",
    "seaborn",
)
PROVENANCE_DIR = Path("results") / "provenance"
# All records of a working directory in one file, refreshed as each job finishes and when the workflow ends.
MANIFEST_PATH = Path("results") / "manifest.json"


@functools.cache
def code_version() -> str:
    """`git describe --always --dirty` of the qscaling checkout, or 'unknown' outside a git checkout."""
    source = Path(__file__).resolve().parent
    try:
        result = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=source,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return result.stdout.strip() if result.returncode == 0 else "unknown"


@functools.cache
def package_versions() -> dict:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    versions["python"] = sys.version.split()[0]
    return versions


def path_sha256(path: Path) -> str | dict:
    """A file's sha256; for a directory, a mapping of its files (relative) to their sha256."""
    if path.is_dir():
        return {str(p.relative_to(path)): sha256_file(p) for p in sorted(path.rglob("*")) if p.is_file()}
    return sha256_file(path) if path.exists() else None


def record_path(output: str | os.PathLike) -> Path:
    return PROVENANCE_DIR / f"{output}.json"


def read_record(output: str | os.PathLike, root: str | os.PathLike = ".") -> dict | None:
    """The record of `output` (a path relative to the run's working directory `root`); None if it has none."""
    path = Path(root) / record_path(output)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"provenance record {path}: not valid JSON ({error})") from error


def read_all_records(root: str | os.PathLike = ".") -> dict[str, dict]:
    """Every record under `root`, keyed by output path (temporary files of unfinished writes are skipped)."""
    records = {}
    for path in sorted((Path(root) / PROVENANCE_DIR).rglob("*.json")):
        record = json.loads(path.read_text())
        records[record["output"]] = record
    return records


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def write_records(snakemake, started: str, extra_inputs: dict | None = None) -> None:
    inputs = {str(p): path_sha256(Path(p)) for p in snakemake.input}
    inputs.update(extra_inputs or {})
    common = {
        "rule": snakemake.rule,
        "wildcards": _jsonable(dict(snakemake.wildcards.items())),
        "params": _jsonable(dict(snakemake.params.items())),
        "inputs": inputs,
        "code_version": code_version(),
        "packages": package_versions(),
        "scale": snakemake.config.get("scale"),
        "started": started,
        "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    records = [{"output": str(output), "sha256": path_sha256(Path(output)), **common} for output in snakemake.output]
    for record in records:
        write_json(record_path(record["output"]), record)
    add_to_manifest(records)


@contextlib.contextmanager
def _manifest_lock(root: Path):
    """Serialise read-modify-write of the manifest between jobs finishing at the same time (local or cluster)."""
    lock_path = root / MANIFEST_PATH.with_name(".manifest.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _manifest(records: dict[str, dict]) -> dict:
    outputs = {output: {k: v for k, v in record.items() if k != "output"} for output, record in sorted(records.items())}
    return {
        "updated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "scales": sorted({str(r.get("scale")) for r in records.values()}),
        "code_versions": sorted({str(r.get("code_version")) for r in records.values()}),
        "outputs": outputs,
    }


def add_to_manifest(records: list[dict], root: str | os.PathLike = ".") -> Path:
    """Merge one job's records into `results/manifest.json`: every finished job leaves a valid manifest behind."""
    root = Path(root)
    with _manifest_lock(root):
        current = {}
        if (root / MANIFEST_PATH).is_file():
            try:
                outputs = json.loads((root / MANIFEST_PATH).read_text()).get("outputs", {})
                current = {output: {"output": output, **entry} for output, entry in outputs.items()}
            except json.JSONDecodeError:  # only a hand-edited file can be torn: rebuild it from the records
                current = read_all_records(root)
        current.update({record["output"]: record for record in records})
        write_json(root / MANIFEST_PATH, _manifest(current))
    return root / MANIFEST_PATH


def write_manifest(root: str | os.PathLike = ".") -> Path:
    """Rebuild `results/manifest.json` from the per-output records (run at the end of a workflow, ok or not)."""
    root = Path(root)
    with _manifest_lock(root):
        write_json(root / MANIFEST_PATH, _manifest(read_all_records(root)))
    return root / MANIFEST_PATH


@contextlib.contextmanager
def job_context(snakemake):
    """Route logging/stderr to the rule's log, set torch threads, write provenance when the body succeeds."""
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    log_path = Path(snakemake.log[0])
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as log:
        previous_stderr = sys.stderr
        sys.stderr = log
        logging.basicConfig(
            stream=log, level=logging.INFO, force=True, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        try:
            import torch  # not at the top: the Snakefile imports this module to build the DAG, torch-free

            torch.set_num_threads(max(1, snakemake.threads))
            extra_inputs: dict = {}
            yield extra_inputs
            write_records(snakemake, started, extra_inputs)
        finally:
            sys.stderr = previous_stderr
