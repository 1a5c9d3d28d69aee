"""The seed study's config block (`studies.noise`)."""

from typing import Any

from pydantic import Field

from qscaling.settings import Anneal, Branched, Budgets, Fraction, PositiveInt, Seeds, Settings, Sizes, StudySettings

MIN_SEEDS = 5  # the MAD of 5 seeds has about 2 dof (qscaling.noise.MAD_DOF); of 3, about 1


class QuantizedPrecision(Settings):
    """The quantized-training precision whose δ the study repeats over seeds."""

    label: str = Field(min_length=1, description="its name in the table and figure, e.g. W4A4-g8")
    training_precision: dict[str, Any] = Field(description="its `training_precision` (qscaling.quant.qat)")


class NoiseSettings(StudySettings):
    """The seed study: every size × budget × seed trained in full precision and at one quantized-training precision,
    the seed-to-seed noise of a loss and of a δ that every claim between separately trained runs is held to."""

    sizes: Sizes = Field(description="ladder sizes (the smallest and largest the claims compare)")
    budgets: Budgets = Field(description="token budgets, each annealed by the study's `anneal`")
    seeds: Seeds = Field(description=f"seeds of every run (at least {MIN_SEEDS}: a robust σ needs them)")
    precision: QuantizedPrecision = Field(description="the quantized-training precision beside fp32")
    branched: Branched = Field(
        False,
        description="also train the quantized precision branched from its fp32 partner's "
        "trunk after warmup, beside the from-scratch runs (the design lever measured)",
    )
    anneal: Anneal = Field(description="wsd: a cooldown branch per budget from the shared trunk; cosine: a run each")
    cooldown_fraction: Fraction = Field(description="share of a budget its cooldown branch decays over")
    eval_tokens: PositiveInt = Field(description="held-out tokens each checkpoint is scored on")
