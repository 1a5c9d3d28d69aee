"""Render one figure: call `params.function` ("module:name") on the rule's tables and fits, save `output[0]`.

Inputs are loaded by `qscaling.figures.load_figure_inputs` (named .parquet → tables, .json → fits);
`params.kwargs` (a dict) is passed through to the function.
"""

from qscaling.figures import load_figure_inputs, resolve_function, save_figure
from qscaling.provenance import job_context

with job_context(snakemake):
    tables, fits = load_figure_inputs(dict(snakemake.input.items()))
    function = resolve_function(snakemake.params.function)
    save_figure(function(tables, fits, **dict(getattr(snakemake.params, "kwargs", {}) or {})), snakemake.output[0])
