"""Rules <study>_<job>: a table a study builds besides its scoring (qscaling.studies.Job)."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

from qscaling.figures import resolve_function
from qscaling.provenance import job_context

with job_context(snakemake):
    inputs, outputs = dict(snakemake.input.items()), dict(snakemake.output.items())
    resolve_function(snakemake.params.function)(inputs, outputs, snakemake.params.settings)
