"""Data stage: corpus documents → train/val split → byte-level BPE → uint16 token shards."""

from qscaling.data.corpus import Document, corpus_documents, split_documents
from qscaling.data.tokens import EOS, load_tokens, prepare_corpus, train_tokenizer

__all__ = ["Document", "EOS", "corpus_documents", "load_tokens", "prepare_corpus", "split_documents", "train_tokenizer"]
