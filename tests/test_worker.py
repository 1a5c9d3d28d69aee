"""The warm worker of `qscaling run` (qscaling.worker): a job handed to it runs as it would in its own interpreter
(arguments, directory, environment, streams, exit status, signals), and a job it cannot take runs in its own."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from qscaling import worker
from qscaling.runner import LOCAL_JOB_RATE, local_job_rate, runs_jobs_here

REPO_ROOT = Path(__file__).resolve().parents[1]

# A job script as the workflow's are: delegate first, then its imports and work. It reports where it ran.
JOB = textwrap.dedent(
    """
    import os, sys, time
    from qscaling.worker import delegate

    delegate()
    import torch
    import qscaling.worker

    Path = __import__("pathlib").Path
    Path("report.txt").write_text(
        f"in_worker={qscaling.worker._serving} pid={os.getpid()} tmpdir={os.environ.get('TMPDIR')} "
        f"argv={sys.argv[1:]} threads={os.environ['OMP_NUM_THREADS']}"
    )
    print("to stdout")
    print("to stderr", file=sys.stderr)
    if sys.argv[1] == "raise":
        raise RuntimeError("the job failed")
    if sys.argv[1] == "sleep":
        time.sleep(120)
    sys.exit(int(sys.argv[1]))
    """
)


@pytest.fixture(scope="module")
def warm():
    with worker.started() as started:
        yield started


def run_job(directory: Path, argument: str, env: dict, **extra) -> subprocess.CompletedProcess:
    directory.mkdir(exist_ok=True)
    (directory / "job.py").write_text(JOB)
    return subprocess.run(
        [sys.executable, "job.py", argument], cwd=directory, env={**env, **extra}, capture_output=True, text=True
    )


def report(directory: Path) -> dict:
    return dict(item.split("=", 1) for item in (directory / "report.txt").read_text().split(" "))


def job_env(warm: worker.Worker) -> dict:
    """What Snakemake gives a one-thread job: the run's environment, the thread variables, its own TMPDIR."""
    return worker.worker_environment(warm.env)


def test_a_job_runs_in_the_worker_with_its_own_arguments_directory_streams_and_status(warm, tmp_path):
    result = run_job(tmp_path / "job", "3", job_env(warm), TMPDIR=str(tmp_path))
    assert result.returncode == 3
    assert (result.stdout, result.stderr) == ("to stdout\n", "to stderr\n")
    seen = report(tmp_path / "job")
    assert seen["in_worker"] == "True"
    assert (seen["argv"], seen["tmpdir"]) == ("['3']", str(tmp_path))


def test_a_failing_job_fails_with_its_traceback(warm, tmp_path):
    result = run_job(tmp_path / "job", "raise", job_env(warm))
    assert result.returncode == 1
    assert "RuntimeError: the job failed" in result.stderr
    assert report(tmp_path / "job")["in_worker"] == "True"


def test_jobs_run_in_separate_processes(warm, tmp_path):
    pids = set()
    for name in ("a", "b"):
        assert run_job(tmp_path / name, "0", job_env(warm)).returncode == 0
        pids.add(report(tmp_path / name)["pid"])
    assert len(pids) == 2


@pytest.mark.parametrize("difference", [{"OMP_NUM_THREADS": "2"}, {"ATEN_CPU_CAPABILITY": "default"}])
def test_a_job_whose_environment_differs_runs_in_its_own_interpreter(warm, tmp_path, difference):
    env = job_env(warm) | difference
    result = run_job(tmp_path / "job", "0", env)
    assert result.returncode == 0
    assert report(tmp_path / "job")["in_worker"] == "False"


