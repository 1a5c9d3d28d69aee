"""Ahmadian et al. 2023, "Intriguing Properties of Quantization at Scale": PTQ cliffs as a training choice.

Grid: a base recipe (the paper's: weight decay 0.1, clipping 1.0, no dropout, bf16) and one-factor ablations from
it — weight decay, dropout, gradient clipping, and bf16 vs fp16 at two weight decays — on one model size (the
paper's 6B; here the ladder's middle size), plus the final recipe and an "outlier-prone" recipe (low weight decay,
no clipping, fp16; standing in for OPT) across sizes, and the final recipe again with `seeds` more training seeds at
the ablation size. Every run is a WSD trunk of the same length (the final recipe
is the default training recipe, so the size axis reuses the shared trunks); the `tracked` factors (bf16 vs fp16)
are also scored at ~20 % and ~53 % of training, the paper's 15k/40k of 75k steps. On CPU the recipe's "bf16" is
fp32 by default (config `recipe.precision`); the bf16/fp16 comparison is its own ablation.

Each checkpoint is scored unquantized, after W8A8 and after W4 (`score`); its claims (`claims`) add the spread of
W8A8 loss δ over the recipe's seeds to every comparison between separately trained runs.

Precision: bf16 / fp16 runs use native autocast on a GPU (fp16 with loss scaling; norms stay fp32 as the paper
needed) and, on CPU where bf16 autocast is ~8× slower, an emulation that rounds every Linear's weights and inputs
to the 16-bit format in the forward pass (`training_precision`; gradients and the optimizer stay fp32, overflow
saturates instead of producing Inf). `precision_mode` chooses; figure captions say "emulated".
"""

from qscaling.studies.ahmadian2023 import analysis, claims, grid
from qscaling.studies.ahmadian2023.settings import Ahmadian2023Settings
from qscaling.studies.study import Study

STUDY = Study(
    name=grid.STUDY,
    settings=Ahmadian2023Settings,
    check=grid.check,
    plan=grid.plan,
    scoring=grid.scoring,
    jobs=grid.jobs,
    build_table=analysis.build_table,
    fit_names=analysis.fit_names,
    fit_laws=analysis.fit_laws,
    claims=claims.claims,
    figures=("qscaling.studies.ahmadian2023.figures",),
)
