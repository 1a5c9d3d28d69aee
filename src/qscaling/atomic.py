"""Writes that never leave a half-written file behind: every output is written to a hidden temporary beside its
target and renamed into place (`os.replace` is atomic within one filesystem), so a crash or kill -9 leaves either
the old file or the new one. Torch-free: the DAG build and every layer above may use it.
"""

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, suffix: str = "") -> Iterator[Path]:
    """A temporary path to write `path`'s content to; renamed onto `path` when the block succeeds, removed when it
    fails. `suffix` keeps an extension a writer reads the format from (matplotlib's savefig). A directory works
    too: an existing one at `path` is replaced whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{suffix}")
    if tmp.is_dir():  # left by a killed writer
        shutil.rmtree(tmp)
    try:
        yield tmp
        if tmp.is_dir() and path.is_dir():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_bytes(path: str | os.PathLike, payload: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(payload)


def write_json(path: str | os.PathLike, payload) -> None:
    """Indented, keys sorted, one trailing newline: the same payload always gives the same bytes."""
    write_text(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")


def write_table(frame, path: str | os.PathLike) -> None:
    """A DataFrame as parquet, without pandas' index and with a fixed row order. zstd and no serialized Arrow
    schema beside pandas' own metadata (which restores every dtype) halve a small table: reference/ holds
    hundreds of them."""
    with atomic_path(path) as tmp:
        frame.reset_index(drop=True).to_parquet(tmp, index=False, compression="zstd", store_schema=False)


def write_csv(frame, path: str | os.PathLike, **options) -> None:
    """A DataFrame as CSV (pandas' `to_csv` options, without the index)."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, **options)
