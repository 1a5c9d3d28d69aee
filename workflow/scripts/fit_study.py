"""Rules fit_<study>: the study's laws fitted to its table (and the tables its `fit_inputs` name) → one JSON per
fit (or the reason it failed), plus the tables its fits make."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

import pandas as pd

from qscaling.atomic import write_json, write_table
from qscaling.provenance import job_context
from qscaling.studies.registry import configured_from_params

with job_context(snakemake):
    params = snakemake.params
    study, settings = configured_from_params(params.study)
    table = pd.read_parquet(snakemake.input.table)
    inputs = {name: pd.read_parquet(snakemake.input[name]) for name in params.fit_inputs}
    fitted = study.fit_laws(table, settings, **inputs) if study.fit_laws else {}
    for fit_name, result in fitted.items():
        path = snakemake.output[fit_name]
        if isinstance(result, str):
            write_json(path, {"error": result})
            print(f"{fit_name}: no fit ({result})")
        else:
            result.to_json(path)
            print(f"{fit_name}: {result.params}")
    if params.fit_tables:
        for name, frame in study.fit_tables(table, settings, **inputs).items():
            write_table(frame, snakemake.output[name])
