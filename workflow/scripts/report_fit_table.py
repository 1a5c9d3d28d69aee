"""Rule report_fit_table: every fitted law of this run in one CSV for the HTML report."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

import os
from pathlib import Path

from qscaling.diff import fits_table
from qscaling.provenance import job_context

with job_context(snakemake):
    table = fits_table(snakemake.input.fits)
    tmp = Path(snakemake.output.table).with_name(".fits.csv.tmp")
    table.to_csv(tmp, index=False, float_format="%.6g", lineterminator="\n")
    os.replace(tmp, snakemake.output.table)
