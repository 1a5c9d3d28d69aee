"""Ahmadian et al. 2023's grid (torch-free): the recipes it trains (one-factor ablations, the size axis, more seeds)
or the released checkpoints it reads, how each checkpoint is scored and the tables its jobs build."""

import itertools
from dataclasses import dataclass

from qscaling.config import Common, check_weight_spec
from qscaling.device import resolve_device
from qscaling.layout import Layout
from qscaling.settings import ConfigError
from qscaling.studies.ahmadian2023.settings import Ahmadian2023Settings
from qscaling.studies.study import Evaluation, Job, Quantization, Scoring, label
from qscaling.tasks import TASKS

STUDY = "ahmadian2023"
KEY = f"studies.{STUDY}"
FACTORS = ("weight_decay", "dropout", "grad_clip", "precision")
PRECISIONS = ("fp32", "bf16", "fp16")
# Forward-pass rounding that emulates each 16-bit format on CPU (bf16 = E8M7, fp16 = E5M10; unscaled casts,
# bit-identical to torch's .to(dtype) for finite values in range).
EMULATED_FORMATS = {"bf16": "fp:e8m7:unscaled", "fp16": "fp:e5m10:unscaled"}


@dataclass(frozen=True)
class Variant:
    """One training recipe the study scores: `factor` ("weight_decay" …, "recipe", "outlier_prone") at `level`."""

    factor: str
    level: str
    group: str  # the crossed factor's value ("wd 0.1") or ""
    size: str
    recipe: tuple  # sorted (field, value) pairs over weight_decay, grad_clip, dropout, precision
    tracked: bool  # scored at every checkpoint, not only the last
    seed: int | None = None  # a training seed other than the config's (factor "seed")

    @property
    def label(self) -> str:
        return " · ".join(part for part in (self.factor, self.level, self.group) if part)


def level_label(value) -> str:
    return "none" if value is None else value if isinstance(value, str) else f"{value:g}"


def _check_recipe_value(key: str, name: str, value) -> None:
    """weight_decay ≥ 0, grad_clip null or > 0, dropout in [0, 1), precision one of PRECISIONS."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if name not in FACTORS:
        raise ConfigError(f"config key {key}: unknown recipe field '{name}' (valid: {', '.join(FACTORS)})")
    if name == "precision" and value not in PRECISIONS:
        raise ConfigError(f"config key {key}: precision {value!r} is not one of {', '.join(PRECISIONS)}")
    if name == "weight_decay" and not (number and value >= 0):
        raise ConfigError(f"config key {key}: weight_decay {value!r} must be a number ≥ 0")
    if name == "grad_clip" and not (value is None or (number and value > 0)):
        raise ConfigError(f"config key {key}: grad_clip {value!r} must be null (no clipping) or a number > 0")
    if name == "dropout" and not (number and 0 <= value < 1):
        raise ConfigError(f"config key {key}: dropout {value!r} must be a number in [0, 1)")


def check(settings: Ahmadian2023Settings, common: Common) -> None:
    """Sizes, both weight specs and every recipe value of the grid, before any job exists."""
    if settings.source == "train":
        common.check_sizes(f"{KEY}.size", settings.size)
        common.check_sizes(f"{KEY}.sizes", settings.sizes)
    check_weight_spec(f"{KEY}.w8a8_weights", "w8a8", settings.w8a8_weights)
    check_weight_spec(f"{KEY}.w4", "rtn", settings.w4)
    for part in ("recipe", "outlier_prone"):
        for name, value in getattr(settings, part).model_dump(exclude_unset=True).items():
            _check_recipe_value(f"{KEY}.{part}.{name}", name, value)
    for factor, ablation in settings.ablations.items():
        where = f"{KEY}.ablations.{factor}"
        for index, value in enumerate(ablation.values):
            _check_recipe_value(f"{where}.values.{index}", factor, value)
        for name, value in ablation.with_.items():
            _check_recipe_value(f"{where}.with.{name}", name, value)
        for name, values in ablation.across.items():
            for index, value in enumerate(values):
                _check_recipe_value(f"{where}.across.{name}.{index}", name, value)


def _variant(factor, level, group, size, recipe, tracked, seed=None) -> Variant:
    if recipe["precision"] not in PRECISIONS:
        raise ValueError(f"studies.{STUDY}: precision '{recipe['precision']}' is not one of {PRECISIONS}")
    return Variant(factor, level, group, size, tuple(sorted(recipe.items())), tracked, seed)


def _ablation_variants(settings: Ahmadian2023Settings) -> list[Variant]:
    """Each ablation's runs: its factor at each value (crossed with `across`), from the recipe and `with`."""
    base, tracked = settings.recipe.model_dump(), set(settings.tracked)
    out = []
    for factor, ablation in settings.ablations.items():
        crossed = list(ablation.across.items())
        across_field, across_values = crossed[0] if crossed else (None, [None])
        for value, other in itertools.product(ablation.values, across_values):
            recipe = {**base, **ablation.with_, factor: value}
            group = ""
            if across_field is not None:
                recipe[across_field] = other
                group = f"{'wd' if across_field == 'weight_decay' else across_field} {level_label(other)}"
            out.append(_variant(factor, level_label(value), group, settings.size, recipe, factor in tracked))
    return out


