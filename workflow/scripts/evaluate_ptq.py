"""Rule evaluate_ptq: one checkpoint, unquantized and under every quantization of its study → tidy rows."""

import json
from pathlib import Path

from qscaling.data import load_tokens
from qscaling.device import resolve_device
from qscaling.evaluate import write_table
from qscaling.provenance import job_context, path_sha256
from qscaling.studies import Quantization
from qscaling.studies.ptq import score_checkpoint
from qscaling.train import milestone_name

with job_context(snakemake) as extra_inputs:
    params, wildcards = snakemake.params, snakemake.wildcards
    summary_path = Path(snakemake.input.summary)
    checkpoint = summary_path.parent / "checkpoints" / milestone_name(int(wildcards.tokens))
    if not checkpoint.is_dir():
        known = json.loads(summary_path.read_text())["checkpoints"]
        raise ValueError(
            f"run {wildcards.run} has no checkpoint at {wildcards.tokens} tokens (has: {', '.join(known)})"
        )
    extra_inputs[str(checkpoint)] = path_sha256(checkpoint)
    held_out = {
        split: load_tokens(snakemake.input[split]) for split in ("val", "ood") if split in snakemake.input.keys()
    }
    table = score_checkpoint(
        checkpoint,
        [Quantization(**q) for q in params.quantizations],
        held_out,
        load_tokens(snakemake.input.calibration),
        calibration=params.calibration,
        eval_tokens=params.eval_tokens,
        batch_size=params.batch_size,
        gptq_damp=params.gptq_damp,
        device=resolve_device(params.device),
    )
    write_table(table.assign(study=wildcards.study), snakemake.output.table)
