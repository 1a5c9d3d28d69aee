"""Shared fixtures: the repository root and a small learnable token stream."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

# Without a GPU the Triton kernels run in Triton's interpreter, which reads this when triton is first imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]


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


def markov_tokens(n_tokens: int, vocab_size: int, *, chain_seed: int = 0, path_seed: int = 0,
                  branching: int = 4) -> np.ndarray:
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


def run_snakemake(workdir: Path, *args: str, scale: str = "smoke", timeout: int = 900) -> subprocess.CompletedProcess:
    """The real Snakefile, run with `workdir` as its working directory."""
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"), "--directory", str(workdir),
               "--cores", "2", "--config", f"scale={scale}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def smoke_runs(tmp_path_factory) -> list[Path]:
    """Two independent, complete smoke runs of the default target (shared by every end-to-end test)."""
    runs = []
    for name in ("smoke_first", "smoke_second"):
        workdir = tmp_path_factory.mktemp(name)
        result = run_snakemake(workdir)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        runs.append(workdir)
    return runs
