"""`qscaling run`: Snakemake on this workflow, resuming by itself after a crash.

A Snakemake run killed hard (kill -9, a lost node, a closed laptop) leaves its lock in `.snakemake/locks` and
its unfinished outputs marked incomplete; the next plain `snakemake` then refuses with a LockException. Here the
lock is removed only when no process still works in the directory (a Snakemake process or one of its jobs), the
run resumes with `--rerun-incomplete`, and it says so; while another run is live it refuses with one line.

    qscaling run [SNAKEMAKE ARGUMENTS ...]      e.g. qscaling run --cores 2 --config scale=smoke

Every argument goes to Snakemake unchanged (`--directory` names the directory checked). When the jobs run on this
machine (the local executor, not a dry run), a warm worker (`qscaling.worker`) runs them, so that torch and the
other libraries are imported once per run rather than once per job.
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

import psutil
import yaml

from qscaling import worker

SNAKEFILE = Path(__file__).resolve().parents[2] / "Snakefile"
# Snakemake's default job-rate limit (100 per second) makes its scheduler wake every second and size the inputs of
# every ready job, whether or not a job finished: on the default DAG, half of one of two cores (1,439 of 3,000
# ticks over 30 s). This limit, which no local run reaches, wakes it every 5 s instead. Not longer: each wake-up is
# a non-daemon timer that Snakemake's exit waits for (with a day's timespan it measured 49 ticks but never exited).
LOCAL_JOB_RATE = "10000/5s"
RATE_OPTIONS = ("--max-jobs-per-timespan", "--max-jobs-per-second")


class DirectoryBusy(RuntimeError):
    pass


def working_directory(snakemake_args: list[str]) -> Path:
    """The directory Snakemake works in: `--directory`/`-d` when given, else the current one."""
    for index, argument in enumerate(snakemake_args):
        if argument in ("--directory", "-d") and index + 1 < len(snakemake_args):
            return Path(snakemake_args[index + 1]).resolve()
        if argument.startswith("--directory="):
            return Path(argument.split("=", 1)[1]).resolve()
    return Path.cwd().resolve()


def is_locked(directory: Path) -> bool:
    locks = directory / ".snakemake" / "locks"
    return locks.is_dir() and any(locks.iterdir())


def _is_snakemake_process(command: list[str]) -> bool:
    """A Snakemake process (`snakemake …`, `python -m snakemake …`) or one of its script jobs."""
    names = [Path(part).name for part in command]
    return (
        "snakemake" in names
        or any(f"{os.sep}.snakemake{os.sep}scripts{os.sep}" in part for part in command)
        or any(a == "-m" and b == "snakemake" for a, b in zip(command, command[1:]))
    )


def processes_in(directory: Path) -> list[psutil.Process]:
    """Live Snakemake processes (and their jobs) other than this one whose working directory is `directory`."""
    found = []
    own = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    for process in psutil.process_iter(["pid", "cmdline", "cwd"]):
        try:
            command, cwd = process.info["cmdline"] or [], process.info["cwd"]
        except psutil.Error:
            continue
        if process.pid in own or not cwd or not _is_snakemake_process(command):
            continue
        if Path(cwd).resolve() == directory:
            found.append(process)
    return found


def prepare(directory: Path, snakemake_args: list[str]) -> bool:
    """Clear a stale lock left by a killed run; True when the run resumes one. DirectoryBusy while one is live."""
    if not is_locked(directory):
        return False
    live = processes_in(directory)
    if live:
        listed = ", ".join(f"pid {p.pid}" for p in live[:3])
        raise DirectoryBusy(
            f"{directory} is in use by a running Snakemake ({listed}); wait for it to finish or stop it first"
        )
    unlock = subprocess.run(snakemake_command(snakemake_args, "--unlock"), capture_output=True, text=True)
    if unlock.returncode != 0:
        raise DirectoryBusy(f"{directory}: snakemake --unlock failed: {unlock.stderr.strip().splitlines()[-1:]}")
    return True


def snakemake_command(snakemake_args: list[str], *extra: str) -> list[str]:
    """The Snakemake command line: this workflow's Snakefile unless the arguments name one. The `extra` flags go
    before the user's arguments: after a "--" (which ends a list option such as --configfile) they would be read
    as targets."""
    given = any(a in ("-s", "--snakefile") or a.startswith("--snakefile=") for a in snakemake_args)
    snakefile = [] if given else ["--snakefile", str(SNAKEFILE)]
    return [sys.executable, "-m", "snakemake", *snakefile, *extra, *snakemake_args]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "qscaling run [SNAKEMAKE ARGUMENTS ...]   e.g. qscaling run --cores 2 --config scale=smoke"
    parser.set_defaults(pass_on=True)


def run(args) -> int:
    snakemake_args = list(args.passed_on)
    directory = working_directory(snakemake_args)
    try:
        resuming = prepare(directory, snakemake_args)
    except DirectoryBusy as error:
        print(f"qscaling run: {error}", file=sys.stderr)
        return 1
    if resuming:
        print(
            f"qscaling run: resuming in {directory}: the previous run was interrupted; its lock is removed, "
            "finished outputs are kept and incomplete ones are made again",
            flush=True,
        )
    local = runs_jobs_here(snakemake_args)
    extra = ["--rerun-incomplete", *local_job_rate(snakemake_args)]
    with worker.started(enabled=local) as warm:
        returncode = subprocess.run(snakemake_command(snakemake_args, *extra), env=warm.env).returncode
    if local:
        print(f"qscaling run: {warm.summary()}", flush=True)
    return returncode


def local_job_rate(snakemake_args: list[str]) -> list[str]:
    """LOCAL_JOB_RATE's flag where the jobs run on this machine and neither the arguments nor a profile set a rate
    (a cluster's rate limit is its own)."""
    named = any(a.split("=")[0] in RATE_OPTIONS for a in snakemake_args)
    profiled = any(a.split("=")[0] == "--profile" for a in snakemake_args) or "SNAKEMAKE_PROFILE" in os.environ
    return (
        [] if named or profiled or not runs_jobs_here(snakemake_args) else ["--max-jobs-per-timespan", LOCAL_JOB_RATE]
    )


# Arguments after which Snakemake runs no job: nothing for a warm worker to do.
NO_JOBS = {"-n", "--dry-run", "--dryrun", "--unlock", "--lint", "--help", "-h", "--list-target-rules", "--report"}


def runs_jobs_here(snakemake_args: list[str]) -> bool:
    """Whether Snakemake will run jobs as processes of this machine: not a dry run, and the local executor (given,
    or the one of a profile named by its path), so that a warm worker can take them."""
    options = {}
    for index, argument in enumerate(snakemake_args):
        name, _, value = argument.partition("=")
        options[name] = value or (snakemake_args[index + 1] if index + 1 < len(snakemake_args) else "")
    if NO_JOBS & options.keys():
        return False
    executor = options.get("--executor", options.get("-e", "local"))
    profile = options.get("--profile") or os.environ.get("SNAKEMAKE_PROFILE")
    if profile:
        settings = Path(profile) / "config.yaml"
        if not settings.is_file():
            return False
        executor = (yaml.safe_load(settings.read_text()) or {}).get("executor", executor)
    return executor == "local"
