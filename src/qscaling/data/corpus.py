"""Documents from registry packages, local text files or an HF dataset, and their train/validation split.

Long texts (a novel, a play) are cut at paragraph boundaries into documents of about `document_chars`
characters, so the split mixes every work into both sides while no document straddles them. The split is by a
hash of the document id: deterministic, independent of order and of which other documents exist.
"""

import glob
import hashlib
from dataclasses import dataclass
from pathlib import Path

from qscaling.data.fetch import SOURCES, source_texts


@dataclass(frozen=True)
class Document:
    doc_id: str
    source: str
    text: str


def cut_into_documents(source: str, title: str, text: str, document_chars: int) -> list[Document]:
    """Paragraph-aligned pieces of about `document_chars` characters each (the last may be shorter)."""
    paragraphs = [p.strip() for p in text.replace("\r\n", "\n").split("\n\n") if p.strip()]
    documents, current, size = [], [], 0
    for paragraph in paragraphs:
        current.append(paragraph)
        size += len(paragraph) + 2
        if size >= document_chars:
            documents.append("\n\n".join(current))
            current, size = [], 0
    if current:
        documents.append("\n\n".join(current))
    return [Document(f"{source}/{title}/{index:04d}", source, body) for index, body in enumerate(documents)]


def registry_documents(sources: list[str], document_chars: int) -> list[Document]:
    unknown = [name for name in sources if name not in SOURCES]
    if unknown:
        raise ValueError(f"corpus.sources: unknown source(s) {unknown}; valid: {', '.join(SOURCES)}")
    return [
        document
        for name in sources
        for title, text in source_texts(name)
        for document in cut_into_documents(name, title, text, document_chars)
    ]


def local_documents(patterns: list[str], document_chars: int) -> list[Document]:
    paths = sorted({Path(p) for pattern in patterns for p in glob.glob(pattern, recursive=True)})
    if not paths:
        raise ValueError(f"corpus.local_files: no file matches {patterns}")
    return [
        document
        for path in paths
        for document in cut_into_documents(
            "local", path.stem, path.read_text(encoding="utf-8", errors="replace"), document_chars
        )
    ]


def hf_documents(
    name: str,
    split: str,
    text_column: str,
    max_documents: int | None,
    document_chars: int,
    config_name: str | None = None,
) -> list[Document]:
    """Documents of an HF dataset (from the hub, or a local dataset directory / cache)."""
    import datasets  # only kind: hf needs it, and it takes seconds to import

    dataset = datasets.load_dataset(name, config_name, split=split, streaming=True)
    documents = []
    for index, row in enumerate(dataset):
        if max_documents is not None and index >= max_documents:
            break
        if text_column not in row:
            raise ValueError(
                f"corpus.hf_dataset.text_column: '{text_column}' is not a column of {name} (columns: {sorted(row)})"
            )
        documents.extend(cut_into_documents("hf", f"{Path(name).name}-{index:08d}", row[text_column], document_chars))
    if not documents:
        raise ValueError(f"corpus.hf_dataset: {name} split '{split}' has no documents")
    return documents


def is_validation(doc_id: str, val_fraction: float, seed: int) -> bool:
    digest = hashlib.sha256(f"{seed}:{doc_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < val_fraction


def split_documents(documents: list[Document], val_fraction: float, seed: int) -> dict[str, list[Document]]:
    splits = {"train": [], "val": []}
    for document in documents:
        splits["val" if is_validation(document.doc_id, val_fraction, seed) else "train"].append(document)
    for name, part in splits.items():
        if not part:
            raise ValueError(
                f"corpus.val_fraction={val_fraction}: the {name} split is empty ({len(documents)} documents in all)"
            )
    return splits


def corpus_documents(corpus: dict) -> list[Document]:
    """All documents a `corpus:` config section names."""
    kind, chars = corpus["kind"], corpus["document_chars"]
    if kind == "registry":
        return registry_documents(corpus["sources"], chars)
    if kind == "local":
        return local_documents(corpus["local_files"], chars)
    hf = corpus["hf_dataset"]
    return hf_documents(
        hf["name"],
        hf.get("split", "train"),
        hf.get("text_column", "text"),
        hf.get("max_documents"),
        chars,
        hf.get("config_name"),
    )