def variants(settings: Ahmadian2023Settings, common: Common) -> list[Variant]:
    """Every recipe of the grid (the same recipe may appear under several factors; the planner shares its run)."""
    base = settings.recipe.model_dump()
    out = _ablation_variants(settings)
    first_seed = common.training.seed
    for seed in range(first_seed + 1, first_seed + 1 + settings.seeds):
        out.append(_variant("seed", str(seed), "", settings.size, base, False, seed))
    outlier_prone = {**base, **settings.outlier_prone.model_dump(exclude_unset=True)}
    for size_label in settings.sizes:
        out.append(_variant("recipe", "final", "", size_label, base, False))
        out.append(_variant("outlier_prone", "outlier-prone", "", size_label, outlier_prone, False))
    return out


def precision_mode(settings: Ahmadian2023Settings, common: Common) -> str:
    """ "emulate" or "autocast": `auto` autocasts only where training runs on a GPU."""
    if settings.precision_mode != "auto":
        return settings.precision_mode
    return "autocast" if resolve_device(common.device) == "cuda" else "emulate"


def run_overrides(recipe: tuple, mode: str) -> dict:
    """RunSpec fields for a recipe: the three optimizer choices plus the training precision."""
    fields = dict(recipe)
    precision = fields.pop("precision")
    if precision == "fp32":
        return fields
    if mode == "autocast":
        return {**fields, "autocast": precision}
    fmt = EMULATED_FORMATS[precision]
    return {**fields, "training_precision": {"weights": fmt, "activations": fmt}}


def checkpoint_tokens(settings: Ahmadian2023Settings) -> list[int]:
    return sorted({int(round(fraction * settings.tokens)) for fraction in settings.checkpoints})


def _milestones(variant: Variant, settings: Ahmadian2023Settings) -> list[int]:
    return checkpoint_tokens(settings) if variant.tracked else [settings.tokens]


def plan(settings: Ahmadian2023Settings, common: Common, planner) -> list[Evaluation]:
    """Trunk checkpoints of every variant, or (`source: hub`, paper scale) released OPT checkpoints; each labelled
    with every variant that trained its run (a run shared by several variants is scored once)."""
    if settings.source == "hub":
        hub = settings.hub
        return [
            Evaluation(STUDY, planner.hub(repo, name, {hub.tokens: hub.revision}), hub.tokens, (released_label(name),))
            for name, repo in hub.models.items()
        ]
    mode = precision_mode(settings, common)
    labels, checkpoints = {}, {}
    for variant in variants(settings, common):
        seed = {} if variant.seed is None else {"seed": variant.seed}
        milestones = _milestones(variant, settings)
        overrides = run_overrides(variant.recipe, mode)
        run = planner.trunk(variant.size, upto=settings.tokens, milestones=milestones, **overrides, **seed)
        labels.setdefault(run, []).append(variant_label(variant, run, mode))
        checkpoints.setdefault(run, {}).update(dict.fromkeys(milestones))
    return [Evaluation(STUDY, run, tokens, tuple(labels[run])) for run in checkpoints for tokens in checkpoints[run]]


