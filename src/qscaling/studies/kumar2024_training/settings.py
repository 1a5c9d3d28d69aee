"""The training-precision study's config block (`studies.kumar2024_training`)."""

from typing import Literal

from pydantic import Field

from qscaling.settings import (
    Anneal,
    Bits,
    Branched,
    Budgets,
    Calibration,
    CellBudgets,
    Fraction,
    PositiveInt,
    Seeds,
    Settings,
    Sizes,
    StudySettings,
    WeightFormat,
    unique,
)


class PrecisionCell(Settings):
    """Every precision × size of the cell at each of its budgets, trained from scratch."""

    precisions: unique(str) = Field(
        description="W<bits>, A<bits>, KV<bits> or a combination (W4A8KV8); a term may be an FP format (WE3M2); "
        "one term may end in /tensor or /channel (Fig. 13); an unnamed tensor stays fp32"
    )
    sizes: Sizes = Field(description="the ladder sizes the cell trains")
    budgets: CellBudgets | None = Field(None, description="the cell's budgets (default: the study's)")


class PrecisionSeedRepeats(Settings):
    """One point trained at more seeds: the spread of its δ is the noise floor of any comparison."""

    size: str = Field(description="the repeated point's size")
    budget: PositiveInt = Field(description="the repeated point's token budget")
    precision: str = Field(description="the repeated point's precision label")
    extra: Seeds = Field(description="seeds besides the recipe's")


class PTQAfterTraining(Settings):
    """PTQ of the weight-only points and the fp32 partners (Fig. 7, the unified law)."""

    methods: unique(Literal["gptq", "rtn"]) = Field(description="the PTQ methods each checkpoint is scored under")
    bits: Bits = Field(description="the P_post a checkpoint is post-quantized to (those ≤ its P_w)")
    weight_format: WeightFormat = Field(description="the weight spec, {bits} filled with each P_post")
    calibration: Calibration = Field(description="GPTQ's calibration windows from the training shard")


class Kumar2024TrainingSettings(StudySettings):
    """INT (and FP) fake-quantized training of the weights, activations or KV cache, each point beside its fp32
    partner; PTQ after training of the weight-only points."""

    budgets: Budgets = Field(description="token budgets of every cell that names none of its own")
    anneal: Anneal = Field(description="wsd: every point a cooldown branch of its (size, precision) trunk")
    branched: Branched = False
    cooldown_fraction: Fraction = Field(description="share of a budget its cooldown branch decays over")
    cells: list[PrecisionCell] = Field(min_length=1, description="each: every precision × size at its budgets")
    seeds: PrecisionSeedRepeats = Field(description="the seed-noise floor")
    ptq: PTQAfterTraining = Field(description="PTQ of the weight-only points and the fp32 partners (Fig. 7)")
    eval_tokens: PositiveInt = Field(description="held-out tokens each checkpoint is scored on")
    bootstrap: int = Field(ge=0, description="resamples of the runs for the N_eff fits' CIs")
