"""Sun et al. 2025's config block (`studies.sun2025`)."""

from typing import Annotated, Any

from pydantic import Field

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

# Any value: the study's check says what a block must be (an integer ≥ 2 dividing the inputs, channel or tensor).
Block = Annotated[Any, Field(description="a block size, channel or tensor")]


class SunCell(Settings):
    """Every format ExMy × size × block at the cell's budgets, trained from scratch with P2, P4, P6 quantized."""

    formats: unique(str) = Field(description="FP formats ExMy, e.g. e2m1")
    sizes: Sizes = Field(description="ladder sizes")
    blocks: unique(
        Annotated[Any, Field(description="B consecutive input-dim elements per scale, channel (one per row) or tensor")]
    ) = Field(description="the scaling blocks: a block size B, channel or tensor")
    budgets: CellBudgets | None = Field(None, description="the cell's budgets (default: the study's)")


class SunValidation(Settings):
    """Sizes trained channel-wise like the grid and left out of every fit (Fig. 4)."""

    sizes: unique(str, min_items=0) = Field(description="ladder sizes none of the cells trains")
    budgets: unique(PositiveInt, min_items=0) = Field(description="the budgets they train at")
    formats: unique(str, min_items=0) = Field(description="FP formats ExMy, e.g. e1m1")


class SunPoint(Settings):
    """One point of the grid: a size at a budget, in a format and block."""

    size: str = Field(description="the point's ladder size")
    budget: PositiveInt = Field(description="the point's budget")
    format: str = Field(description="the point's FP format ExMy")
    block: Block


class SunSeedRepeats(SunPoint):
    """One point trained at more seeds: the between-run noise floor σ_seed of a comparison."""

    extra: Seeds = Field(description="seeds besides the recipe's")


class Sun2025Settings(StudySettings):
    """Sun et al. 2025: FP-quantized training of the forward and backward GEMM inputs, across formats and blocks."""

    budgets: Budgets = Field(description="token budgets of every cell (a cell's `budgets` narrows them)")
    anneal: Anneal = Field(description="wsd: a cooldown branch per budget from the shared trunk; cosine: a run each")
    branched: Branched = False
    cooldown_fraction: Fraction = Field(description="share of a budget its cooldown branch decays over")
    cells: list[SunCell] = Field(min_length=1, description="each: every format ExMy × size × block at its budgets")
    validation: SunValidation = Field(
        description="sizes trained channel-wise like the grid and left out of every fit (Fig. 4)"
    )
    gemm_inputs: SunPoint = Field(description="Fig. 2: one point with each GEMM input P1…P6 quantized alone")
    seeds: SunSeedRepeats = Field(description="the point repeated at other seeds (the seed-noise floor)")
    eval_tokens: PositiveInt = Field(description="held-out tokens each checkpoint is scored on")
    bootstrap: int = Field(ge=0, description="resamples of the runs for the fits' CIs")
