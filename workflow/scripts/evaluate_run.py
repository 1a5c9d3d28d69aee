"""Rule evaluate_run: validation loss of every checkpoint of a run → one tidy parquet table."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

import json
from pathlib import Path

from qscaling.atomic import write_table
from qscaling.evaluate import evaluate_run
from qscaling.provenance import job_context, path_sha256

with job_context(snakemake) as extra_inputs:
    summary_path = Path(snakemake.input.summary)
    for relative in json.loads(summary_path.read_text())["checkpoints"].values():
        extra_inputs[str(summary_path.parent / relative)] = path_sha256(summary_path.parent / relative)
    table = evaluate_run(
        summary_path,
        snakemake.input.val,
        split="val",
        max_tokens=snakemake.params.max_tokens,
        batch_size=snakemake.params.batch_size,
    )
    write_table(table, snakemake.output.table)
