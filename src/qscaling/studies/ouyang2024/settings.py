"""Ouyang et al. 2024's config block (`studies.ouyang2024`): QiD on intermediate checkpoints and Fig. 14's BitNet
trunks."""

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from qscaling.config import Training
from qscaling.settings import (
    Bits,
    Calibration,
    LocalModel,
    PositiveInt,
    Settings,
    Sizes,
    StudySettings,
    unique,
)


class HubRevisions(Settings):
    """Released checkpoints by training step (Pythia's), read instead of trained, for source: hub."""

    models: dict[str, str] = Field(min_length=1, description="label -> hub repo of each model")
    steps: unique(PositiveInt, min_items=2) = Field(description="the training steps whose revision (step<N>) is read")
    tokens_per_step: PositiveInt = Field(description="training tokens per step (the tokens a revision has seen)")


class BitNet(Settings):
    """Fig. 14: BitNet-style trunks beside the fp32 trunks of the same sizes and recipe."""

    sizes: Sizes = Field(description="the ladder sizes trained both ways")
    tokens: PositiveInt = Field(description="training tokens of every run")
    extra_seeds: unique(Annotated[int, Field(ge=0)], min_items=0) = Field(
        description="both runs again at the first size with each seed: the seed-noise floor of the gap's change"
    )
    bins: int = Field(ge=2, description="training loss averaged over this many equal token spans after warmup")
    precision: dict[str, Any] = Field(description="the BitNet runs' training_precision (qscaling.quant.qat)")


class Ouyang2024Settings(StudySettings):
    """Ouyang et al. 2024: quantization-induced degradation (QiD) of intermediate checkpoints, and BitNet-style training."""

    SHARED: ClassVar[tuple[str, ...]] = ("training",)  # the recipe's seed: which of Fig. 14's runs are the main ones

    source: Literal["train", "hub", "local"] = Field(
        description="train: the ladder's trunk checkpoints; hub: released checkpoints by revision (`hub`); local: "
        "your own checkpoints (`local`)"
    )
    local: list[LocalModel] | None = Field(
        description="your own HF-format checkpoints, for source: local (see docs/your-own-models.md)"
    )
    hub: HubRevisions | None = Field(description="the released checkpoints, for source: hub")
    sizes: Sizes = Field(description="the ladder sizes whose trunks are checkpointed, for source: train")
    first_checkpoint: PositiveInt = Field(description="tokens of the first trunk checkpoint")
    last_checkpoint: PositiveInt = Field(description="tokens of the last trunk checkpoint")
    checkpoints: int = Field(ge=2, description="log-spaced trunk checkpoints per size")
    gptq_bits: Bits = Field(description="GPTQ weight bit widths (groups of group_size)")
    group_size: PositiveInt = Field(description="the weight group size of GPTQ and of the compared specs")
    compare: list[Annotated[str, Field(pattern=r"^(gptq|awq|rtn):")]] = Field(
        description="method:spec pairs for fig9 ({group} is replaced by group_size)"
    )
    calibration: Calibration = Field(description="GPTQ's and AWQ's calibration windows")
    eval_tokens: PositiveInt = Field(
        description="held-out tokens each checkpoint is scored on, before and after quantization (the same tokens)"
    )
    bitnet: BitNet | None = Field(description="Fig. 14: BitNet-style trunks beside fp32 ones (null: not run)")
    training: Training = Field(description="the recipe (the top-level `training`, not a key of this block)")
