"""Rule collect_claims: every study's claims checked against this run → results/claims.csv and .md.

Reads exactly the rule's named inputs: "<study>.<table>" (parquet) and "<study>.fit.<name>" (fit JSON).
"""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

import importlib

from qscaling.atomic import write_csv, write_text
from qscaling.figures import load_figure_inputs
from qscaling.provenance import job_context
from qscaling.studies.claims import claims_frame, render_markdown

with job_context(snakemake):
    params, named = snakemake.params, dict(snakemake.input.items())
    rows = []
    for study, module_name in params.studies.items():
        prefix = f"{study}."
        tables, fits = load_figure_inputs(
            {
                name.removeprefix(prefix).removeprefix("fit."): path
                for name, path in named.items()
                if name.startswith(prefix)
            }
        )
        rows.extend(importlib.import_module(module_name).claims(tables, fits, params.settings[study]))
    frame = claims_frame(rows, params.scale)
    write_csv(frame, snakemake.output.table)
    write_text(snakemake.output.rendered, render_markdown(frame))
