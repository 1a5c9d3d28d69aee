"""Rule collect_claims: every study's claims checked against this run → results/claims.csv and .md."""

import os
from pathlib import Path

from qscaling.provenance import job_context
from qscaling.studies import collect_claims
from qscaling.studies.claims import render_markdown

with job_context(snakemake):
    frame = collect_claims(".", snakemake.config)
    tmp = Path(snakemake.output.table).with_name(".claims.csv.tmp")
    frame.to_csv(tmp, index=False)
    os.replace(tmp, snakemake.output.table)
    Path(snakemake.output.rendered).write_text(render_markdown(frame))
