"""Rule compare_laws: every study's runs gathered into one table of training runs and one of post-training
quantizations, every law whose inputs they carry fitted on them and scored on held-out sizes and budgets
(`qscaling.comparison`) → results/tables/law_comparison.csv."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

import pandas as pd

from qscaling.atomic import write_csv
from qscaling.comparison import compare, gather
from qscaling.provenance import job_context
from qscaling.studies.registry import configured_from_params

with job_context(snakemake):
    contributions = []
    for configured in snakemake.params.studies:
        study, settings = configured_from_params(configured)
        contributions.append(study.law_points(pd.read_parquet(snakemake.input[study.name]), settings))
    training, ptq = gather(contributions)
    print(f"{len(training)} training points, {len(ptq)} post-training quantizations")
    write_csv(compare(training, ptq), snakemake.output.table)
