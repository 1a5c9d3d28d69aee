"""Ouyang et al. 2024's grid (torch-free): which trunk checkpoints (or released or local ones) it scores, Fig. 14's
BitNet and fp32 trunks, the post-training quantizations each checkpoint is scored under, and its other tables' jobs."""

from qscaling.config import Common, check_method_spec, check_weight_spec
from qscaling.layout import Layout
from qscaling.plan import Planner, log_spaced_tokens
from qscaling.quant.precision import canonical_training_precision
from qscaling.settings import ConfigError
from qscaling.studies.grids import check_local_models, local_evaluations, ptq_scoring
from qscaling.studies.ouyang2024.settings import Ouyang2024Settings
from qscaling.studies.study import Evaluation, Job, Quantization, Scoring

STUDY = "ouyang2024"
KEY = f"studies.{STUDY}"
BITNET, FULL = "bitnet", "fp32"  # the two precisions of Fig. 14's runs


def checkpoints(settings: Ouyang2024Settings) -> list[int]:
    return log_spaced_tokens(settings.first_checkpoint, settings.last_checkpoint, settings.checkpoints)


def check(settings: Ouyang2024Settings, common: Common) -> None:
    """Sizes, checkpoint range and every GPTQ / comparison spec, before any job exists."""
    if settings.source == "train":
        common.check_sizes(f"{KEY}.sizes", settings.sizes)
    if settings.source == "local":
        check_local_models(f"{KEY}.local", settings.local)
    if settings.source == "hub" and not settings.hub:
        raise ConfigError(f"config key {KEY}.hub: source 'hub' needs {{models:, steps:, tokens_per_step:}}")
    if settings.first_checkpoint >= settings.last_checkpoint:
        raise ConfigError(f"config key {KEY}.first_checkpoint: must be below last_checkpoint")
    for bits in settings.gptq_bits:
        check_weight_spec(f"{KEY}.group_size", "gptq", f"int{bits}:g{{group}}:gptq", group=settings.group_size)
    for index, entry in enumerate(settings.compare):
        check_method_spec(f"{KEY}.compare.{index}", entry, group=settings.group_size)
    if settings.bitnet:
        check_bitnet(settings, common)


def check_bitnet(settings: Ouyang2024Settings, common: Common) -> None:
    bitnet, seed = settings.bitnet, common.training.seed
    common.check_sizes(f"{KEY}.bitnet.sizes", bitnet.sizes)
    if seed in bitnet.extra_seeds:
        raise ConfigError(f"config key {KEY}.bitnet.extra_seeds: repeats the recipe's seed {seed}")
    try:
        canonical_training_precision(bitnet.precision)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"config key {KEY}.bitnet.precision: {error}") from None


def plan(settings: Ouyang2024Settings, common: Common, planner) -> list[Evaluation]:
    """Trunk checkpoints of our ladder, (`source: hub`, paper scale) released Pythia revisions, or (`source:
    local`) your own checkpoints; whatever the source, Fig. 14's BitNet and fp32 trunks are trained here."""
    bitnet_runs(settings, common, planner)
    if settings.source == "local":
        return local_evaluations(STUDY, settings.local, planner)
    if settings.source == "hub":
        hub = settings.hub
        revisions = {step * hub.tokens_per_step: f"step{step}" for step in hub.steps}
        return [
            Evaluation(STUDY, planner.hub(repo, size, revisions), tokens)
            for size, repo in hub.models.items()
            for tokens in sorted(revisions)
        ]
    tokens = checkpoints(settings)
    return [
        Evaluation(STUDY, planner.trunk(size, upto=settings.last_checkpoint, milestones=tokens), milestone)
        for size in settings.sizes
        for milestone in tokens
    ]


def bitnet_runs(settings: Ouyang2024Settings, common: Common, planner) -> list[dict]:
    """Fig. 14's runs, planned: per size (and at the first size per extra seed) a BitNet trunk and the fp32 trunk of
    the same recipe, both to `tokens` (a WSD trunk's warmup does not depend on its length): {size, seed, run,
    precision}. Their training-loss curves are the result; no checkpoint is scored."""
    block, seed = settings.bitnet, common.training.seed
    if not block:
        return []
    pairs = [(size, seed) for size in block.sizes] + [(block.sizes[0], extra) for extra in block.extra_seeds]
    return [
        {
            "size": size,
            "seed": run_seed,
            "precision": name,
            "run": planner.curve(STUDY, size, block.tokens, seed=run_seed, **overrides),
        }
        for size, run_seed in pairs
        for name, overrides in ((BITNET, {"training_precision": block.precision}), (FULL, {}))
    ]


def compared(settings: Ouyang2024Settings) -> list[Quantization]:
    return [Quantization(*entry.format(group=settings.group_size).split(":", 1)) for entry in settings.compare]


def quantizations(settings: Ouyang2024Settings, common: Common) -> list[Quantization]:
    splits = ("val", "ood") if common.evaluation.ood_source else ("val",)
    gptq = [Quantization("gptq", f"int{bits}:g{settings.group_size}:gptq", splits) for bits in settings.gptq_bits]
    return gptq + [q for q in compared(settings) if q not in gptq]


def scoring(settings: Ouyang2024Settings, common: Common, layout: Layout) -> Scoring:
    return ptq_scoring(STUDY, settings, common, layout, quantizations(settings, common))


def jobs(settings: Ouyang2024Settings, common: Common, evaluations: list[Evaluation], layout: Layout) -> list[Job]:
    """Fig. 14's table (`bitnet_job`) and Fig. 12's: weight change between adjacent checkpoints of every run the
    study scores."""
    milestones = {}
    for evaluation in evaluations:
        milestones.setdefault(evaluation.run, set()).add(evaluation.tokens)
    runs = sorted(milestones)
    bitnet = [bitnet_job(settings, common, layout)] if settings.bitnet else []
    return bitnet + [
        Job(
            "weight_changes",
            "qscaling.studies.ouyang2024.score:weight_changes_job",
            inputs={"summaries": [layout.run_summary(run) for run in runs]},
            outputs={"weight_changes": layout.table(STUDY, "weight_changes")},
            params={"milestones": [sorted(milestones[run]) for run in runs]},
            message="Measuring weight change between adjacent checkpoints",
        )
    ]


def bitnet_job(settings: Ouyang2024Settings, common: Common, layout: Layout) -> Job:
    """Fig. 14's curves binned. `jobs` is not handed the planner `plan` filled, so the runs are planned again on one
    of its own: the same ids, since a run id is a function of its spec alone, not of what else a planner holds."""
    runs = bitnet_runs(settings, common, Planner(common, layout.corpus))
    return Job(
        "bitnet",
        "qscaling.studies.ouyang2024.bitnet:bitnet_curves_job",
        inputs={"summaries": [layout.run_summary(run["run"]) for run in runs]},
        outputs={"bitnet": layout.table(STUDY, "bitnet")},
        params={
            "runs": [
                {key: run[key] for key in ("size", "seed", "precision")}
                | {"N": common.non_embedding_params(run["size"])}
                for run in runs
            ],
            "tokens": settings.bitnet.tokens,
            "bins": settings.bitnet.bins,
        },
        message="Binning the BitNet and fp32 training-loss curves",
    )
