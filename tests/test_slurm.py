"""The smoke DAG through `--profile profiles/slurm` on a real one-node Slurm started here, equal to a local run.

The cluster runs as root without systemd: munged on a private socket and key, `slurmctld -D -i`, `slurmd -D -N
localhost`, non-default ports (so a real cluster on this host is left alone), fake GPUs through gres.conf with
`File=/dev/null`, no accounting (hence the profile's `slurm-status-command: squeue`). The config has to live at
/etc/slurm/slurm.conf: the job-step plugin strips SLURM_CONF from the environment of the `srun` inside each job.
An existing slurm.conf that this test did not write is never touched (the test skips). Every daemon started
here is stopped by its PID, also when the test fails. Skipped, with the reason, where Slurm is not installed
(.ci/run installs slurm-wlm and munge with apt-get when it can).
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO_ROOT, copy_artifacts_like, dag_environment

from qscaling.diff.artifacts import list_artifacts

pytestmark = pytest.mark.slow

SLURM_DIR = Path("/etc/slurm")
MARKER = "# written by qscaling tests/test_slurm.py"
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "srun", "scancel")
CTLD_PORT, SLURMD_PORT = 16817, 16818
# Rules the profile sends to a GPU; the sbatch calls of their jobs must ask for one.
GPU_RULES = (
    "train_run",
    "score_ladder",
    "score_kumar2024",
    "score_ouyang2024",
    "score_ahmadian2023",
    "score_chen2025",
    "score_sun2025",
    "score_kumar2024_training",
)


def missing_requirement() -> str | None:
    """Why a one-node Slurm cannot be started here, or None."""
    if os.geteuid() != 0:
        return "the one-node Slurm runs its daemons as root; run the tests as root"
    missing = [name for name in DAEMONS + CLIENTS + ("mungekey",) if shutil.which(name) is None]
    if missing:
        return f"Slurm/munge not installed (missing {', '.join(missing)}); .ci/run installs slurm-wlm and munge"
    conf = SLURM_DIR / "slurm.conf"
    if conf.exists() and MARKER not in conf.read_text():
        return f"{conf} belongs to a real Slurm installation; not overwriting it"
    return None


def slurm_conf(workdir: Path, node: dict) -> str:
    return f"""{MARKER}
