"""Sun et al. 2025, "Scaling Laws for Floating-Point Quantization Training": loss of FP-quantized training.

Grid (`cells`): each cell trains every listed FP format ExMy × size × block at every budget, from scratch, with
the paper's scaling-law targets fake-quantized: forward W, backward W (in dX = dY·W) and backward X (in
dW = dYᵀ·X) — "P2, P4, P6". IEEE-like ExMy with subnormals, round to nearest even, saturation; one fp32 scale
FP_max / max|block| per B consecutive elements along the input dimension (`channel`: one per row, B = its length;
`tensor`: one per tensor). Every point is a WSD cooldown branch of its (size, format, block) trunk and has a
full-precision (fp32, the papers' BF16 baseline) partner at the same (size, budget, seed): the ladder's own run.

Besides the grid: `validation` sizes are trained like the grid but left out of every fit, to test its
extrapolation (Fig. 4); `gemm_inputs` trains one point with each of the six GEMM inputs P1…P6 quantized alone
(Fig. 2); `seeds` repeats one point with more seeds, whose spread σ_seed of the loss is the noise floor of any
comparison between separately trained runs.

Modules: `settings` (the config block), `grid` (torch-free: checks, runs, scoring as trained), `analysis` (the
table, the laws' rows, fits and fit tables), `claims`, `law_figures` (drawn from the paper's constants) and
`figures` (this run's).
"""

from qscaling.studies.study import Study
from qscaling.studies.sun2025 import analysis, claims, grid
from qscaling.studies.sun2025.settings import Sun2025Settings

STUDY = Study(
    name=grid.STUDY,
    settings=Sun2025Settings,
    check=grid.check,
    plan=grid.plan,
    scoring=grid.scoring,
    build_table=analysis.build_table,
    law_points=analysis.law_points,
    power=claims.power,
    fit_names=analysis.fit_names,
    fit_laws=analysis.fit_laws,
    fit_tables=analysis.fit_tables,
    fit_table_names=("block_slopes",),
    claims=claims.claims,
    figures=("qscaling.studies.sun2025.law_figures", "qscaling.studies.sun2025.figures"),
    diverged_rule=analysis.DIVERGED_RULE,
)
