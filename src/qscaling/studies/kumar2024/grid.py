"""Kumar et al. 2024's grid (torch-free): which (size, budget) points it anneals, the schedule ablation's runs, and
the post-training quantizations each checkpoint is scored under."""

from qscaling.config import Common, check_weight_spec
from qscaling.layout import Layout
from qscaling.studies.grids import check_local_models, local_evaluations, ptq_scoring
from qscaling.studies.kumar2024.settings import Kumar2024Settings
from qscaling.studies.study import Evaluation, Quantization, Scoring

STUDY = "kumar2024"
KEY = f"studies.{STUDY}"


def check(settings: Kumar2024Settings, common: Common) -> None:
    """Sizes, and the weight format at every (method, bits), before any job exists."""
    if settings.source == "local":
        check_local_models(f"{KEY}.local", settings.local)
    else:
        common.check_sizes(f"{KEY}.sizes", settings.sizes)
        common.check_sizes(f"{KEY}.schedule_ablation.size", settings.schedule_ablation.size)
    for method in settings.methods:
        for bits in settings.bits:
            check_weight_spec(f"{KEY}.weight_format", method, settings.weight_format, bits=bits)


def plan(settings: Kumar2024Settings, common: Common, planner) -> list[Evaluation]:
    """Annealed runs of every (size, budget) in range, or (`source: local`) your own checkpoints as they are."""
    if settings.source == "local":
        return local_evaluations(STUDY, settings.local, planner)
    evaluations = []
    for size in settings.sizes:
        n = common.non_embedding_params(size)
        for budget in settings.budgets:
            if n * budget <= settings.max_ND and budget >= settings.min_tokens_per_param * n:
                run = planner.annealed(size, budget, settings.anneal, settings.cooldown_fraction)
                evaluations.append(Evaluation(STUDY, run, budget))
    ablation = settings.schedule_ablation
    if ablation.anneal != settings.anneal:
        for budget in ablation.budgets:
            run = planner.annealed(ablation.size, budget, ablation.anneal, settings.cooldown_fraction)
            evaluations.append(Evaluation(STUDY, run, budget))
    return evaluations


def quantizations(settings: Kumar2024Settings) -> list[Quantization]:
    return [
        Quantization(method, settings.weight_format.format(bits=bits))
        for method in settings.methods
        for bits in settings.bits
    ]


def scoring(settings: Kumar2024Settings, common: Common, layout: Layout) -> Scoring:
    return ptq_scoring(STUDY, settings, common, layout, quantizations(settings))