ClusterName=qscaling
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={CTLD_PORT}
SlurmdPort={SLURMD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={workdir}/munge/munge.socket
StateSaveLocation={workdir}/state
SlurmdSpoolDir={workdir}/spool
SlurmctldPidFile={workdir}/slurmctld.pid
SlurmdPidFile={workdir}/slurmd.pid
SlurmctldLogFile={workdir}/log/slurmctld.log
SlurmdLogFile={workdir}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
GresTypes=gpu
MinJobAge=300
NodeName=localhost NodeAddr=127.0.0.1 CPUs={node["CPUs"]} RealMemory={node["RealMemory"]} Gres=gpu:1 State=UNKNOWN
PartitionName=qscaling Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def node_hardware() -> dict:
    """CPUs and RealMemory as slurmd itself detects them (a node declared larger would be drained)."""
    report = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout
    fields = dict(item.split("=", 1) for item in report.split() if "=" in item)
    return {"CPUs": int(fields["CPUs"]), "RealMemory": int(fields["RealMemory"])}


class OneNodeSlurm:
    """munged + slurmctld + slurmd as child processes of this test, stopped by PID."""

    def __init__(self):
        self.workdir = Path(tempfile.mkdtemp(prefix="qscaling-slurm-"))
        self.processes: dict[str, subprocess.Popen] = {}
        self.written: list[Path] = []

    def start(self) -> None:
        for sub in ("munge", "state", "spool", "log"):
            (self.workdir / sub).mkdir(mode=0o700)
        self.workdir.chmod(0o755)  # munged refuses a socket directory path others cannot traverse
        subprocess.run(
            ["mungekey", "--create", "--keyfile", str(self.workdir / "munge" / "munge.key")],
            check=True,
            capture_output=True,
        )
        SLURM_DIR.mkdir(exist_ok=True)
        for name, text in (
            ("slurm.conf", slurm_conf(self.workdir, node_hardware())),
            ("gres.conf", f"{MARKER}\nNodeName=localhost Name=gpu File=/dev/null\n"),
        ):
            (SLURM_DIR / name).write_text(text)
            self.written.append(SLURM_DIR / name)
        munge = self.workdir / "munge"
        self._spawn(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",
                f"--socket={munge}/munge.socket",
                f"--key-file={munge}/munge.key",
                f"--pid-file={munge}/munged.pid",
                f"--seed-file={munge}/munged.seed",
                f"--log-file={self.workdir}/log/munged.log",
            ],
        )
        self._wait_for(lambda: (munge / "munge.socket").exists(), "munged socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"])
        self._wait_for(lambda: self._query(["sinfo", "-h"]) is not None, "slurmctld answering sinfo")
        self._spawn("slurmd", ["slurmd", "-D", "-N", "localhost"])
        self._wait_for(lambda: "idle" in (self._query(["sinfo", "-h", "-o", "%T"]) or ""), "node localhost idle")

    def _spawn(self, name: str, command: list[str]) -> None:
        log = open(self.workdir / "log" / f"{name}.out", "w")  # noqa: SIM115 (the daemon writes to it until teardown)
        self.processes[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def _query(self, command: list[str]) -> str | None:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
        return result.stdout if result.returncode == 0 else None

    def _wait_for(self, ready, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited with {process.returncode}: {self.logs()}")
            if ready():
                return
            time.sleep(0.5)
        raise RuntimeError(f"timed out waiting for {what}: {self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted((self.workdir / "log").glob("*")))

    def stop(self) -> None:
        """Cancel leftover jobs, stop each daemon started here by PID (reverse order), remove our config."""
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            job_ids = (self._query(["squeue", "-h", "-o", "%i"]) or "").split()
            if job_ids:
                subprocess.run(["scancel", *job_ids], capture_output=True, timeout=30)
        for name in reversed(list(self.processes)):
            process = self.processes[name]
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for path in self.written:
            path.unlink(missing_ok=True)
        shutil.rmtree(self.workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def slurm_cluster(request):
    reason = missing_requirement()
    if reason:
        pytest.skip(reason)
    cluster = OneNodeSlurm()
    request.addfinalizer(cluster.stop)
    cluster.start()
    return cluster


def test_the_profile_names_rules_that_exist():
    """A renamed rule would silently lose its GPU request: every rule the profile configures must exist."""
    profile = yaml.safe_load((REPO_ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    listed = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO_ROOT / "Snakefile"),
            "--list-rules",
            "--config",
            "scale=smoke",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    rules = set(listed.stdout.split())
    assert set(profile["set-resources"]) <= rules, set(profile["set-resources"]) - rules
    assert {rule for rule, resources in profile["set-resources"].items() if resources.get("gpu")} == set(GPU_RULES)
    assert profile["slurm-status-command"] == "squeue"


def cluster_targets(local_run: Path) -> list[str]:
    """A slice of the smoke DAG with every kind of cluster job: the corpus (2 threads), training and PTQ (GPU),
    evaluation, a table, a figure. The whole smoke DAG would cost ~25 s of Snakemake start-up per job on
    two cores; this slice keeps the test to a few minutes."""
    # kumar2024's tables come from score_kumar2024.
    ptq_tables = sorted((local_run / "results" / "scores" / "kumar2024").rglob("*.parquet"))
    assert ptq_tables, "the smoke DAG has no PTQ evaluation to send to a GPU"
    return ["figures/common/learning_curves.png", ptq_tables[0].relative_to(local_run).as_posix()]


def run_with_profile(workdir: Path, *args: str, timeout: int = 1200) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO_ROOT / "Snakefile"),
        "--directory",
        str(workdir),
        "--profile",
        str(REPO_ROOT / "profiles" / "slurm"),
        "--config",
        "scale=smoke",
        *args,
    ]
    # The environment of the local runs it is compared with (reproducible CPU mode), which sbatch passes to the jobs.
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, env=dag_environment()
    )


def test_smoke_dag_on_slurm_matches_a_local_run(slurm_cluster, smoke_run, tmp_path):
    local_run = smoke_run
    workdir = tmp_path / "slurm_run"
    workdir.mkdir()
    started = time.monotonic()
    result = run_with_profile(workdir, "--verbose", "--", *cluster_targets(local_run))
    elapsed = time.monotonic() - started
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:] + slurm_cluster.logs()
    print(f"smoke slice on the one-node Slurm: {elapsed:.0f} s")

    # Every job went through sbatch, and the GPU-eligible rules of the slice asked for a (fake) GPU.
    sbatch_calls = [line for line in output.splitlines() if line.startswith("sbatch call:")]
    for rule in ("train_run", "score_kumar2024"):
        calls = [line for line in sbatch_calls if f"--comment rule_{rule}_" in line]
        assert calls and all("--gpus=1" in line for line in calls), rule
    corpus_calls = [line for line in sbatch_calls if "--comment rule_prepare_corpus" in line]
    assert corpus_calls and not any("--gpus" in line for line in corpus_calls)
    assert list((workdir / "logs" / "slurm").rglob("*.log")), "the profile keeps one Slurm log per job"

    # The cluster's artifacts equal the local run's, byte for byte (diff with zero tolerance).
    local_slice = copy_artifacts_like(local_run, workdir, tmp_path / "local_slice")
    assert len(list_artifacts(workdir)) >= 4
    compared = subprocess.run(
        [sys.executable, "-m", "qscaling.cli", "diff", str(local_slice), str(workdir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert compared.returncode == 0, compared.stdout[-4000:] + compared.stderr


def test_a_failed_cluster_job_names_its_logs_and_a_rerun_finishes(slurm_cluster, smoke_run, tmp_path):
    """Failure behaviour: the error names the job's Slurm log; the rerun redoes only what is missing."""
    workdir = tmp_path / "failing_run"
    shutil.copytree(smoke_run, workdir, symlinks=True)
    figure = workdir / "figures" / "common" / "learning_curves.png"
    figure.unlink()
    table = workdir / "results" / "tables" / "learning_curves.parquet"
    table_bytes = table.read_bytes()
    table.write_bytes(b"not a parquet file")  # newer than its inputs, so only the figure job runs, and fails
    # mtime only: the code may have moved since the shared smoke run; this test is about the missing figure.
    only_the_figure = ("--rerun-triggers", "mtime", "--", "common_learning_curves")
    failed = run_with_profile(workdir, "--retries", "0", *only_the_figure, timeout=600)
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0
    assert "Error in rule common_learning_curves" in output
    assert f"{workdir}/logs/slurm/rule_common_learning_curves/" in output
    table.write_bytes(table_bytes)
    rerun = run_with_profile(workdir, *only_the_figure, timeout=600)
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-4000:]
    assert "1 of 1 steps (100%) done" in rerun.stdout + rerun.stderr
    assert figure.read_bytes() == (smoke_run / "figures" / "common" / "learning_curves.png").read_bytes()
