"""The ladder's grid (torch-free): which (size, budget) points it anneals, the learning-rate sweep's runs, how
each checkpoint is scored, and the sweep's table job."""

import math

from qscaling.config import Common
from qscaling.layout import Layout
from qscaling.settings import ConfigError
from qscaling.studies.ladder.settings import LadderSettings
from qscaling.studies.study import Evaluation, Job, Scoring, label

STUDY = "ladder"
KEY = f"studies.{STUDY}"


def check(settings: LadderSettings, common: Common) -> None:
    common.check_sizes(f"{KEY}.sizes", settings.sizes)
    common.check_sizes(f"{KEY}.lr_sweep.sizes", settings.lr_sweep.sizes)
    if settings.min_tokens_per_param > settings.max_tokens_per_param:
        raise ConfigError(f"config key {KEY}.min_tokens_per_param: above max_tokens_per_param")
    if 1 not in settings.lr_sweep.lr_multipliers:
        raise ConfigError(f"config key {KEY}.lr_sweep.lr_multipliers: must include 1 (the recipe's own LR)")
    for size in settings.sizes:
        if not grid_budgets(settings, common, size):
            raise ConfigError(
                f"config key {KEY}.budgets: no budget puts {size} (N={common.non_embedding_params(size):,}) "
                f"within D/N ∈ [{settings.min_tokens_per_param}, {settings.max_tokens_per_param}]"
            )


def grid_budgets(settings: LadderSettings, common: Common, size: str) -> list[int]:
    n = common.non_embedding_params(size)
    low, high = settings.min_tokens_per_param, settings.max_tokens_per_param
    return [d for d in settings.budgets if low <= d / n <= high]


def sweep_budget(settings: LadderSettings, common: Common, size: str) -> int:
    """The budget of `size`'s LR sweep: of all budgets, the one nearest (in log) `tokens_per_param`·N."""
    target = settings.lr_sweep.tokens_per_param * common.non_embedding_params(size)
    return min(settings.budgets, key=lambda budget: abs(math.log(budget / target)))


def plan(settings: LadderSettings, common: Common, planner) -> list[Evaluation]:
    """The grid's points and the sweep's, one evaluation per checkpoint: the sweep's ×1 point is a grid point and
    carries both labels."""
    anneal, fraction = settings.anneal, settings.cooldown_fraction
    labels = {}
    for size in settings.sizes:
        for budget in grid_budgets(settings, common, size):
            run = planner.annealed(size, budget, anneal, fraction)
            labels.setdefault((run, budget), []).append(label(variant="grid", lr_multiplier=1.0))
    for size in settings.lr_sweep.sizes:
        budget = sweep_budget(settings, common, size)
        for multiplier in settings.lr_sweep.lr_multipliers:
            run = planner.annealed(size, budget, anneal, fraction, lr=common.peak_lr(size, multiplier))
            labels.setdefault((run, budget), []).append(label(variant="lr_sweep", lr_multiplier=float(multiplier)))
    return [Evaluation(STUDY, run, tokens, tuple(variants)) for (run, tokens), variants in labels.items()]


def scoring(settings: LadderSettings, common: Common, layout: Layout) -> Scoring:
    params = {"eval_tokens": settings.eval_tokens, "batch_size": common.evaluation.batch_size}
    return Scoring(
        "qscaling.studies.ladder.score:score_job", {"val": layout.data("val.bin")}, params, message="Scoring"
    )


def jobs(settings: LadderSettings, common: Common, evaluations: list[Evaluation], layout: Layout) -> list[Job]:
    """`ladder_lr`: the sweep's rows, each size's optimum and the LR(N) power law, from the sweep's checkpoints
    alone (so the target trains only the sweep)."""
    swept = {(e.run, e.tokens) for e in evaluations if any(dict(v)["variant"] == "lr_sweep" for v in e.labels)}
    return [
        Job(
            "lr",
            "qscaling.studies.ladder.analysis:lr_sweep_job",
            {"rows": [layout.scored(STUDY, "table", run, tokens) for run, tokens in sorted(swept)]},
            {"lr_sweep": layout.table(STUDY, "lr_sweep")},
            {"training": common.training.model_dump(mode="json", exclude_unset=True)},
            message="the learning-rate sweep and the LR(N) law",
        )
    ]
