"""Kumar et al. 2024's grid (torch-free): which (size, budget) points it anneals, the schedule ablation's runs, and
the post-training quantizations each checkpoint is scored under."""

from qscaling.config import Common, check_weight_spec
from qscaling.layout import Layout
from qscaling.settings import ConfigError
from qscaling.studies.grids import check_local_models, local_evaluations, ptq_scoring
from qscaling.studies.kumar2024.settings import Kumar2024Settings
from qscaling.studies.study import Evaluation, Quantization, Scoring, label

STUDY = "kumar2024"
KEY = f"studies.{STUDY}"


def check(settings: Kumar2024Settings, common: Common) -> None:
    """Sizes, and the weight format at every (method, bits), before any job exists."""
    if settings.source == "local":
        check_local_models(f"{KEY}.local", settings.local)
    else:
        common.check_sizes(f"{KEY}.sizes", settings.sizes)
        common.check_sizes(f"{KEY}.schedule_ablation.size", settings.schedule_ablation.size)
        _check_seeds(settings, common)
    for method in settings.methods:
        for bits in settings.bits:
            check_weight_spec(f"{KEY}.weight_format", method, settings.weight_format, bits=bits)


def in_range(settings: Kumar2024Settings, common: Common, size: str, budget: int) -> bool:
    """Whether the grid anneals `size` at `budget`: N·D within `max_ND` and D/N at least `min_tokens_per_param`."""
    n = common.non_embedding_params(size)
    return n * budget <= settings.max_ND and budget >= settings.min_tokens_per_param * n


def _check_seeds(settings: Kumar2024Settings, common: Common) -> None:
    """The repeated points are points of the grid: their sizes and budget in it, their seeds not the recipe's."""
    seeds = settings.seeds
    if seeds is None:
        return
    common.check_sizes(f"{KEY}.seeds.sizes", seeds.sizes)
    for size in seeds.sizes:
        if size not in settings.sizes:
            raise ConfigError(f"config key {KEY}.seeds.sizes: {size} is not one of {KEY}.sizes")
        if seeds.budget not in settings.budgets or not in_range(settings, common, size, seeds.budget):
            raise ConfigError(
                f"config key {KEY}.seeds.budget: {seeds.budget} is not a budget the grid anneals {size} at "
                f"(one of {KEY}.budgets, within max_ND and min_tokens_per_param)"
            )
    if common.training.seed in seeds.extra:
        raise ConfigError(f"config key {KEY}.seeds.extra: repeats the recipe's seed {common.training.seed}")


def plan(settings: Kumar2024Settings, common: Common, planner) -> list[Evaluation]:
    """Annealed runs of every (size, budget) in range, the repeated points at their other seeds, or (`source:
    local`) your own checkpoints as they are. Trained rows carry their `seed` and whether they are a `repeat`."""
    if settings.source == "local":
        return local_evaluations(STUDY, settings.local, planner)
    recipe_seed = common.training.seed
    own = (label(seed=recipe_seed, repeat=False),)
    evaluations = []
    for size in settings.sizes:
        for budget in settings.budgets:
            if in_range(settings, common, size, budget):
                run = planner.annealed(size, budget, settings.anneal, settings.cooldown_fraction)
                evaluations.append(Evaluation(STUDY, run, budget, own))
    for size in settings.seeds.sizes if settings.seeds else ():
        for seed in settings.seeds.extra:
            budget = settings.seeds.budget
            run = planner.annealed(size, budget, settings.anneal, settings.cooldown_fraction, seed=seed)
            evaluations.append(Evaluation(STUDY, run, budget, (label(seed=seed, repeat=True),)))
    ablation = settings.schedule_ablation
    if ablation.anneal != settings.anneal:
        for budget in ablation.budgets:
            run = planner.annealed(ablation.size, budget, ablation.anneal, settings.cooldown_fraction)
            evaluations.append(Evaluation(STUDY, run, budget, own))
    return evaluations


def quantizations(settings: Kumar2024Settings) -> list[Quantization]:
    return [
        Quantization(method, settings.weight_format.format(bits=bits))
        for method in settings.methods
        for bits in settings.bits
    ]


def scoring(settings: Kumar2024Settings, common: Common, layout: Layout) -> Scoring:
    return ptq_scoring(STUDY, settings, common, layout, quantizations(settings))
