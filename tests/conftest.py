"""Shared fixtures: the repository root and a small learnable token stream."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from qscaling.diff.artifacts import list_artifacts
from qscaling.reproducible import REPRODUCIBLE_CPU_ENV
from qscaling.runner import LOCAL_JOB_RATE

# Without a GPU the Triton kernels run in Triton's interpreter, which reads this when triton is first imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]
# Fixtures that run the whole smoke DAG: a test using one is `slow`, outside `make test-fast`. `make test` runs two
# xdist workers with --dist loadgroup: every test of one run goes to the worker of that run's group, so each run is
# made once; the native-CPU run is compared with the committed reference only, so it runs beside the others.
DAG_GROUPS = {"smoke_run": "smoke_dag", "interrupted_smoke_run": "smoke_dag", "native_cpu_smoke_run": "native_dag"}
DAG_FIXTURES = set(DAG_GROUPS)
# Set by `make test-fast`: a real DAG run reached from a test not marked slow is a mistake in the test's marks.
FAST_TIER = os.environ.get("QSCALING_TEST_TIER") == "fast"
DRY_RUN_FLAGS = {"-n", "--dry-run", "--dryrun", "--lint", "--list-target-rules", "--detailed-summary", "--summary"}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(items):
    for item in items:
        groups = {DAG_GROUPS[name] for name in DAG_FIXTURES & set(getattr(item, "fixturenames", ()))}
        if groups:
            if len(groups) > 1:
                raise pytest.UsageError(f"{item.nodeid} uses the DAG runs of two xdist groups {sorted(groups)}")
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.xdist_group(groups.pop()))


@pytest.fixture(scope="session", autouse=True)
def single_thread():
    """Tiny matmuls: a second thread costs more in synchronisation than it saves, badly so on a busy machine;
    one thread also keeps in-process results independent of the machine's core count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="module")
def module_raw_config():
    """config.yaml as written (before presets), read once per module."""
    import yaml

    return yaml.safe_load((REPO_ROOT / "config.yaml").read_text())


@pytest.fixture
def raw_config(module_raw_config):
    """A copy of config.yaml a test may edit."""
    import copy

    return copy.deepcopy(module_raw_config)


@pytest.fixture(scope="module")
def default_config(module_raw_config):
    """The embedded default, resolved and validated."""
    from qscaling.config import resolve_config

    return resolve_config(module_raw_config)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality of two float32 tensors, NaN payloads aside."""
    a, b = a.cpu(), b.cpu()
    assert a.shape == b.shape and a.dtype == b.dtype
    return bool(((a.view(torch.int32) == b.view(torch.int32)) | (torch.isnan(a) & torch.isnan(b))).all())


def awkward_rows(rows: int, cols: int, seed: int, device: str = "cpu") -> torch.Tensor:
    """Rows spanning 60 binades, an all-zero row, and NaN / ±Inf / float32 subnormals / ±0 in row 0."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=generator)
    x = x * torch.exp2(torch.randint(-30, 30, (rows, 1), generator=generator).float())
    x[0, :6] = torch.tensor([0.0, float("nan"), float("inf"), -float("inf"), 1e-45, -0.0])
    x[1] = 0.0
    x[2, :4] = torch.tensor([2.5, -3.5, 0.5, -0.5]) * x[2].abs().max() / 7  # near-ties of INT grids
    return x.to(device)


def markov_tokens(
    n_tokens: int, vocab_size: int, *, chain_seed: int = 0, path_seed: int = 0, branching: int = 4
) -> np.ndarray:
    """A sparse Markov chain: each token has `branching` likely successors, so a model can learn it.

    `chain_seed` fixes the transition table (the "language"), `path_seed` the sampled text.
    """
    successors = np.random.default_rng(chain_seed).integers(0, vocab_size, size=(vocab_size, branching))
    choices = np.random.default_rng(path_seed).integers(0, branching, size=n_tokens)
    stream = np.empty(n_tokens, dtype=np.uint16)
    stream[0] = 0
    for i in range(1, n_tokens):
        stream[i] = successors[stream[i - 1], choices[i]]
    return stream


@pytest.fixture(scope="session")
def token_files(tmp_path_factory) -> dict:
    """train.bin / val.bin (uint16 shards) of one 64-token Markov language, different sample paths."""
    root = tmp_path_factory.mktemp("tokens")
    paths = {"train": root / "train.bin", "val": root / "val.bin"}
    markov_tokens(60_000, 64, path_seed=1).tofile(paths["train"])
    markov_tokens(8_000, 64, path_seed=2).tofile(paths["val"])
    return paths


# A whole smoke DAG (434 jobs) takes 12 min on 2 idle cores and longer beside the other xdist worker; a hang guard,
# not a goal, short enough that a hung run fails its tests with its log instead of running out CI's time.
SMOKE_TIMEOUT_S = 1500


def run_snakemake(
    workdir: Path,
    *args: str,
    scale: str = "smoke",
    timeout: int = SMOKE_TIMEOUT_S,
    env: dict | None = None,
    warm: bool = False,
    reproducible: bool = True,
) -> subprocess.CompletedProcess:
    """The real Snakefile, run with `workdir` as its working directory (`env`: extra environment variables) by
    plain Snakemake, or by `qscaling run` and its warm worker (`warm`; no `--` among `args`: argparse eats it), in
    reproducible CPU mode unless `reproducible` is False (`dag_environment`)."""
    if FAST_TIER and not DRY_RUN_FLAGS & set(args):
        pytest.fail("a Snakemake run outside a dry run in the fast tier: mark the test `slow`")
    if warm:
        command = qscaling_run_command(workdir, scale, *args)
    else:
        snakefile = ["-s", str(REPO_ROOT / "Snakefile")]
        command = [sys.executable, "-m", "snakemake", *snakefile, *workflow_arguments(workdir, scale), *args]
    environment = {**dag_environment(reproducible), **(env or {})}
    return run_whole(command, timeout, environment)


