"""Rule report_fit_table: every fitted law of this run in one CSV for the HTML report."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

from qscaling.atomic import write_csv
from qscaling.provenance import job_context
from qscaling.report import fits_table

with job_context(snakemake):
    table = fits_table(snakemake.input.fits)
    write_csv(table, snakemake.output.table, float_format="%.6g", lineterminator="\n")
