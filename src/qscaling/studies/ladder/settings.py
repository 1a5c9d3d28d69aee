"""The ladder's config block (`studies.ladder`)."""

from typing import Annotated, ClassVar

from pydantic import Field

from qscaling.config import Training
from qscaling.settings import Anneal, Budgets, Fraction, PositiveInt, Settings, Sizes, StudySettings, unique


class LRSweep(Settings):
    """`snakemake ladder_lr`: each swept size's peak LR times each multiplier, annealed at one budget."""

    sizes: Sizes = Field(description="the sizes swept")
    tokens_per_param: float = Field(gt=0, description="D/N of the sweep's runs (the nearest budget is used)")
    lr_multipliers: unique(Annotated[float, Field(gt=0)], min_items=3) = Field(
        description="multipliers of the recipe's peak LR; 1 (the recipe itself) must be among them"
    )


class LadderSettings(StudySettings):
    """The model ladder: every size annealed at every budget in range, the Chinchilla fit on them, and the learning-rate sweep."""

    SHARED: ClassVar[tuple[str, ...]] = ("training",)  # the recipe the sweep checks

    sizes: Sizes = Field(description="the sizes of the grid")
    budgets: Budgets = Field(description="token budgets; each size takes those within its D/N range")
    min_tokens_per_param: float = Field(gt=0, description="smallest D/N of a grid point (warmup dominates below)")
    max_tokens_per_param: float = Field(gt=0, description="largest D/N of a grid point")
    anneal: Anneal = Field(description="wsd: a cooldown branch per budget from the shared trunk; cosine: a run each")
    cooldown_fraction: Fraction = Field(description="share of a budget its cooldown branch decays over")
    eval_tokens: PositiveInt = Field(description="held-out tokens each checkpoint is scored on")
    bootstrap: int = Field(ge=0, description="resamples of the runs for the Chinchilla fit's CIs")
    lr_sweep: LRSweep = Field(description="the learning-rate sweep that chose the recipe")
    training: Training = Field(description="the recipe (the top-level `training`, not a key of this block)")
