"""`qscaling run` (what `make figures` calls): it resumes a run killed mid-way by itself, and refuses while
another run is live in the same directory."""

import re
import subprocess
import sys

from conftest import qscaling_run_command

from qscaling.diff.artifacts import list_artifacts


def test_a_killed_run_resumes_by_itself_to_the_same_outputs(interrupted_smoke_run, smoke_run):
    run = interrupted_smoke_run
    assert run.lock_left, "the killed run should have left its lock (else this test shows nothing)"
    assert "resuming" in run.resume.stdout, run.resume.stdout[-2000:]
    ran_warm = re.search(r"(\d+) jobs ran in the warm worker", run.resume.stdout)
    assert ran_warm and int(ran_warm.group(1)) > 50, run.resume.stdout[-2000:]
    resumed = list_artifacts(run.workdir)
    assert len(resumed) > 50 and set(resumed) < set(list_artifacts(smoke_run))
    for relative in resumed:
        assert (run.workdir / relative).read_bytes() == (smoke_run / relative).read_bytes(), relative


def test_a_second_run_is_refused_while_one_is_live(tmp_path):
    workdir = tmp_path / "busy"
    (workdir / ".snakemake" / "locks").mkdir(parents=True)
    lock = workdir / ".snakemake" / "locks" / "0.input.lock"
    lock.write_text("results/x\n")
    # Stands in for a live Snakemake working in the directory (its command line names snakemake).
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "snakemake"], cwd=workdir)
    try:
        result = subprocess.run(qscaling_run_command(workdir), capture_output=True, text=True, timeout=120)
    finally:
        live.kill()
        live.wait()
    assert result.returncode == 1
    assert f"pid {live.pid}" in result.stderr and "running Snakemake" in result.stderr
    assert result.stderr.count("\n") == 1
    assert lock.exists(), "a live run's lock must be left alone"


def test_a_stale_lock_alone_is_cleared_and_said(tmp_path):
    workdir = tmp_path / "stale"
    (workdir / ".snakemake" / "locks").mkdir(parents=True)
    (workdir / ".snakemake" / "locks" / "0.input.lock").write_text("results/x\n")
    result = subprocess.run(qscaling_run_command(workdir) + ["--dry-run"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "resuming" in result.stdout
    assert not any((workdir / ".snakemake" / "locks").iterdir())


def test_targets_after_a_double_dash_stay_targets(tmp_path, repo_root):
    """`--configfile A B -- target` (the seed study's overlay, workflow/overlays/noise.yaml): "--" ends the list of
    config files, so the flags `qscaling run` adds must come before it, or Snakemake reads them as targets."""
    command = [
        sys.executable, "-m", "qscaling.cli", "run", "--directory", str(tmp_path), "--cores", "1", "--dry-run",
        "--configfile", str(repo_root / "config.yaml"), str(repo_root / "workflow" / "overlays" / "noise.yaml"),
        "--config", "scale=smoke", "--", "noise_model",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "noise_model" in result.stdout and "No rule to produce" not in result.stdout + result.stderr
