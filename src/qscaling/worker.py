"""A warm interpreter for the workflow's jobs: torch, transformers, pandas, seaborn and qscaling imported once.

Every job of the workflow is a short Python script, and on a CPU most of a short job is start-up: importing torch
and transformers takes 5–7 s, seaborn and scipy 3–4 s, longer than training or scoring a small model. `qscaling
run` starts one worker that imports them once. Each job script (`workflow/scripts/*.py`) begins with `delegate()`,
which hands the job to the worker: the worker forks a copy of itself that runs the script with the job's
arguments, working directory, environment and standard streams, and the job exits with that copy's status.

A job still runs in a process of its own that shares nothing with the others but the imported modules, so its
outputs are byte-identical. It runs in its own interpreter instead, as with plain `snakemake`, when there is no
worker (plain `snakemake`, a cluster executor), when the worker cannot be reached, or when its environment differs
from the worker's in more than what is set per job (its temporary directory, the shell's own variables): another
thread count (a rule with `threads: 2`), CPU code path or interpreter, all of which torch and BLAS read when they
are imported.

Signals sent to a job reach the copy running it; a job whose own process dies is killed in the worker too.
Snakemake's `benchmark:` files keep a delegated job's wall time; its CPU time and memory are the copy's, which
the benchmark does not see.

    python -m qscaling.worker SOCKET PARENT_FD READY_FD     (what `started()` below runs for `qscaling run`)
"""

import atexit
import contextlib
import importlib
import json
import os
import pkgutil
import runpy
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import qscaling
from qscaling.atomic import write_text

SOCKET_VARIABLE = "QSCALING_WORKER"
# Set per job, by Snakemake (its temporary directory) or by the shell it starts the job in; nothing is imported
# differently for them.
PER_JOB_VARIABLES = frozenset({SOCKET_VARIABLE, "TMPDIR", "TEMP", "TMP", "TEMPDIR", "PWD", "OLDPWD", "SHLVL", "_"})
# What Snakemake sets to a job's `threads` (snakemake.shell); the worker imports with the value of a 1-thread job.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
# Imported before the first job: what the job scripts import, and the lazily loaded parts they reach.
WARM_MODULES = (
    "torch",
    "transformers.models.llama.modeling_llama",
    "transformers.models.gpt_neox.modeling_gpt_neox",
    "transformers.models.opt.modeling_opt",
    "tokenizers",
    "safetensors.torch",
    "numpy",
    "pandas",
    "pyarrow.parquet",
    "scipy.optimize",
    "scipy.stats",
    "matplotlib.pyplot",
    "seaborn",
    "snakemake.script",
)
MAX_MESSAGE = 1 << 20
STANDARD_STREAMS = (0, 1, 2)

_serving = False  # True in the worker and in the copies it forks: `delegate()` is then a no-op


