"""Provenance: for every output a machine-readable record of where it came from.

`results/provenance/<output path>.json` holds the producing rule, its wildcards and params, every input with
its sha256, the output's own sha256, code version (git describe + dirty flag), key package versions, the scale
preset and start/end times. Written atomically after the job's outputs exist. `job_context(snakemake)` wraps a
rule's script: logging and stderr to the rule's log, thread count, and the records on success.
"""

import contextlib
import datetime
import functools
import logging
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from qscaling.checkpoint import write_json_atomic
from qscaling.data.fetch import sha256_file

PACKAGES = ("qscaling", "torch", "transformers", "tokenizers", "snakemake", "numpy", "pandas", "scipy",
            "matplotlib", "seaborn")
PROVENANCE_DIR = Path("results") / "provenance"


@functools.cache
def code_version() -> str:
    """`git describe --always --dirty` of the qscaling checkout, or 'unknown' outside a git checkout."""
    source = Path(__file__).resolve().parent
    try:
        result = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"], cwd=source,
                                capture_output=True, text=True, timeout=10)
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
    for output in snakemake.output:
        write_json_atomic(record_path(output), {"output": str(output), "sha256": path_sha256(Path(output)), **common})


@contextlib.contextmanager
def job_context(snakemake):
    """Route logging/stderr to the rule's log, set torch threads, write provenance when the body succeeds."""
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    log_path = Path(snakemake.log[0])
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as log:
        previous_stderr = sys.stderr
        sys.stderr = log
        logging.basicConfig(stream=log, level=logging.INFO, force=True,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        try:
            import torch

            torch.set_num_threads(max(1, snakemake.threads))
            extra_inputs: dict = {}
            yield extra_inputs
            write_records(snakemake, started, extra_inputs)
        finally:
            sys.stderr = previous_stderr
