"""Rules fit_<study>: the study's laws fitted to its table → one JSON per fit (or the reason it failed)."""

import pandas as pd

from qscaling.checkpoint import write_json_atomic
from qscaling.evaluate import write_table
from qscaling.provenance import job_context
from qscaling.studies import study_modules

with job_context(snakemake):  # noqa: F821
    name = snakemake.rule.removeprefix("fit_")  # noqa: F821
    study = study_modules()[name]
    table = pd.read_parquet(snakemake.input.table)  # noqa: F821
    for fit_name, result in study.fit_laws(table, snakemake.config).items():  # noqa: F821
        path = snakemake.output[fit_name]  # noqa: F821
        if isinstance(result, str):
            write_json_atomic(path, {"error": result})
            print(f"{fit_name}: no fit ({result})")
        else:
            result.to_json(path)
            print(f"{fit_name}: {result.params}")
    if "one_factor" in snakemake.output.keys():  # noqa: F821
        write_table(study.one_factor_fits(table), snakemake.output.one_factor)  # noqa: F821
