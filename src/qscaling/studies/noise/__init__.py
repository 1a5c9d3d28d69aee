"""The seed study: the seed-to-seed noise of a held-out loss and of a quantized-training δ, measured with several
seeds at the smallest and largest sizes and two budgets (`snakemake noise`); with `branched`, the quantized
precision also branched from its fp32 partner's trunk after warmup, a design lever measured beside it.

Every claim that compares separately trained runs is held to this noise: `results/fits/noise.json` gives σ per
(size, budget) with its degrees of freedom (`qscaling.noise`), which the claims read.

Modules: `settings` (the config block), `grid` (torch-free: the runs, scoring as trained, the noise-model job),
`analysis` (the table and the noise model), `figures`.
"""

from qscaling.studies.noise import analysis, grid
from qscaling.studies.noise.settings import NoiseSettings
from qscaling.studies.study import Study

STUDY = Study(
    name=grid.STUDY,
    settings=NoiseSettings,
    check=grid.check,
    plan=grid.plan,
    scoring=grid.scoring,
    jobs=grid.jobs,
    build_table=analysis.build_table,
    claims=analysis.claims,
    figures=("qscaling.studies.noise.figures",),
    diverged_rule=analysis.DIVERGED_RULE,
)