def run_whole(command: list[str], timeout: float, env: dict) -> subprocess.CompletedProcess:
    """`command` in a session of its own, captured; past `timeout` every process of it is killed (its jobs too, which
    would otherwise run on beside the rest of the suite) and the test fails with the end of its log."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"hung: {' '.join(command[-6:])} still ran after {timeout} s; its log ends:\n{stderr[-4000:]}")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def dag_environment(reproducible: bool = True) -> dict:
    """The environment of the suite's DAG runs: reproducible CPU mode (`qscaling.reproducible`), in which
    reference/smoke was made, so that a run on any x86-64 machine with AVX2 gives its bytes."""
    native = {name: value for name, value in os.environ.items() if name not in REPRODUCIBLE_CPU_ENV}
    return {**native, **REPRODUCIBLE_CPU_ENV} if reproducible else native


def workflow_arguments(workdir: Path, scale: str) -> list[str]:
    """The suite's DAG arguments; plain Snakemake runs get the job rate `qscaling run` gives (LOCAL_JOB_RATE)."""
    rate = ["--max-jobs-per-timespan", LOCAL_JOB_RATE]
    return ["--directory", str(workdir), "--cores", "2", *rate, "--config", f"scale={scale}"]


def qscaling_run_command(workdir: Path, scale: str = "smoke", *targets: str) -> list[str]:
    """`qscaling run` (what `make figures` calls) on `targets` (default: every figure) in `workdir`."""
    return [sys.executable, "-m", "qscaling.cli", "run", *targets, *workflow_arguments(workdir, scale)]


def copy_artifacts_like(source: Path, like: Path, destination: Path) -> Path:
    """`destination` holding `source`'s copy of each artifact that `like` has: a full run cut to a slice's files."""
    for relative in list_artifacts(like):
        (destination / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / relative, destination / relative)
    return destination


@dataclass
class InterruptedRun:
    workdir: Path
    killed_at: str  # Snakemake's progress line when the run was killed
    lock_left: bool  # the killed run left its lock behind
    resume: subprocess.CompletedProcess


def kill_when_done(command: list[str], log: Path, fraction: float, timeout: float = SMOKE_TIMEOUT_S) -> str:
    """Start `command` in a session of its own; SIGKILL all of it (every job too, as a crash would) once
    Snakemake reports `fraction` of its steps done. Returns that progress line."""
    with open(log, "w") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=dag_environment()
        )
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and process.poll() is None:
            done = PROGRESS.findall(log.read_text())
            if done and int(done[-1][0]) >= fraction * int(done[-1][1]):
                return " ".join(done[-1][:2]) + " steps done"
            time.sleep(0.5)
        raise AssertionError(
            f"the run ended or timed out before {fraction:.0%} of it was done:\n" + log.read_text()[-2000:]
        )
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


PROGRESS = re.compile(r"(\d+) of (\d+) steps \(\d+%\) done")


# A slice of the smoke DAG with every kind of training job's work after it (QAT training, scoring as trained, a
# study table, fits, a figure): 90 jobs, so a kill at a quarter leaves the resume more than 50 to do.
INTERRUPTED_TARGETS = ("chen2025_fig4",)


@pytest.fixture(scope="session")
def interrupted_smoke_run(tmp_path_factory) -> InterruptedRun:
    """A smoke run of `INTERRUPTED_TARGETS` killed (SIGKILL, jobs included) a quarter of the way through, then
    finished by `qscaling run`."""
    workdir = tmp_path_factory.mktemp("smoke_interrupted")
    command = qscaling_run_command(workdir, "smoke", *INTERRUPTED_TARGETS)
    killed_at = kill_when_done(command, workdir.parent / "smoke_interrupted.log", 0.25)
    locks = workdir / ".snakemake" / "locks"
    lock_left = locks.is_dir() and any(locks.iterdir())
    resume = run_whole(command, SMOKE_TIMEOUT_S, dag_environment())
    assert resume.returncode == 0, resume.stdout[-2000:] + resume.stderr[-3000:]
    return InterruptedRun(workdir, killed_at, lock_left, resume)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """One complete smoke run of the default target by `qscaling run`, shared by every end-to-end test (the
    interrupted slice, plain Snakemake's slice and the Slurm slice are each compared with it byte for byte)."""
    workdir = tmp_path_factory.mktemp("smoke_first")
    result = run_snakemake(workdir, warm=True)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return workdir


def cpu_capability(env: dict | None = None) -> str:
    """The vector ISA torch's CPU kernels take in a fresh process with `env` added."""
    probe = [sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability().lower())"]
    return subprocess.run(
        probe, capture_output=True, text=True, check=True, env={**os.environ, **(env or {})}
    ).stdout.strip()


@pytest.fixture(scope="session")
def native_cpu_smoke_run(tmp_path_factory) -> Path:
    """Every result of a smoke run, up to the claims, on the code paths the libraries pick for this CPU (not
    reproducible CPU mode): what a user of another machine who does not ask for that mode gets. Figures are left
    out: they draw those results, and the byte-for-byte run covers them."""
    if cpu_capability() == cpu_capability(REPRODUCIBLE_CPU_ENV):
        pytest.skip(f"torch offers this CPU no code path other than {cpu_capability()!r}")
    workdir = tmp_path_factory.mktemp("smoke_native_cpu")
    result = run_snakemake(workdir, "results/claims.csv", warm=True, reproducible=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "jobs ran in the warm worker" in result.stdout, result.stdout[-2000:]
    return workdir
