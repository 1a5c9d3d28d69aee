"""Rule collect_learning_curves: concatenate the runs' evaluation tables, sorted (size, tokens)."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

import pandas as pd

from qscaling.atomic import write_table
from qscaling.provenance import job_context

with job_context(snakemake):
    table = pd.concat([pd.read_parquet(path) for path in snakemake.input.tables], ignore_index=True)
    write_table(table.sort_values(["N", "D"]), snakemake.output.table)
