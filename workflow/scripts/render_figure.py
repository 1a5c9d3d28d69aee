"""Render one declared figure: call `params.function` ("module:name") on the rule's tables and fits (and the
figure's `params.options` as keyword arguments), save the PNG;
a table target (`params.frame`, "module:name") also writes its rows as CSV.

Inputs are loaded by `qscaling.figures.load_figure_inputs` (named .parquet → tables, .json → fits).
"""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

from qscaling.atomic import write_csv
from qscaling.figures import load_figure_inputs, resolve_function, save_figure
from qscaling.provenance import job_context

with job_context(snakemake):
    params, output = snakemake.params, snakemake.output
    tables, fits = load_figure_inputs(dict(snakemake.input.items()))
    if params.frame:
        frame = resolve_function(params.frame)(tables, fits)
        write_csv(frame, output.csv, float_format="%.6g", lineterminator="\n")
    save_figure(resolve_function(params.function)(tables, fits, **params.options), output.png)
