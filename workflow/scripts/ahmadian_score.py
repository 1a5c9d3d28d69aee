"""Rule ahmadian2023_score: one checkpoint unquantized, W8A8 and W4 → loss, task accuracy and outlier proxies."""

import json
from pathlib import Path

from qscaling.checkpoint import read_metadata
from qscaling.data import load_tokens
from qscaling.device import resolve_device
from qscaling.evaluate import write_table
from qscaling.provenance import job_context, path_sha256
from qscaling.studies import Quantization
from qscaling.studies.ahmadian2023 import STUDY, attach_labels, score_checkpoint, task_tokenizer
from qscaling.train import milestone_name

with job_context(snakemake) as extra_inputs:
    params, wildcards, inputs = snakemake.params, snakemake.wildcards, snakemake.input
    summary_path = Path(inputs.summary)
    checkpoint = summary_path.parent / "checkpoints" / milestone_name(int(wildcards.tokens))
    if not checkpoint.is_dir():
        known = json.loads(summary_path.read_text())["checkpoints"]
        raise ValueError(
            f"run {wildcards.run} has no checkpoint at {wildcards.tokens} tokens (has: {', '.join(known)})"
        )
    extra_inputs[str(checkpoint)] = path_sha256(checkpoint)
    source = read_metadata(checkpoint).get("source")  # released checkpoints record their repo and revision
    # A released model re-encodes the held-out text; twice the scored tokens leaves room for a longer tokenization.
    tokenizer, held_out = task_tokenizer(
        inputs.tokenizer, load_tokens(inputs.val), source, keep_tokens=2 * params.eval_tokens
    )
    rows, proxies, values = score_checkpoint(
        checkpoint,
        [Quantization(**q) for q in params.quantizations],
        held_out,
        tokenizer=tokenizer,
        tasks=params.tasks,
        task_dir=Path(inputs.tasks[0]).parent if source is None else None,
        eval_tokens=params.eval_tokens,
        proxy_windows=params.proxy_windows,
        batch_size=params.batch_size,
        task_batch_size=params.task_batch_size,
        device=resolve_device(params.device),
    )
    outputs = snakemake.output
    frames = {outputs.table: rows.assign(study=STUDY), outputs.proxies: proxies, outputs.values: values}
    for path, frame in frames.items():
        write_table(attach_labels(frame, params.labels, params.final_tokens), path)
