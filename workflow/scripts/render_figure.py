"""Render one declared figure: call `params.function` ("module:name") on the rule's tables and fits, save the PNG;
a table target (`params.frame`, "module:name") also writes its rows as CSV.

Inputs are loaded by `qscaling.figures.load_figure_inputs` (named .parquet → tables, .json → fits).
"""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

import os
from pathlib import Path

from qscaling.figures import load_figure_inputs, resolve_function, save_figure
from qscaling.provenance import job_context

with job_context(snakemake):
    params, output = snakemake.params, snakemake.output
    tables, fits = load_figure_inputs(dict(snakemake.input.items()))
    if params.frame:
        csv = Path(output.csv)
        tmp = csv.with_name(f".{csv.name}.tmp")
        resolve_function(params.frame)(tables, fits).to_csv(tmp, index=False, float_format="%.6g", lineterminator="\n")
        os.replace(tmp, csv)
    save_figure(resolve_function(params.function)(tables, fits), output.png)
