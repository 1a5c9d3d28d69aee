"""Shared fixtures: the repository root and a small learnable token stream."""

from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


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
