"""Rule collect_study_table: a study's scored rows → its tidy table."""

import importlib

import pandas as pd

from qscaling.evaluate import write_table
from qscaling.provenance import job_context

with job_context(snakemake):
    study = importlib.import_module(snakemake.params.module)
    rows = pd.concat([pd.read_parquet(path) for path in snakemake.input.rows], ignore_index=True)
    write_table(study.build_table(rows, snakemake.params.settings), snakemake.output.table)
