"""Rule collect_claims: every study's claims checked against this run → results/claims.csv and .md."""

import os
from pathlib import Path

from qscaling.provenance import job_context
from qscaling.studies import collect_claims
from qscaling.studies.claims import render_markdown

with job_context(snakemake):  # noqa: F821
    frame = collect_claims(".", snakemake.config)  # noqa: F821
    tmp = Path(snakemake.output.table).with_name(".claims.csv.tmp")  # noqa: F821
    frame.to_csv(tmp, index=False)
    os.replace(tmp, snakemake.output.table)  # noqa: F821
    Path(snakemake.output.rendered).write_text(render_markdown(frame))  # noqa: F821
