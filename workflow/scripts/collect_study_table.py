"""Rule collect_study_table: a study's evaluation rows → its tidy table."""

import pandas as pd

from qscaling.evaluate import write_table
from qscaling.provenance import job_context
from qscaling.studies import study_modules

with job_context(snakemake):
    study = study_modules()[snakemake.wildcards.study]
    rows = pd.concat([pd.read_parquet(path) for path in snakemake.input], ignore_index=True)
    write_table(study.build_table(rows, snakemake.config), snakemake.output.table)
