"""Rule predict_public_tables: each published table of data/public (`qscaling.public`) with every applicable
law's prediction from its paper's constants → results/tables/public_predictions.csv."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

from pathlib import Path

from qscaling.atomic import write_csv
from qscaling.provenance import job_context
from qscaling.public import law_predictions, read_public_table

with job_context(snakemake):
    tables = {Path(path).stem: read_public_table(path) for path in snakemake.input.tables}
    predictions = law_predictions(tables)
    print(f"{len(tables)} published tables, {len(predictions)} predictions")
    write_csv(predictions, snakemake.output.table)
