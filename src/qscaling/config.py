"""The top-level config: the scale preset merged over config.yaml's values, validated and typed (`resolve_config`).

Each section is a `qscaling.settings.Settings` model; the blocks under `studies:` stay raw here and are typed by
their own study (`qscaling.pipeline`), so this layer knows no study. Torch-free: the Snakefile calls it before any
job exists.
"""

import copy
import hashlib
import json
import math
from typing import Annotated, Any, Literal

from pydantic import Field

from qscaling.quant.spec import parse_spec
from qscaling.settings import (
    Anneal,
    ConfigError,
    Fraction,
    PositiveInt,
    Settings,
    Sizes,
    build,
    unique,
)
from qscaling.shape import ModelShape

REGISTRY_SOURCES = ("austen", "mobydick", "shakespeare", "milton", "kjv")


class HFDataset(Settings):
    name: str = Field(description="hub id of the dataset")
    config_name: str | None = Field(None, description="the dataset's configuration, where it has several")
    split: str = Field("train", description="the split to read documents from")
    text_column: str = Field("text", description="the column holding each document's text")
    max_documents: PositiveInt | None = Field(None, description="read at most this many documents")


class Corpus(Settings):
    kind: Literal["registry", "local", "hf"] = Field(
        description="registry: the texts shipped by package registries (`sources`); local: `local_files`; hf: "
        "`hf_dataset`"
    )
    sources: unique(Literal[REGISTRY_SOURCES]) = Field(description="registry texts, for kind: registry")
    local_files: list[str] = Field([], description="globs of UTF-8 text files, for kind: local")
    hf_dataset: HFDataset | None = Field(None, description="the dataset, for kind: hf")
    document_chars: int = Field(
        ge=100, description="long works are cut at paragraph boundaries into documents of about this size"
    )
    val_fraction: Fraction = Field(description="share of documents held out (by a hash of the document id)")
    vocab_size: int = Field(ge=260, le=65535, description="byte-level BPE entries, EOS included")
    tokenizer: str | None = Field(
        None, description="hub id or tokenizer.json path of a tokenizer to reuse (null: train a BPE on the split)"
    )
    seed: int = Field(description="seed of the train/validation split")


class PTQ(Settings):
    gptq_damp: float = Field(gt=0, description="GPTQ dampening, a fraction of mean(diag H) added to H's diagonal")


class Evaluation(Settings):
    max_tokens: PositiveInt = Field(description="held-out tokens per learning-curve checkpoint (the same windows)")
    batch_size: PositiveInt = Field(description="windows per forward pass when evaluating")
    ood_source: Literal["djangodocs"] | None = Field(
        description="registry source of the out-of-domain held-out set (technical English), or null"
    )


def round_lr(value: float) -> float:
    """A learning rate rounded to 3 significant digits, so run ids stay readable."""
    return float(f"{value:.3g}")


