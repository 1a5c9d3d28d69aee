"""Rule collect_study_table: a study's scored rows → its tidy table."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

import pandas as pd

from qscaling.atomic import write_table
from qscaling.provenance import job_context
from qscaling.studies.registry import configured_from_params
from qscaling.studies.tables import build_study_table

with job_context(snakemake):
    study, settings = configured_from_params(snakemake.params.study)
    rows = pd.concat([pd.read_parquet(path) for path in snakemake.input.rows], ignore_index=True)
    write_table(build_study_table(study, rows, settings), snakemake.output.table)
