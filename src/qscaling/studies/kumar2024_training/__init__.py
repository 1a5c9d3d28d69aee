"""Kumar et al. 2024, "Scaling Laws for Precision", training-precision part: loss of INT-quantized training.

Grid (`cells`): each cell trains every listed precision × size at every budget, from scratch. A precision names
the tensors it quantizes and their bits, e.g. `W4` (weights only), `A8` (activations only), `KV4` (KV cache only)
or `W4A8KV8` (joint); a tensor it does not name stays in fp32. As in the paper, quantization is integer fake-quant
of the forward pass with a straight-through estimator, symmetric absmax: weights per output channel, activations
and the k/v projection outputs per tensor. Every point is a WSD cooldown branch of its (size, precision) trunk and
has a full-precision (fp32, the paper's BF16 baseline) partner at the same (size, budget, seed): the ladder's own
run. `seeds` repeats one point with more seeds, whose spread σ_seed of δ is the noise floor of any comparison
between separately trained runs.

PTQ after training (`ptq`, Fig. 7): each weight-only point and every full-precision partner is also post-quantized
(GPTQ, RTN; INT per output channel) to each P_post ≤ its P_w, and scored against itself as trained on the same
windows: the `kumar2024_training_ptq` table.

Fits: the N_eff law on each marginal sweep (one tensor quantized, with every partner) and on every point; the
compute-optimal precision P* of the joint fit, with its bootstrap distribution from refits on resampled runs; the
unified law (Eq. 7) per PTQ method on the PTQ-after-training grid (details: `analysis`).
"""

from qscaling.studies.kumar2024_training import analysis, claims, grid
from qscaling.studies.kumar2024_training.settings import Kumar2024TrainingSettings
from qscaling.studies.study import Study

STUDY = Study(
    name=grid.STUDY,
    settings=Kumar2024TrainingSettings,
    check=grid.check,
    plan=grid.plan,
    scoring=grid.scoring,
    jobs=grid.jobs,
    build_table=analysis.build_table,
    law_points=analysis.law_points,
    fit_names=analysis.fit_names,
    fit_laws=analysis.fit_laws,
    fit_tables=analysis.fit_tables,
    fit_table_names=("optimal_precision", "forms"),
    fit_inputs=("ptq",),  # the fits read the PTQ-after-training table besides the study's own
    claims=claims.claims,
    figures=(
        "qscaling.studies.kumar2024_training.figures.sweeps",
        "qscaling.studies.kumar2024_training.figures.compute",
        "qscaling.studies.kumar2024_training.figures.ptq",
        "qscaling.studies.kumar2024_training.figures.ablations",
    ),
    diverged_rule=analysis.DIVERGED_RULE,
)