def delegate() -> None:
    """Run the calling job script in the warm worker and exit with its status; return when it must run here."""
    address = os.environ.get(SOCKET_VARIABLE)
    if not address or _serving:
        return
    try:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        connection.connect(address)
        request = {"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ)}
        socket.send_fds(connection, [json.dumps(request).encode()], list(STANDARD_STREAMS))
        reply = _receive(connection)
    except (OSError, ValueError):
        return
    if "pid" not in reply:
        return
    child = reply["pid"]

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    try:
        status = _receive(connection).get("status")
    except (OSError, ValueError):
        status = None
    if status is None:
        print(f"qscaling worker: the worker at {address} stopped before this job finished", file=sys.stderr)
        sys.exit(1)
    sys.exit(status)


def _receive(connection: socket.socket) -> dict:
    message = connection.recv(MAX_MESSAGE)
    if not message:
        raise ValueError("connection closed")
    return json.loads(message)


def _send(connection: socket.socket, message: dict) -> None:
    with contextlib.suppress(OSError):
        connection.send(json.dumps(message).encode())


def environment_mismatch(job_env: dict, worker_env: dict, import_effects: dict) -> list[str]:
    """Variables the job has set otherwise than the worker did, before or after its imports set some (a job
    inherits those from a Snakemake that made the same imports); the variables set per job aside."""
    after = worker_env | import_effects
    names = (set(job_env) | set(worker_env) | set(import_effects)) - PER_JOB_VARIABLES
    return sorted(n for n in names if job_env.get(n) != worker_env.get(n) and job_env.get(n) != after.get(n))


def worker_environment(base: dict) -> dict:
    """The environment the worker imports in: `base` with the thread counts of a one-thread Snakemake job."""
    return {**base, **dict.fromkeys(THREAD_VARIABLES, "1")}


def _warm_up() -> None:
    # A module that cannot be imported here (an optional backend) is left for the job that needs it to report.
    names = [*WARM_MODULES, *(m.name for m in pkgutil.walk_packages(qscaling.__path__, "qscaling."))]
    for name in names:
        if not name.endswith("__main__"):
            with contextlib.suppress(Exception):
                importlib.import_module(name)


def _run_job(request: dict, streams: list[int], inherited: list[int], import_effects: dict) -> None:
    """In the forked copy: become the job (streams, directory, environment, arguments), run its script, exit."""
    code = 1
    try:
        for fd in inherited:
            os.close(fd)
        for target, fd in zip(STANDARD_STREAMS, streams):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"] | import_effects)
        tempfile.tempdir = None
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.argv = list(request["argv"])
        script = os.path.abspath(sys.argv[0])
        sys.path[0] = os.path.dirname(script)
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            code = exit_.code or 0
        else:
            print(exit_.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        # What a finishing interpreter runs (logging's flush among them), then no return into the worker's loop.
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def serve(address: str, parent_fd: int | None = None, ready_fd: int | None = None) -> None:
    """Listen on `address` (then close `ready_fd`), import the warm modules, fork a copy per job until `parent_fd`
    closes. `<address>.json` says how many jobs it ran and refused so far."""
    global _serving
    _serving = True
    # Ctrl-C reaches every process of the terminal's group: the jobs stop, the worker waits for them.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(address)
    listener.listen(64)
    if ready_fd is not None:
        os.close(ready_fd)
    own_env = dict(os.environ)
    _warm_up()
    # What importing did to the environment (a library's setdefault, the inductor cache folder): each copy keeps it,
    # as the job's own imports would have done.
    import_effects = {name: value for name, value in os.environ.items() if own_env.get(name) != value}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, ("listener", None))
    if parent_fd is not None:
        selector.register(parent_fd, selectors.EVENT_READ, ("parent", None))
    jobs: dict[int, tuple[socket.socket, int]] = {}  # child pid -> (connection, pidfd)
    tally = {"served": 0, "refused": 0, "differing": []}

    def finish(pid: int) -> None:
        connection, pidfd = jobs.pop(pid)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        _send(connection, {"status": code if code >= 0 else 128 - code})
        selector.unregister(pidfd)
        os.close(pidfd)
        with contextlib.suppress(KeyError):
            selector.unregister(connection)
        connection.close()

    while listener.fileno() >= 0 or jobs:
        for key, _ in selector.select():
            kind, pid = key.data
            if kind == "listener":
                _accept(listener, selector, jobs, own_env, import_effects, tally)
                write_text(f"{address}.json", json.dumps(tally))
            elif kind == "exited":
                finish(pid)
            elif kind == "client" and pid in jobs:
                # The job's own process is gone (killed with SIGKILL): stop its copy too; its exit is reaped above.
                selector.unregister(key.fileobj)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            elif kind == "parent":
                # `qscaling run` is gone: take no new jobs, finish the running ones.
                selector.unregister(parent_fd)
                selector.unregister(listener)
                listener.close()


def _accept(listener: socket.socket, selector, jobs: dict, own_env: dict, import_effects: dict, tally: dict) -> None:
    """Take one job: refuse it (it then runs in its own interpreter) or fork a copy that runs it."""
    connection, _ = listener.accept()
    try:
        message, streams, _, _ = socket.recv_fds(connection, MAX_MESSAGE, len(STANDARD_STREAMS))
        request = json.loads(message)
    except (OSError, ValueError):
        connection.close()
        return
    mismatch = environment_mismatch(request["env"], own_env, import_effects)
    if mismatch or len(streams) != len(STANDARD_STREAMS):
        tally["refused"] += 1
        tally["differing"] = sorted(set(tally["differing"]) | set(mismatch))
        _send(connection, {"refused": f"environment differs: {', '.join(mismatch)}"})
        for fd in streams:
            os.close(fd)
        connection.close()
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    inherited = [key.fd for key in selector.get_map().values()] + [connection.fileno()]
    pid = os.fork()
    if pid == 0:
        _run_job(request, streams, inherited, import_effects)
    for fd in streams:
        os.close(fd)
    tally["served"] += 1
    pidfd = os.pidfd_open(pid)
    jobs[pid] = (connection, pidfd)
    selector.register(pidfd, selectors.EVENT_READ, ("exited", pid))
    selector.register(connection, selectors.EVENT_READ, ("client", pid))
    _send(connection, {"pid": pid})


@dataclass
class Worker:
    """A started worker: the environment to run Snakemake in, and once stopped what it did."""

    env: dict
    served: int = 0
    refused: int = 0
    differing: list[str] = field(default_factory=list)

    def summary(self) -> str:
        line = f"{self.served} jobs ran in the warm worker"
        if self.refused:
            line += f", {self.refused} in interpreters of their own (environment differs: {', '.join(self.differing)})"
        return line


@contextlib.contextmanager
def started(enabled: bool = True):
    """A `Worker` for the duration of the block (its `env` unchanged and nothing started if not `enabled`). The
    worker stops when the block ends (the block runs Snakemake to its end, so no job is left), or by itself once
    this process is gone."""
    if not enabled:
        yield Worker(dict(os.environ))
        return
    directory = tempfile.mkdtemp(prefix="qscaling-worker-")
    address = os.path.join(directory, "socket")
    read_end, write_end = os.pipe()
    ready_read, ready_write = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-m", "qscaling.worker", address, str(read_end), str(ready_write)],
        env=worker_environment(dict(os.environ)) | {SOCKET_VARIABLE: address},
        pass_fds=[read_end, ready_write],
        stdin=subprocess.DEVNULL,
        cwd="/",
    )
    os.close(read_end)
    os.close(ready_write)
    # Listening (jobs queue up while it imports) once it closes its end, or gone.
    with open(ready_read, "rb") as ready:
        ready.read()
    worker = Worker({**os.environ, SOCKET_VARIABLE: address})
    try:
        yield worker
    finally:
        # Snakemake has finished, and with it every job: nothing is left for the worker (perhaps still importing).
        os.close(write_end)
        process.kill()
        process.wait()
        report = Path(f"{address}.json")
        if report.is_file():
            tally = json.loads(report.read_text())
            worker.served, worker.refused, worker.differing = tally["served"], tally["refused"], tally["differing"]
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    # The module the jobs import (`python -m` runs a second copy of it as __main__): its `_serving` must be set.
    from qscaling.worker import serve as serve_jobs

    serve_jobs(sys.argv[1], *(int(fd) for fd in sys.argv[2:4]))
    # Tearing down torch and the rest takes seconds and writes nothing.
    os._exit(0)
