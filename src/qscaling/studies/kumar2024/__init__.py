"""Kumar et al. 2024, post-training quantization: δ_PTQ of annealed models across N and D, by method and bits,
the law fitted to it, the critical data size and the annealing-schedule ablation (details: `analysis`)."""

from qscaling.studies.kumar2024 import analysis, grid
from qscaling.studies.kumar2024.settings import Kumar2024Settings
from qscaling.studies.study import Study

STUDY = Study(
    name=grid.STUDY,
    settings=Kumar2024Settings,
    check=grid.check,
    plan=grid.plan,
    scoring=grid.scoring,
    build_table=analysis.build_table,
    law_points=analysis.law_points,
    fit_names=analysis.fit_names,
    fit_laws=analysis.fit_laws,
    claims=analysis.claims,
    figures=("qscaling.studies.kumar2024.figures",),
)
