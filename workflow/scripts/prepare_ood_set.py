"""Rule prepare_ood_set: a registry source tokenized with the corpus tokenizer → ood.bin."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

from tokenizers import Tokenizer

from qscaling.data.corpus import registry_documents
from qscaling.data.fetch import SOURCES, download_archive, sha256_file
from qscaling.data.tokens import encode_to_shard
from qscaling.provenance import job_context

with job_context(snakemake) as extra_inputs:
    source = snakemake.params.source
    documents = registry_documents([source], snakemake.params.document_chars)
    tokenizer = Tokenizer.from_file(snakemake.input.tokenizer)
    count = encode_to_shard(tokenizer, [d.text for d in documents], snakemake.output.ood)
    archive = download_archive(SOURCES[source])
    extra_inputs[f"{SOURCES[source].client}:{archive.name}"] = sha256_file(archive)
    print(f"{source}: {len(documents)} documents, {count} tokens")
