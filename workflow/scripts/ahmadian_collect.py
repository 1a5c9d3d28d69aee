"""Rule ahmadian2023_collect_proxies: per-checkpoint proxies and block values (labelled) → two tables."""

import pandas as pd

from qscaling.evaluate import write_table
from qscaling.provenance import job_context

with job_context(snakemake):
    for name in ("proxies", "values"):
        frame = pd.concat([pd.read_parquet(path) for path in snakemake.input[name]], ignore_index=True)
        write_table(frame, snakemake.output[name])
