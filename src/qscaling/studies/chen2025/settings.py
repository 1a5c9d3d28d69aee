"""Chen et al. 2025's config block (`studies.chen2025`)."""

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from qscaling.config import Training
from qscaling.settings import (
    Anneal,
    Branched,
    Budgets,
    CellBudgets,
    Fraction,
    PositiveInt,
    Seeds,
    Settings,
    Sizes,
    StudySettings,
    unique,
)

# Any value: the study's check says what a group must be (an integer ≥ 2 dividing the inputs, or channel).
Group = Annotated[Any, Field(description="a group size along the input dim, or channel (per channel / per token)")]


class ChenCell(Settings):
    """Every precision × size × G (× quantizer × LR scale) at the cell's budgets, trained as QAT from scratch."""

    precisions: unique(str) = Field(
        description="Chen et al.'s precisions: W4A4, W4A16, W16A4, W4A4_FC2_8bit, W16A4_FC2_8bit"
    )
    sizes: Sizes = Field(description="ladder sizes")
    groups: unique(Group) = Field(
        description="group sizes G along the input dimension, or channel (per channel / per token)"
    )
    budgets: CellBudgets | None = Field(None, description="the cell's budgets (default: the study's)")
    format: Literal["int", "fp"] | None = Field(None, description="int: INT4 (default); fp: FP4 E2M1 (Figs. 2, 13)")
    quantizers: unique(Literal["absmax", "lsq", "lwc", "lac"]) | None = Field(
        None, description="absmax (default) or learnable ones: LSQ / LWC weights, LAC activations (Fig. 14)"
    )
    lr_scales: unique(Annotated[float, Field(gt=0)]) | None = Field(
        None, description="peak-LR multipliers, the partners' too (Fig. 3); default [1]"
    )


class ChenSeedRepeats(Settings):
    """One point trained at more seeds: the between-run noise floor σ_seed of a δ."""

    size: str = Field(description="the point's ladder size")
    budget: PositiveInt = Field(description="the point's budget (one of the study's budgets)")
    precision: str = Field(description="the point's precision (one of Chen et al.'s)")
    group: Group
    extra: Seeds = Field(description="seeds besides the recipe's")


class Chen2025Settings(StudySettings):
    """Chen et al. 2025: the INT4 QAT error δ(N, D, G), trained from scratch and evaluated as trained."""

    SHARED: ClassVar[tuple[str, ...]] = ("training",)  # the recipe's seed: which points are the grid's own

    budgets: Budgets = Field(description="token budgets of every cell (a cell's `budgets` narrows them)")
    anneal: Anneal = Field(description="wsd: a cooldown branch per budget from the shared trunk; cosine: a run each")
    branched: Branched = False
    cooldown_fraction: Fraction = Field(description="share of a budget its cooldown branch decays over")
    cells: list[ChenCell] = Field(min_length=1, description="each: every precision × size × G at its budgets")
    seeds: ChenSeedRepeats = Field(description="the point repeated at other seeds (the seed-noise floor)")
    eval_tokens: PositiveInt = Field(description="held-out tokens each checkpoint is scored on")
    bootstrap: int = Field(ge=0, description="resamples of the runs for the QAT fits' CIs")
    training: Training = Field(description="the recipe (the top-level `training`, not a key of this block)")
