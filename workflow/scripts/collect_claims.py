"""Rule collect_claims: every study's claims checked against this run → results/claims.csv and .md."""

import json
import os
from pathlib import Path

import pandas as pd

from qscaling.laws import load_fit
from qscaling.provenance import job_context
from qscaling.studies import study_modules
from qscaling.studies.claims import claims_frame, render_markdown
from qscaling.studies.ouyang2024 import weight_change_claim


def read_fit(path):
    return None if "error" in json.loads(Path(path).read_text()) else load_fit(path)


with job_context(snakemake):  # noqa: F821
    config, rows = snakemake.config, []  # noqa: F821
    for name, study in study_modules().items():
        table = pd.read_parquet(f"results/tables/{name}.parquet")
        fits = {fit_name: read_fit(f"results/fits/{name}/{fit_name}.json") for fit_name in study.fit_names(config)}
        rows.extend(study.claims(table, fits, config))
    rows.append(weight_change_claim(pd.read_parquet(snakemake.input.weight_changes)))  # noqa: F821
    frame = claims_frame(rows, config["scale"])
    tmp = Path(snakemake.output.table).with_name(".claims.csv.tmp")  # noqa: F821
    frame.to_csv(tmp, index=False)
    os.replace(tmp, snakemake.output.table)  # noqa: F821
    Path(snakemake.output.rendered).write_text(render_markdown(frame))  # noqa: F821