def variant_label(variant: Variant, run: str, mode: str) -> tuple:
    precision = dict(variant.recipe)["precision"]
    return label(
        run=run,
        factor=variant.factor,
        level=variant.level,
        group=variant.group,
        variant=variant.label,
        size=variant.size,
        tracked=variant.tracked,
        precision=precision,
        emulated=precision != "fp32" and mode == "emulate",
    )


def released_label(name: str) -> tuple:
    return label(
        run=f"hub-{name}",
        factor="released",
        level=name,
        group="",
        variant=f"released · {name}",
        size=name,
        tracked=False,
        precision="released",
        emulated=False,
    )


def final_tokens(settings: Ahmadian2023Settings) -> int:
    """Training tokens of the last checkpoint: the study's `tokens`, or the released models' pre-training tokens."""
    return settings.tokens if settings.source == "train" else settings.hub.tokens


def quantizations(settings: Ahmadian2023Settings) -> list[Quantization]:
    return [Quantization("w8a8", settings.w8a8_weights), Quantization("rtn", settings.w4)]


def scoring(settings: Ahmadian2023Settings, common: Common, layout: Layout) -> Scoring:
    """Loss, task accuracy and outlier proxies of each checkpoint, unquantized and after W8A8 and W4."""
    tasks = settings.hub_tasks if settings.source == "hub" else list(TASKS)
    return Scoring(
        "qscaling.studies.ahmadian2023.score:score_job",
        inputs={"val": layout.data("val.bin"), "tokenizer": layout.data("tokenizer.json"), "tasks": task_files()},
        params={
            "quantizations": [q.__dict__ for q in quantizations(settings)],
            "final_tokens": final_tokens(settings),
            "tasks": tasks,
            "eval_tokens": settings.eval_tokens,
            "proxy_windows": settings.proxy_windows,
            "batch_size": common.evaluation.batch_size,
            "task_batch_size": settings.tasks.batch_size,
        },
        outputs=("proxies", "values"),
        message="Scoring loss, tasks and proxies, unquantized / W8A8 / W4, of",
    )


def task_files() -> list[str]:
    return [f"results/{STUDY}/tasks/{task}.{ext}" for task in TASKS for ext in ("yaml", "jsonl")]


def jobs(settings: Ahmadian2023Settings, common: Common, evaluations: list[Evaluation], layout: Layout) -> list[Job]:
    """The zero-shot-style tasks built from the held-out set, and the proxy and block-value tables."""
    scored = {
        kind: [layout.scored(STUDY, kind, e.run, e.tokens) for e in evaluations] for kind in ("proxies", "values")
    }
    return [
        Job(
            "build_tasks",
            "qscaling.studies.ahmadian2023.score:build_tasks_job",
            inputs={
                "val": layout.data("val.bin"),
                "tokenizer": layout.data("tokenizer.json"),
                "corpus": layout.data("corpus.json"),
            },
            outputs={"tasks": task_files()},
            params={"tasks": settings.tasks.model_dump(mode="json", exclude_unset=True)},
            message="Building zero-shot-style tasks from the held-out set",
        ),
        Job(
            "collect_proxies",
            "qscaling.studies.ahmadian2023.analysis:collect_proxies_job",
            inputs=scored,
            outputs={"proxies": layout.table(STUDY, "proxies"), "values": layout.table(STUDY, "values")},
            message="Collecting the proxy and weight tables",
        ),
    ]
