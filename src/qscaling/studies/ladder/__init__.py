"""The model ladder: every size annealed at every budget in range, the Chinchilla law fitted on those points, and
the learning-rate sweep that chose the recipe every other study trains with (details: `analysis`)."""

from qscaling.studies.ladder import analysis, grid
from qscaling.studies.ladder.settings import LadderSettings
from qscaling.studies.study import Study

STUDY = Study(
    name=grid.STUDY,
    settings=LadderSettings,
    check=grid.check,
    plan=grid.plan,
    scoring=grid.scoring,
    jobs=grid.jobs,
    build_table=analysis.build_table,
    law_points=analysis.law_points,
    fit_names=analysis.fit_names,
    fit_laws=analysis.fit_laws,
    fit_tables=analysis.fit_tables,
    fit_table_names=("e_profile",),
    claims=analysis.claims,
    figures=("qscaling.studies.ladder.figures",),
)
