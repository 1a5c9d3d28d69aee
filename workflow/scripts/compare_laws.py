"""Rule compare_laws: every study's runs gathered into one table of training runs and one of post-training
quantizations, every law whose inputs they carry fitted on them and scored on held-out sizes and budgets
(`qscaling.comparison`), each loss law's held-out error beside the gap seed noise alone makes between two laws on
its points (`qscaling.studies.law_claims.seed_floors`; σ_seed from the input "noise" where the seed study runs)
→ results/tables/law_comparison.csv."""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

import pandas as pd

from qscaling.atomic import write_csv
from qscaling.comparison import compare, gather
from qscaling.noise import ClaimNoise
from qscaling.provenance import job_context
from qscaling.studies.law_claims import seed_floors
from qscaling.studies.registry import configured_from_params

with job_context(snakemake):
    named = dict(snakemake.input.items())
    noise = ClaimNoise.read(named.pop("noise", None))
    contributions = []
    for configured in snakemake.params.studies:
        study, settings = configured_from_params(configured)
        contributions.append(study.law_points(pd.read_parquet(named[study.name]), settings))
    training, ptq = gather(contributions)
    print(f"{len(training)} training points, {len(ptq)} post-training quantizations")
    write_csv(seed_floors(compare(training, ptq), training, ptq, noise), snakemake.output.table)
