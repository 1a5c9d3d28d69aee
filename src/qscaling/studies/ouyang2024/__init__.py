"""Ouyang et al. 2024: quantization-induced degradation (QiD) of intermediate checkpoints across N, D and bits, the
unified and one-factor QiD laws, weight change along training, and Fig. 14's BitNet b1.58-style trunks beside fp32
ones (details: `analysis`, `bitnet`)."""

from qscaling.studies.ouyang2024 import analysis, grid
from qscaling.studies.ouyang2024.settings import Ouyang2024Settings
from qscaling.studies.study import Study

STUDY = Study(
    name=grid.STUDY,
    settings=Ouyang2024Settings,
    check=grid.check,
    plan=grid.plan,
    scoring=grid.scoring,
    jobs=grid.jobs,
    build_table=analysis.build_table,
    fit_names=analysis.fit_names,
    fit_laws=analysis.fit_laws,
    fit_tables=analysis.fit_tables,
    fit_table_names=("one_factor",),
    claims=analysis.claims,
    figures=("qscaling.studies.ouyang2024.figures",),
)
