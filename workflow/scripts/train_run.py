"""Rule train_run: train one run spec (resuming if interrupted), checkpoints at its milestones."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

from pathlib import Path

from qscaling.device import resolve_device
from qscaling.provenance import job_context
from qscaling.train import RunSpec, train

with job_context(snakemake):
    params = snakemake.params
    spec = RunSpec.from_dict(params.spec)
    device = resolve_device(params.device)
    run_dir = Path(snakemake.output.summary).parent
    trunk_dir = Path(snakemake.input.trunk[0]).parent if snakemake.input.trunk else None
    train(
        spec,
        run_dir,
        snakemake.input.train,
        milestones=params.milestones,
        branch_points=params.branch_points,
        trunk_dir=trunk_dir,
        state_every_steps=params.state_every_steps,
        device=device,
    )
