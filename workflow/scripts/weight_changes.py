"""Rule ouyang2024_weight_changes: relative weight change between adjacent checkpoints of each trunk."""

from pathlib import Path

import pandas as pd

from qscaling.evaluate import write_table
from qscaling.provenance import job_context
from qscaling.studies.ouyang2024 import weight_changes
from qscaling.train import milestone_name

with job_context(snakemake):
    frames = []
    for summary in snakemake.input.summaries:
        run_dir = Path(summary).parent
        paths = [run_dir / "checkpoints" / milestone_name(m) for m in snakemake.params.milestones]
        frames.append(weight_changes(paths))
    write_table(pd.concat(frames, ignore_index=True), snakemake.output.table)
