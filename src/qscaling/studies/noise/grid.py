"""The seed study's grid (torch-free): every size × budget × seed in full precision and at one quantized-training
precision (from scratch, and with `branched` also started from the fp32 partner's trunk after warmup), each
checkpoint scored as trained, and the job that turns its table into the noise model."""

from qscaling.config import Common
from qscaling.layout import Layout
from qscaling.noise import NOISE_PATH
from qscaling.quant.precision import canonical_training_precision
from qscaling.settings import ConfigError
from qscaling.studies.grids import PartneredPoint, as_trained_scoring, check_branched, partnered_evaluations
from qscaling.studies.noise.settings import MIN_SEEDS, NoiseSettings
from qscaling.studies.study import Evaluation, Job, Scoring, label

STUDY = "noise"
KEY = f"studies.{STUDY}"
FULL = "fp32"
BRANCHED = "branched"  # the suffix of the quantized precision's label for its runs branched after warmup


def branched_label(label: str) -> str:
    return f"{label} {BRANCHED}"


def check(settings: NoiseSettings, common: Common) -> None:
    common.check_sizes(f"{KEY}.sizes", settings.sizes)
    if len(settings.seeds) < MIN_SEEDS:
        raise ConfigError(f"config key {KEY}.seeds: {len(settings.seeds)} seeds, at least {MIN_SEEDS} measure σ_seed")
    if settings.precision.label == FULL:
        raise ConfigError(f"config key {KEY}.precision.label: {FULL!r} names the full-precision partner")
    try:
        canonical_training_precision(settings.precision.training_precision)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"config key {KEY}.precision.training_precision: {error}") from None
    check_branched(KEY, settings)


def plan(settings: NoiseSettings, common: Common, planner) -> list[Evaluation]:
    """Each (size, budget, seed): the quantized run and its fp32 partner of the same seed (and with `branched` the
    quantized run branched from that partner's trunk). Runs whose spec another study plans too (the recipe's trunks,
    a QAT study's seed repeats) are trained once."""
    quantized = settings.precision
    starts = [(False, quantized.label)] + ([(True, branched_label(quantized.label))] if settings.branched else [])
    points = [
        PartneredPoint(
            size,
            budget,
            quantized.training_precision,
            label(precision=precision, seed=seed),
            label(precision=FULL, seed=seed),
            {"seed": seed},
            branched,
        )
        for size in settings.sizes
        for budget in settings.budgets
        for seed in settings.seeds
        for branched, precision in starts
    ]
    return partnered_evaluations(STUDY, settings, planner, points)


def scoring(settings: NoiseSettings, common: Common, layout: Layout) -> Scoring:
    return as_trained_scoring(settings, common, layout)


def jobs(settings: NoiseSettings, common: Common, evaluations: list[Evaluation], layout: Layout) -> list[Job]:
    """`noise_model`: σ of a loss and of a δ per (size, budget) from the study's table (`results/fits/noise.json`)."""
    return [
        Job(
            "model",
            "qscaling.studies.noise.analysis:noise_model_job",
            {"table": layout.table(STUDY)},
            {"noise": NOISE_PATH},
            message="the seed-to-seed noise model",
        )
    ]
