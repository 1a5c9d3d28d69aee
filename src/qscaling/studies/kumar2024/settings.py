"""Kumar et al. 2024's config block (`studies.kumar2024`): the post-training quantization grid."""

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from qscaling.config import Training
from qscaling.settings import (
    Anneal,
    Budgets,
    Calibration,
    Fraction,
    LocalModel,
    PositiveInt,
    Seeds,
    Settings,
    Sizes,
    StudySettings,
    WeightFormat,
    unique,
)


class ScheduleAblation(Settings):
    """Fig. 12: the same PTQ on models annealed by the other schedule."""

    size: str = Field(description="the ladder size the ablation repeats")
    anneal: Anneal = Field(description="its annealing schedule (the same as the study's: no ablation runs)")
    budgets: Budgets = Field(description="the token budgets it anneals at")


class KumarSeedRepeats(Settings):
    """Grid points trained again at other seeds: how far δ_PTQ (and the loss) of separately trained runs scatter."""

    sizes: Sizes = Field(description="ladder sizes repeated (the grid's two ends of N)")
    budget: PositiveInt = Field(description="the budget repeated at each size (one of the study's budgets)")
    extra: Seeds = Field(description="seeds besides the recipe's")


class Kumar2024Settings(StudySettings):
    """Kumar et al. 2024, post-training quantization: δ_PTQ of annealed checkpoints across sizes, budgets and bits."""

    SHARED: ClassVar[tuple[str, ...]] = ("training",)  # the recipe's seed: which points are the grid's own

    source: Literal["train", "local"] = Field(
        description="train: annealed runs of the ladder; local: your own checkpoints (`local`)"
    )
    local: list[LocalModel] | None = Field(
        description="your own HF-format checkpoints, for source: local (see docs/your-own-models.md)"
    )
    sizes: Sizes = Field(description="the ladder sizes of the grid")
    budgets: Budgets = Field(description="token budgets; each size takes those within max_ND and min_tokens_per_param")
    max_ND: float = Field(gt=0, description="per size, budgets with N·D above this are skipped")
    min_tokens_per_param: float = Field(ge=0, description="and budgets below this D/N (mostly warmup)")
    anneal: Anneal = Field(description="wsd: a cooldown branch per budget from the shared trunk; cosine: a run each")
    cooldown_fraction: Fraction = Field(description="share of a budget its cooldown branch decays over")
    methods: unique(Literal["gptq", "awq", "rtn"]) = Field(description="the PTQ methods each checkpoint is scored by")
    bits: unique(Annotated[int, Field(ge=2, le=8)], min_items=2) = Field(description="weight bit widths")
    weight_format: WeightFormat = Field(description="the weight spec at each bit width ({bits} filled in)")
    calibration: Calibration = Field(description="GPTQ's and AWQ's calibration windows")
    eval_tokens: PositiveInt = Field(
        description="held-out tokens each checkpoint is scored on, before and after quantization (the same tokens)"
    )
    schedule_ablation: ScheduleAblation = Field(description="Fig. 12's annealing-schedule ablation")
    seeds: KumarSeedRepeats | None = Field(
        None, description="grid points repeated at other seeds (the seed band of δ_PTQ); null: none"
    )
    training: Training = Field(description="the recipe (the top-level `training`, not a key of this block)")
