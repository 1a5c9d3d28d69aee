"""Render a table target: `params.table` ("module:name") gives the CSV rows, `params.function` the image.

Both are called as `function(tables, fits)` on inputs loaded like render_figure.py does.
"""

import os
from pathlib import Path

from qscaling.figures import load_figure_inputs, resolve_function, save_figure
from qscaling.provenance import job_context

with job_context(snakemake):
    tables, fits = load_figure_inputs(dict(snakemake.input.items()))
    frame = resolve_function(snakemake.params.table)(tables, fits)
    csv = Path(snakemake.output.csv)
    tmp = csv.with_name(f".{csv.name}.tmp")
    frame.to_csv(tmp, index=False, float_format="%.6g", lineterminator="\n")
    os.replace(tmp, csv)
    save_figure(resolve_function(snakemake.params.function)(tables, fits), snakemake.output.png)
