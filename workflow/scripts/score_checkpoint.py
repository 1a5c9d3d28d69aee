"""Rules score_<study>: one checkpoint scored by the study's scoring function → its rows and other tables."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

import json
from pathlib import Path

import pandas as pd

from qscaling.atomic import write_table
from qscaling.device import resolve_device
from qscaling.figures import resolve_function
from qscaling.provenance import job_context, path_sha256
from qscaling.studies.scoring import diverged_rows
from qscaling.train import milestone_name

with job_context(snakemake) as extra_inputs:
    params, wildcards = snakemake.params, snakemake.wildcards
    summary_path = Path(snakemake.input.summary)
    checkpoint = summary_path.parent / "checkpoints" / milestone_name(int(wildcards.tokens))
    summary = json.loads(summary_path.read_text())
    if not checkpoint.is_dir() and "diverged" in summary:
        rows = diverged_rows(summary, int(wildcards.tokens), params.labels)
        frames = {name: rows if name == "table" else pd.DataFrame() for name in snakemake.output.keys()}
    elif not checkpoint.is_dir():
        known = summary["checkpoints"]
        raise ValueError(
            f"run {wildcards.run} has no checkpoint at {wildcards.tokens} tokens (has: {', '.join(known)})"
        )
    else:
        extra_inputs[str(checkpoint)] = path_sha256(checkpoint)
        inputs = {name: value for name, value in snakemake.input.items() if name != "summary"}
        frames = resolve_function(params.function)(
            checkpoint, inputs, params.settings, params.labels, resolve_device(params.device)
        )
    for name, path in snakemake.output.items():
        write_table(frames[name], path)
