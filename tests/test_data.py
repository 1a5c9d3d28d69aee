"""Data stage: the R lazy-load reader, Gutenberg stripping, deterministic splits, tokenizer and shards."""

import gzip
import struct
import zlib

import numpy as np
import pytest

from qscaling.data import corpus_documents, load_tokens, prepare_corpus
from qscaling.data.corpus import cut_into_documents, is_validation, split_documents
from qscaling.data.fetch import check_sha256, strip_gutenberg
from qscaling.data.rdata import read_lazyload_db


def _xdr(*ints) -> bytes:
    return b"".join(struct.pack(">i", i) for i in ints)


def _charsxp(text: str) -> bytes:
    payload = text.encode()
    return _xdr(9 | (1 << 12) * 0, len(payload)) + payload


def _serialized(body: bytes) -> bytes:
    return b"X\n" + _xdr(2, 0x040000, 0x020300) + body


def _named_pairlist(entries: dict[str, bytes]) -> bytes:
    """A tagged pairlist (flags LISTSXP | has_tag) of SYMSXP tags, terminated by NILVALUE."""
    out = b""
    for name, value in entries.items():
        out += _xdr(2 | 1024) + _xdr(1) + _charsxp(name) + value
    return out + _xdr(254)


def write_lazyload_db(directory, variables: dict[str, list[str]]) -> None:
    """Hand-built Rdata.rdx/rdb in R's own format: the reader must find these exact vectors."""
    blobs, offsets = b"", {}
    for name, strings in variables.items():
        body = _serialized(_xdr(16, len(strings)) + b"".join(_charsxp(s) for s in strings))
        compressed = struct.pack(">I", len(body)) + zlib.compress(body)
        offsets[name] = (len(blobs), len(compressed))
        blobs += compressed
    index_entries = {name: _xdr(13, 2, *span) for name, span in offsets.items()}
    names_attr = _named_pairlist({"names": _xdr(16, len(offsets)) + b"".join(_charsxp(n) for n in offsets)})
    variables_vec = _xdr(19 | 512, len(offsets)) + b"".join(index_entries.values()) + names_attr
    outer_names = _named_pairlist({"names": _xdr(16, 1) + _charsxp("variables")})
    index = _serialized(_xdr(19 | 512, 1) + variables_vec + outer_names)
    (directory / "Rdata.rdx").write_bytes(gzip.compress(index))
    (directory / "Rdata.rdb").write_bytes(blobs)


def test_lazyload_reader_recovers_hand_built_vectors(tmp_path):
    variables = {"emma": ["EMMA", "", "By Jane Austen", "Emma Woodhouse, handsome"], "short": ["é ü"]}
    write_lazyload_db(tmp_path, variables)
    assert read_lazyload_db(tmp_path) == variables


def test_lazyload_reader_rejects_foreign_bytes(tmp_path):
    (tmp_path / "Rdata.rdx").write_bytes(gzip.compress(b"RDA2\n not xdr"))
    (tmp_path / "Rdata.rdb").write_bytes(b"")
    with pytest.raises(ValueError, match="not an R XDR serialization"):
        read_lazyload_db(tmp_path)


def test_strip_gutenberg_keeps_only_the_body():
    text = "Header\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\nCall me Ishmael.\n*** END OF THIS\nlicence"
    assert strip_gutenberg(text) == "Call me Ishmael."


def test_sha256_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match="does not match the pinned 0000"):
        check_sha256(b"payload", "0000", "archive.tar.gz")


def test_documents_are_paragraph_aligned_and_split_deterministically():
    text = "\n\n".join(f"Paragraph {i} " + "word " * 40 for i in range(200))
    documents = cut_into_documents("src", "title", text, 1000)
    assert all(d.text.startswith("Paragraph") for d in documents)
    assert "\n\n".join(d.text for d in documents) == "\n\n".join(p.strip() for p in text.split("\n\n"))
    first = split_documents(documents, 0.2, seed=0)
    again = split_documents(list(reversed(documents)), 0.2, seed=0)
    assert {d.doc_id for d in first["val"]} == {d.doc_id for d in again["val"]}
    assert 0 < len(first["val"]) < len(documents)
    assert is_validation("src/title/0001", 0.2, 0) == is_validation("src/title/0001", 0.2, 0)


def test_local_files_become_token_shards(tmp_path):
    for i in range(3):
        (tmp_path / f"book{i}.txt").write_text("\n\n".join(f"The {i} cat sat on mat number {j}." for j in range(400)))
    documents = corpus_documents({"kind": "local", "local_files": [str(tmp_path / "*.txt")], "document_chars": 800})
    summary = prepare_corpus(documents, tmp_path / "out", vocab_size=300, val_fraction=0.2, seed=0)
    train = load_tokens(tmp_path / "out" / "train.bin")
    assert train.dtype == np.uint16 and train.size == summary["splits"]["train"]["tokens"]
    assert int(train.max()) < 300
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tmp_path / "out" / "tokenizer.json"))
    eos = summary["eos_id"]
    first_document = train[: int(np.argmax(train == eos))]
    assert tokenizer.decode(first_document.tolist()).startswith("The ")


def test_hf_dataset_path_loads_a_local_dataset(tmp_path):
    import json

    rows = [{"story": f"Once upon a time {i} there was a fox."} for i in range(30)]
    (tmp_path / "data.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    config = {
        "kind": "hf",
        "document_chars": 1000,
        "hf_dataset": {"name": str(tmp_path), "split": "train", "text_column": "story", "max_documents": 10},
    }
    documents = corpus_documents(config)
    assert len(documents) == 10 and documents[0].text == rows[0]["story"]
    with pytest.raises(ValueError, match="text_column: 'text' is not a column"):
        corpus_documents({**config, "hf_dataset": {**config["hf_dataset"], "text_column": "text"}})


def test_unknown_local_pattern_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="corpus.local_files: no file matches"):
        corpus_documents({"kind": "local", "local_files": [str(tmp_path / "*.none")], "document_chars": 100})