class Training(Settings):
    """The recipe every run starts from; a study may override fields of a run."""

    seq_len: PositiveInt = Field(description="tokens per training sequence (and per evaluation window)")
    batch_size: PositiveInt = Field(description="sequences per optimizer step")
    lr: float = Field(gt=0, description="peak LR of a model with lr_reference_params non-embedding parameters")
    lr_reference_params: float = Field(gt=0, description="the N at which the peak LR is `lr`")
    lr_exponent: float = Field(description="peak LR of a size = lr·(N / lr_reference_params)^-lr_exponent")
    min_lr_ratio: float = Field(ge=0, le=1, description="the LR a schedule decays to, as a share of the peak")
    betas: list[Annotated[float, Field(ge=0, lt=1)]] = Field(min_length=2, max_length=2, description="AdamW's β1, β2")
    eps: float = Field(gt=0, description="AdamW's ε")
    weight_decay: float = Field(ge=0, description="AdamW's decoupled weight decay")
    grad_clip: Annotated[float, Field(gt=0)] | None = Field(
        description="gradient-norm clipping threshold (null: no clipping)"
    )
    dropout: float = Field(ge=0, lt=1, description="residual and attention dropout")
    warmup_tokens_per_param: float = Field(ge=0, description="linear warmup over this many tokens per parameter N")
    warmup_min_steps: int = Field(
        ge=0,
        description="the fewest optimizer steps a warmup takes, whatever the size (a short warmup lets a seed spike)",
    )
    warmup_max_fraction: float = Field(ge=0, le=1, description="the largest share of a cosine run spent warming up")
    schedule: Anneal = Field(description="wsd (constant after warmup; cooldown branches anneal) or cosine")
    autocast: Literal["bf16", "fp16"] | None = Field(description="null (fp32) or a 16-bit autocast format")
    seed: int = Field(description="seed of the initial weights and the data order")
    state_every_steps: PositiveInt = Field(description="resumable state written this often (and at the end)")

    def peak_lr(self, n_params: int, multiplier: float = 1.0) -> float:
        """The peak LR of a model of `n_params` (`lr` scaled as N^−lr_exponent, the power law `snakemake
        ladder_lr` fits to the per-size optima), times `multiplier`, each rounded (`round_lr`)."""
        peak = round_lr(self.lr * (n_params / self.lr_reference_params) ** -self.lr_exponent)
        return peak if multiplier == 1 else round_lr(peak * multiplier)

    def warmup_tokens(self, n_params: int, schedule: str, total_tokens: int) -> int:
        """Linear warmup over `warmup_tokens_per_param`·N tokens and at least `warmup_min_steps` steps, so it grows
        with the model and not with the budget (a WSD trunk serves every budget, so its warmup cannot depend on
        one); a cosine run's warmup is also capped at `warmup_max_fraction` of its tokens, so a short run is not
        mostly warmup."""
        tokens = max(
            round(self.warmup_tokens_per_param * n_params), self.warmup_min_steps * self.batch_size * self.seq_len
        )
        if schedule == "cosine":
            tokens = min(tokens, math.floor(self.warmup_max_fraction * total_tokens))
        return tokens


class Shape(Settings):
    """A model size of the ladder (its vocabulary and context come from `corpus` and `training`)."""

    d_model: PositiveInt = Field(description="hidden width")
    n_layers: PositiveInt = Field(description="decoder blocks")
    n_heads: PositiveInt = Field(description="attention heads (d_model must divide evenly)")
    d_ff: PositiveInt = Field(description="SwiGLU hidden width")


SizeName = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.]*$")]


class LearningCurves(Settings):
    sizes: Sizes = Field(description="ladder sizes whose constant-LR trunks are evaluated along the way")
    total_tokens: PositiveInt = Field(description="tokens each trunk trains")
    first_milestone: PositiveInt = Field(description="first checkpoint (tokens); the rest are log-spaced")
    milestones: int = Field(ge=2, description="checkpoints per run")


class Common(Settings):
    """The sections every study shares: the corpus, the recipe, the ladder, evaluation and PTQ settings."""

    scale: str = Field(description="name of the preset applied from `presets`")
    device: Literal["auto", "cpu", "cuda"] = Field(description="auto (cuda when available), cpu or cuda")
    corpus: Corpus = Field(description="the text every model trains and is evaluated on")
    ptq: PTQ = Field(description="settings of the post-training quantization methods, shared by every study")
    evaluation: Evaluation = Field(description="held-out evaluation of the learning-curve checkpoints")
    training: Training = Field(description="the recipe every run starts from (a study may override fields)")
    ladder: dict[SizeName, Shape] = Field(
        min_length=1, description="model sizes, named by their non-embedding parameters N (src/qscaling/shape.py)"
    )
    learning_curves: LearningCurves = Field(description="the constant-LR trunks of figures/common/learning_curves")

    def shape(self, size: str) -> ModelShape:
        return ModelShape(
            **self.ladder[size].model_dump(), vocab_size=self.corpus.vocab_size, seq_len=self.training.seq_len
        )

    def non_embedding_params(self, size: str) -> int:
        """N of a ladder size, from its shape (no torch)."""
        return self.shape(size).non_embedding_params

    def peak_lr(self, size: str, multiplier: float = 1.0) -> float:
        """The recipe's peak LR of a ladder size, times `multiplier` (`Training.peak_lr`)."""
        return self.training.peak_lr(self.non_embedding_params(size), multiplier)

    def check_sizes(self, key: str, names) -> None:
        """`names` (one size or a list) are all sizes of the ladder."""
        for index, name in enumerate([names] if isinstance(names, str) else names):
            if name not in self.ladder:
                where = key if isinstance(names, str) else f"{key}.{index}"
                raise ConfigError(
                    f"config key {where}: size '{name}' is not in ladder (defined: {', '.join(self.ladder)})"
                )

    def check(self) -> None:
        """What the schema cannot say: shapes that build, sizes that exist, milestones in range, a corpus source."""
        for name in self.ladder:
            try:
                self.shape(name)
            except ValueError as error:
                raise ConfigError(f"config key ladder.{name}: {error}") from error
        self.check_sizes("learning_curves.sizes", self.learning_curves.sizes)
        if self.learning_curves.first_milestone >= self.learning_curves.total_tokens:
            raise ConfigError("config key learning_curves.first_milestone: must be below learning_curves.total_tokens")
        if self.corpus.kind == "local" and not self.corpus.local_files:
            raise ConfigError("config key corpus.local_files: kind 'local' needs at least one file pattern")
        if self.corpus.kind == "hf" and not self.corpus.hf_dataset:
            raise ConfigError("config key corpus.hf_dataset: kind 'hf' needs {name: ...}")

    @property
    def corpus_id(self) -> str:
        """Identity of the token data: a hash of the corpus section as written (what it is made of and how it is
        split)."""
        written = self.corpus.model_dump(mode="json", exclude_unset=True)
        canonical = json.dumps(written, sort_keys=True, separators=(",", ":"))
        return f"{self.corpus.kind}-{hashlib.sha256(canonical.encode()).hexdigest()[:10]}"


