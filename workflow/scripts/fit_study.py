"""Rules fit_<study>: the study's laws fitted to its table → one JSON per fit (or the reason it failed)."""

import pandas as pd

from qscaling.checkpoint import write_json_atomic
from qscaling.evaluate import write_table
from qscaling.provenance import job_context
from qscaling.studies import study_modules

with job_context(snakemake):
    name = snakemake.rule.removeprefix("fit_")
    study = study_modules()[name]
    table = pd.read_parquet(snakemake.input.table)
    for fit_name, result in study.fit_laws(table, snakemake.config).items():
        path = snakemake.output[fit_name]
        if isinstance(result, str):
            write_json_atomic(path, {"error": result})
            print(f"{fit_name}: no fit ({result})")
        else:
            result.to_json(path)
            print(f"{fit_name}: {result.params}")
    if "one_factor" in snakemake.output.keys():
        write_table(study.one_factor_fits(table), snakemake.output.one_factor)
