"""Byte-level BPE tokenizer (HF `tokenizers`) and token shards: flat uint16 memmaps, documents joined by EOS."""

import json
import os
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from qscaling.atomic import write_bytes
from qscaling.data.corpus import split_documents

EOS = "<|endoftext|>"


def train_tokenizer(texts, vocab_size: int) -> Tokenizer:
    """A GPT-2-style byte-level BPE with `vocab_size` entries, EOS included (deterministic for given texts)."""
    if not 259 < vocab_size <= 65535:
        raise ValueError(f"corpus.vocab_size: {vocab_size} must be in 260..65535 (256 bytes + EOS + merges; uint16)")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def encode_to_shard(tokenizer: Tokenizer, texts: list[str], path: Path) -> int:
    """Encode documents, each followed by EOS, into a uint16 file; returns the token count."""
    eos = tokenizer.token_to_id(EOS)
    encoded = tokenizer.encode_batch(texts)
    ids = np.fromiter((i for e in encoded for i in (*e.ids, eos)), dtype=np.uint16)
    write_bytes(path, ids.tobytes())
    return int(ids.size)


def check_vocabulary(tokens: np.ndarray, vocab_size: int, source) -> None:
    """ValueError naming `source` where a token id is outside a model's vocabulary (another tokenizer's shard)."""
    largest = int(tokens.max(initial=0))
    if largest >= vocab_size:
        raise ValueError(
            f"{source}: token id {largest} >= model vocab_size {vocab_size} (a shard of another tokenizer?)"
        )


def load_tokens(path: str | os.PathLike) -> np.ndarray:
    """A token shard as a read-only uint16 memmap (no copy)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"token shard {path} does not exist")
    if path.stat().st_size % 2:
        raise ValueError(f"token shard {path}: odd byte count, not a uint16 token file")
    return np.memmap(path, dtype=np.uint16, mode="r")


def load_pretrained_tokenizer(name: str, vocab_size: int) -> Tokenizer:
    """A released tokenizer: a tokenizer.json path, a directory holding one, or a hub id (e.g. Pythia's)."""
    path = Path(name)
    if path.is_dir():
        path = path / "tokenizer.json"
    tokenizer = Tokenizer.from_file(str(path)) if path.is_file() else Tokenizer.from_pretrained(name)
    if tokenizer.get_vocab_size() > vocab_size:
        raise ValueError(
            f"corpus.vocab_size: {vocab_size} is smaller than tokenizer {name}'s {tokenizer.get_vocab_size()} entries"
        )
    if tokenizer.token_to_id(EOS) is None:
        raise ValueError(f"corpus.tokenizer: {name} has no {EOS} token to separate documents")
    return tokenizer


def prepare_corpus(
    documents,
    out_dir: str | os.PathLike,
    *,
    vocab_size: int,
    val_fraction: float,
    seed: int,
    tokenizer_name: str | None = None,
) -> dict:
    """Split; train the tokenizer on the train split only (or reuse `tokenizer_name`); write train.bin / val.bin /
    tokenizer.json / corpus.json."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    splits = split_documents(documents, val_fraction, seed)
    tokenizer = (
        load_pretrained_tokenizer(tokenizer_name, vocab_size)
        if tokenizer_name
        else train_tokenizer((d.text for d in splits["train"]), vocab_size)
    )
    write_bytes(out_dir / "tokenizer.json", tokenizer.to_str().encode())
    summary = {"vocab_size": tokenizer.get_vocab_size(), "eos_id": tokenizer.token_to_id(EOS), "splits": {}}
    for name, part in splits.items():
        count = encode_to_shard(tokenizer, [d.text for d in part], out_dir / f"{name}.bin")
        summary["splits"][name] = {
            "documents": len(part),
            "characters": sum(len(d.text) for d in part),
            "tokens": count,
            "sources": sorted({d.source for d in part}),
        }
    write_bytes(out_dir / "corpus.json", json.dumps(summary, indent=2, sort_keys=True).encode())
    return summary