class Config(Common):
    """The whole configuration after its preset is merged in; `studies` holds each study's block as written."""

    studies: dict[str, dict[str, Any]] = Field(
        description="one block per study, in the order their claims are listed: a built-in study is "
        "qscaling.studies.<name>; any other names its importable module under `module:`"
    )

    def common(self) -> Common:
        """The shared sections alone: what a study's grid reads besides its own block."""
        return Common(**{name: getattr(self, name) for name in Common.model_fields})


def deep_merge(base: dict, override: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def resolve_config(raw: dict) -> Config:
    """The preset named by `scale` merged over the base values, validated and typed; ConfigError (one line)
    otherwise. The studies' blocks are checked by `qscaling.pipeline`."""
    presets = raw.get("presets", {})
    if not isinstance(presets, dict):
        raise ConfigError("config key presets: must be a mapping of scale name -> overrides")
    scale = raw.get("scale", "default")
    if scale not in presets:
        raise ConfigError(f"config key scale: '{scale}' is not a preset (defined: {', '.join(presets) or 'none'})")
    config = build(Config, deep_merge({k: v for k, v in raw.items() if k != "presets"}, presets[scale]))
    config.check()
    return config


# Methods that read a weight spec, and the granularities each can apply (GPTQ works column by column).
WEIGHT_METHODS = {"rtn": None, "awq": None, "w8a8": None, "gptq": ("tensor", "channel", "group")}


def check_weight_spec(key: str, method: str, text, **fields) -> None:
    """A weight spec (a template filled with `fields`) parses and suits `method`; else ConfigError naming `key`."""
    if not isinstance(text, str):
        raise ConfigError(f"config key {key}: a quantization spec must be a string, got {text!r}")
    try:
        filled = text.format(**fields)
    except (KeyError, IndexError, ValueError) as error:
        placeholders = ", ".join("{" + name + "}" for name in fields) or "none"
        raise ConfigError(
            f"config key {key}: {text!r} has an unknown placeholder {error} (allowed: {placeholders})"
        ) from None
    try:
        spec = parse_spec(filled)
    except ValueError as error:
        raise ConfigError(f"config key {key}: {error}") from None
    allowed = WEIGHT_METHODS.get(method, ())
    if allowed and spec.granularity not in allowed:
        raise ConfigError(f"config key {key}: {method} needs {', '.join(allowed)} granularity, got '{filled}'")


def check_method_spec(key: str, text, **fields) -> None:
    """'method:spec' (e.g. 'awq:int4:g{group}') with a weight-only PTQ method."""
    method, _, spec = text.partition(":") if isinstance(text, str) else ("", "", text)
    if method not in WEIGHT_METHODS or method == "w8a8":
        valid = ", ".join(m for m in WEIGHT_METHODS if m != "w8a8")
        raise ConfigError(f"config key {key}: {text!r} must read METHOD:SPEC with METHOD one of {valid}")
    check_weight_spec(key, method, spec, **fields)