def test_without_a_reachable_worker_a_job_runs_in_its_own_interpreter(tmp_path):
    env = worker.worker_environment(dict(os.environ)) | {worker.SOCKET_VARIABLE: str(tmp_path / "no-such-socket")}
    assert run_job(tmp_path / "job", "0", env).returncode == 0
    assert report(tmp_path / "job")["in_worker"] == "False"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_to_the_job_stops_the_copy_running_it(warm, tmp_path, signum):
    directory = tmp_path / "job"
    directory.mkdir()
    (directory / "job.py").write_text(JOB)
    job = subprocess.Popen([sys.executable, "job.py", "sleep"], cwd=directory, env=job_env(warm))
    deadline = time.monotonic() + 120
    while not (directory / "report.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    copy = int(report(directory)["pid"])
    assert copy != job.pid
    job.send_signal(signum)
    job.wait(timeout=30)
    while Path(f"/proc/{copy}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{copy}").exists(), "the copy outlived its job"


def test_the_worker_says_what_it_ran_and_what_it_refused(tmp_path):
    with worker.started() as warm:
        run_job(tmp_path / "a", "0", job_env(warm))
        run_job(tmp_path / "b", "0", job_env(warm) | {"OMP_NUM_THREADS": "2"})
    assert (warm.served, warm.refused, warm.differing) == (1, 1, ["OMP_NUM_THREADS"])
    assert warm.summary() == (
        "1 jobs ran in the warm worker, 1 in interpreters of their own (environment differs: OMP_NUM_THREADS)"
    )
    assert not Path(warm.env[worker.SOCKET_VARIABLE]).parent.exists(), "the worker's socket folder is left behind"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["--cores", "2"], True),
        (["--cores", "2", "--profile", str(REPO_ROOT / "profiles" / "local")], True),
        (["--cores", "2", "-n"], False),
        (["--dry-run"], False),
        (["--executor", "slurm"], False),
        (["--executor=slurm"], False),
        (["--profile", str(REPO_ROOT / "profiles" / "slurm")], False),
        (["--profile", "no-such-profile"], False),
    ],
)
def test_the_worker_starts_only_where_jobs_run_on_this_machine(arguments, expected):
    assert runs_jobs_here(arguments) is expected


@pytest.mark.parametrize(
    "arguments, expected",
    [
        (["--cores", "2"], ["--max-jobs-per-timespan", LOCAL_JOB_RATE]),
        (["--cores", "2", "--max-jobs-per-timespan", "5/1s"], []),
        (["--cores", "2", "--max-jobs-per-second=5"], []),
        (["--profile", "profiles/slurm"], []),
        (["--executor", "slurm"], []),
        (["--cores", "2", "--dry-run"], []),
    ],
)
def test_local_runs_lift_the_job_rate_limit_whose_wake_ups_cost_half_a_core(arguments, expected, monkeypatch):
    monkeypatch.delenv("SNAKEMAKE_PROFILE", raising=False)
    assert local_job_rate(arguments) == expected


def test_snakemake_exits_at_once_under_the_local_job_rate(tmp_path):
    # Each scheduling round leaves a timer of the rate's timespan that Snakemake's exit waits for: with a day's,
    # a finished run never exits.
    (tmp_path / "Snakefile").write_text('rule all:\n    output: "done.txt"\n    shell: "touch {output}"\n')
    command = [sys.executable, "-m", "snakemake", "-s", str(tmp_path / "Snakefile"), "--directory", str(tmp_path),
               "--cores", "1", "--max-jobs-per-timespan", LOCAL_JOB_RATE]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "done.txt").exists()


def test_snakemake_hands_a_one_thread_job_to_the_worker_and_runs_a_two_thread_job_itself(tmp_path):
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent(
            """
            rule all:
                input: "one.txt", "two.txt"

            rule one:
                output: "one.txt"
                threads: 1
                script: "job.py"

            rule two:
                output: "two.txt"
                threads: 2
                script: "job.py"
            """
        )
    )
    (tmp_path / "job.py").write_text(
        textwrap.dedent(
            """
            from qscaling.worker import delegate

            delegate()
            import qscaling.worker

            open(snakemake.output[0], "w").write(str(qscaling.worker._serving))
            """
        )
    )
    command = [sys.executable, "-m", "qscaling.cli", "run", "-s", str(tmp_path / "Snakefile"), "--cores", "2"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "one.txt").read_text() == "True"
    assert (tmp_path / "two.txt").read_text() == "False"
    assert "qscaling run: 1 jobs ran in the warm worker, 1 in interpreters of their own (environment differs: " in (
        result.stdout
    )
    assert "OMP_NUM_THREADS" in result.stdout


def test_bench_dag_runs_the_workflow_both_ways_and_compares_their_artifacts():
    command = [sys.executable, "-m", "qscaling.cli", "bench", "dag", "figures/ouyang2024/fig13.png"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:3]] == ["plain", "qscaling"]
    assert lines[-1].startswith("qscaling run / plain snakemake: ") and lines[-1].endswith("artifacts identical")
