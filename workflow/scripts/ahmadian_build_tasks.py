"""Rule ahmadian2023_build_tasks: held-out text → lm-evaluation-harness task configs and items (qscaling.tasks)."""

import json
from pathlib import Path

from tokenizers import Tokenizer

from qscaling.data import load_tokens
from qscaling.provenance import job_context
from qscaling.tasks import build_tasks, held_out_documents

with job_context(snakemake):
    params = snakemake.params.tasks
    tokenizer = Tokenizer.from_file(snakemake.input.tokenizer)
    eos_id = json.loads(Path(snakemake.input.corpus).read_text())["eos_id"]
    documents = held_out_documents(load_tokens(snakemake.input.val), tokenizer, eos_id)
    counts = build_tasks(
        documents,
        Path(snakemake.output[0]).parent,
        items=params["items"],
        context_words=params["context_words"],
        continuation_words=params["continuation_words"],
        seed=params["seed"],
    )
    print(f"built {counts} from {len(documents)} held-out documents")
