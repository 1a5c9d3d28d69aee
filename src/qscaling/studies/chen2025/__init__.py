"""Chen et al. 2025, "Scaling Law for Quantization-Aware Training": the INT4 QAT error δ_p(N, D, G).

Grid (`cells`): each cell trains every listed precision × size × group size G at every budget, from scratch, as
QAT (`training_precision`: forward fake-quant, clipped STE), annealed by a WSD cooldown branch of its own trunk.
Each QAT point has a full-precision (fp32) partner at the same (size, budget, seed) — the ladder's own run where
the specs coincide. δ = loss of the QAT model *evaluated as trained* − loss of its partner, paired over the same
held-out windows; extra seeds at one point (`seeds`) give the between-run noise floor σ_seed of such a δ.

Precisions (Chen et al.'s names): W4A4, W4A16 (weights only), W16A4 (activations only), and W4A4_FC2_8bit /
W16A4_FC2_8bit with the FC2 (down-projection) input at 8 bits. INT4 symmetric absmax; weights per output
channel or in groups of G along the input dimension, activations per token or in groups of G. A per-channel /
per-token point enters the law with G = d_model (the row length of the QKV, O and FC1 inputs).

A cell may also vary what the law holds fixed, each a label column of the table: `format: fp` trains FP4 E2M1
(blocks of G, the same scaling) instead of INT4 (Fig. 2, and Fig. 13's test of the INT4 law on FP4);
`quantizers: [...]` trains learnable quantizers — LSQ or LWC weights, LAC activation clipping
(`qscaling.quant.learnable`) — instead of absmax (Fig. 14); `lr_scales: [...]` multiplies the peak LR, partner
included (Fig. 3); `budgets` narrows the study's budgets for the cell. The laws, fits and claims read the main
grid only: INT4, absmax, the recipe's LR (`main_grid`).

Modules: `settings` (the config block), `grid` (torch-free: checks, runs, scoring, jobs), `score` (job time: a
checkpoint as trained and its Linear-input statistics), `analysis` (the table, fits and fit tables), `claims`,
`law_figures` (drawn from the paper's constants) and `figures` (this run's).
"""

from qscaling.studies.chen2025 import analysis, claims, grid
from qscaling.studies.chen2025.settings import Chen2025Settings
from qscaling.studies.study import Study

STUDY = Study(
    name=grid.STUDY,
    settings=Chen2025Settings,
    check=grid.check,
    plan=grid.plan,
    scoring=grid.scoring,
    jobs=grid.jobs,
    build_table=analysis.build_table,
    law_points=analysis.law_points,
    power=claims.power,
    fit_names=analysis.fit_names,
    fit_laws=analysis.fit_laws,
    fit_tables=analysis.fit_tables,
    fit_table_names=("decomposition", "ratio"),
    claims=claims.claims,
    figures=("qscaling.studies.chen2025.law_figures", "qscaling.studies.chen2025.figures"),
    diverged_rule=analysis.DIVERGED_RULE,
)
