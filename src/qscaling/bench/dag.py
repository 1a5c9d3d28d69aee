"""`qscaling bench dag`: the workflow run twice from scratch in one invocation, by plain Snakemake (one
interpreter per job) and by `qscaling run` (its warm worker), with wall time, summed job time, how busy the cores
were, and whether the two produced the same artifacts."""

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from qscaling.diff.trees import diff_trees
from qscaling.runner import snakemake_command


def add_arguments(parser) -> None:
    parser.add_argument("targets", nargs="*", help="Snakemake targets (default: every figure, the claims, the tables)")
    parser.add_argument("--scale", default="smoke", help="config preset (default: smoke)")
    parser.add_argument("--cores", type=int, default=2)


def job_seconds(workdir: Path) -> tuple[int, float]:
    """Jobs run and their summed wall time, from the rules' `benchmark:` files."""
    times = [float(p.read_text().splitlines()[1].split("\t")[0]) for p in (workdir / "benchmarks").rglob("*.tsv")]
    return len(times), sum(times)


def run(args) -> int:
    # Targets first: after `--config` Snakemake would read them as more config items.
    common = [*args.targets, "--cores", str(args.cores), "--config", f"scale={args.scale}"]
    ways = {
        "plain snakemake": lambda workdir: snakemake_command([*common, "--directory", str(workdir)]),
        "qscaling run": lambda workdir: [sys.executable, "-m", "qscaling.cli", "run", *common, "--directory",
                                         str(workdir)],
    }  # fmt: skip
    workdirs, walls = {}, {}
    print(f"{'':<16} {'wall':>9} {'jobs':>5} {'job time':>10} {'cores busy':>10}")
    try:
        for label, command in ways.items():
            workdirs[label] = Path(tempfile.mkdtemp(prefix="qscaling-bench-dag-"))
            started = time.perf_counter()
            result = subprocess.run(command(workdirs[label]), capture_output=True, text=True)
            walls[label] = time.perf_counter() - started
            if result.returncode != 0:
                print(f"qscaling bench dag: {label} failed:\n{result.stderr[-3000:]}", file=sys.stderr)
                return 1
            jobs, seconds = job_seconds(workdirs[label])
            print(
                f"{label:<16} {walls[label]:>8.1f}s {jobs:>5} {seconds:>9.1f}s {seconds / (args.cores * walls[label]):>10.0%}"
            )
        plain, warm = walls.values()
        moved = [d.path for d in diff_trees(*workdirs.values()) if d.status != "identical"]
        print(f"qscaling run / plain snakemake: {plain / warm:.2f}x faster; artifacts "
              + ("identical" if not moved else f"differ: {', '.join(moved[:5])}"))  # fmt: skip
        return 1 if moved else 0
    finally:
        for workdir in workdirs.values():
            shutil.rmtree(workdir, ignore_errors=True)
