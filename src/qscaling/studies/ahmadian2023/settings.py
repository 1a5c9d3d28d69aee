"""Ahmadian et al. 2023's config block (`studies.ahmadian2023`): the training-choice ablations, the size axis and
the released-OPT comparison.

The ablations' `values`, `with` and `across` hold recipe values of any of the four factors, so their items are
left untyped here and checked by `grid.check` (which names the factor and its valid range).
"""

from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from qscaling.config import Training
from qscaling.settings import PositiveInt, Settings, Sizes, StudySettings, unique

Factor = Literal["weight_decay", "dropout", "grad_clip", "precision"]
Precision = Literal["fp32", "bf16", "fp16"]
GradClip = Annotated[float, Field(gt=0)] | None


class ReleasedModels(Settings):
    """The paper's OPT comparison (Fig. 1): released checkpoints read by revision, for source: hub."""

    models: dict[str, str] = Field(min_length=1, description="label -> hub repo of each model")
    revision: str = Field(description="a branch or commit hash of every model repo (a hash pins the weights)")
    tokens: PositiveInt = Field(description="pre-training tokens of the released models")


class AblationRecipe(Settings):
    """The recipe every ablation varies one factor of (the paper's: weight decay 0.1, clipping 1.0, no dropout)."""

    weight_decay: float = Field(ge=0, description="AdamW's decoupled weight decay")
    grad_clip: GradClip = Field(description="gradient-norm clipping threshold (null: no clipping)")
    dropout: float = Field(ge=0, lt=1, description="residual and attention dropout")
    precision: Precision = Field(description="fp32, or a 16-bit format (emulated or autocast: `precision_mode`)")


class RecipeChanges(Settings):
    """Fields of the recipe another recipe changes; the fields left out keep the recipe's values."""

    weight_decay: float = Field(None, ge=0, description="AdamW's decoupled weight decay")
    grad_clip: GradClip = Field(None, description="gradient-norm clipping threshold (null: no clipping)")
    dropout: float = Field(None, ge=0, lt=1, description="residual and attention dropout")
    precision: Precision = Field(None, description="fp32, or a 16-bit format (emulated or autocast)")


class FactorAblation(Settings):
    """One factor varied from the recipe: a run per value (crossed with `across`'s values, if any)."""

    # `with` is a Python keyword: the field is `with_`, written and dumped as `with`.
    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, serialize_by_alias=True)

    values: Annotated[list[Any], Field(min_length=2, json_schema_extra={"uniqueItems": True})] = Field(
        description="the factor's levels"
    )
    with_: dict[Factor, Any] = Field({}, alias="with", description="other recipe fields fixed for these runs")
    across: dict[Factor, Annotated[list[Any], Field(min_length=1)]] = Field(
        {}, max_length=1, description="one more factor crossed with the values, {factor: its values}"
    )


class ZeroShotTasks(Settings):
    """The zero-shot-style tasks cut from held-out text (`qscaling.tasks`)."""

    items: PositiveInt = Field(description="items per task")
    context_words: PositiveInt = Field(description="words of passage before each item's target")
    continuation_words: PositiveInt = Field(description="words of each continuation candidate")
    seed: int = Field(description="seed of the items' positions and distractors")
    batch_size: PositiveInt = Field(description="requests per lm-evaluation-harness batch")


class Ahmadian2023Settings(StudySettings):
    """Ahmadian et al. 2023: W8A8 and W4 PTQ cliffs as a training choice (one-factor recipe ablations, outliers)."""

    SHARED: ClassVar[tuple[str, ...]] = ("training",)  # the optimizer steps the weight-decay claim checks

    source: Literal["train", "hub"] = Field(
        description="train: our runs; hub: released OPT checkpoints (`hub`, paper scale)"
    )
    hub: ReleasedModels | None = Field(description="the released checkpoints, for source: hub")
    size: str = Field(description="ladder size of the one-factor ablations (the paper's 6B)")
    sizes: Sizes = Field(description="the size axis: final and outlier-prone recipes (final = the shared trunks)")
    tokens: PositiveInt = Field(description="training tokens per run")
    checkpoints: unique(Annotated[float, Field(gt=0, le=1)]) = Field(
        description="fractions of `tokens` to checkpoint at (1.0 = the end; the paper's 15k/40k/75k steps)"
    )
    tracked: Annotated[list[Factor], Field(json_schema_extra={"uniqueItems": True})] = Field(
        description="factors scored at every checkpoint (Fig. 3 right); the others at the last only"
    )
    precision_mode: Literal["emulate", "autocast", "auto"] = Field(
        description="bf16/fp16 runs: emulate (round Linear inputs and weights) | autocast (GPU) | auto"
    )
    recipe: AblationRecipe = Field(description="the final recipe, which every ablation starts from")
    ablations: dict[Factor, FactorAblation] = Field(description="one factor varied from `recipe` per entry")
    outlier_prone: RecipeChanges = Field(description="the outlier-prone recipe's changes (standing in for OPT)")
    seeds: int = Field(ge=0, description="more training seeds of the final recipe at `size`: the seed-noise floor")
    w8a8_weights: str = Field(description="weight spec of W8A8 (activations are per-token INT8, no calibration)")
    w4: str = Field(description="weight spec of the W4 weight-only RTN")
    eval_tokens: PositiveInt = Field(description="held-out tokens each checkpoint is scored on")
    proxy_windows: PositiveInt = Field(description="fixed held-out windows the outlier proxies are measured on")
    tasks: ZeroShotTasks = Field(description="the zero-shot-style tasks built from the held-out set")
    hub_tasks: unique(str) = Field(description="lm-evaluation-harness task names, for source: hub")
    training: Training = Field(description="the recipe (the top-level `training`, not a key of this block)")
