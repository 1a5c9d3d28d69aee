"""Rule import_hub_run: released checkpoints (one per revision) → our checkpoint format + run.json."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

from pathlib import Path

from qscaling.atomic import write_json
from qscaling.hub import import_revision
from qscaling.provenance import job_context
from qscaling.train import milestone_name

with job_context(snakemake) as extra_inputs:
    params, run_id = snakemake.params, snakemake.wildcards.run
    run_dir = Path(snakemake.output.summary).parent
    checkpoints = {}
    for tokens, revision in sorted(params.revisions.items()):
        relative = f"checkpoints/{milestone_name(int(tokens))}"
        metadata = import_revision(
            params.repo, revision, run_dir / relative, run_id=run_id, tokens_seen=int(tokens), size=params.size
        )
        extra_inputs[f"{params.repo}@{revision}"] = metadata["source"]["files"]
        checkpoints[str(tokens)] = relative
    write_json(snakemake.output.summary, {"run_id": run_id, "source": params.repo, "checkpoints": checkpoints})
