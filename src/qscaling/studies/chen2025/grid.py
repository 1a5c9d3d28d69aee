"""Chen et al. 2025's grid (torch-free): the precisions it trains, each QAT point beside its full-precision partner,
how a checkpoint is scored (as trained) and the job that collects the Linear-input statistics."""

import dataclasses

from qscaling.config import Common
from qscaling.layout import Layout
from qscaling.settings import ConfigError
from qscaling.studies.chen2025.settings import Chen2025Settings, ChenCell
from qscaling.studies.grids import (
    PartneredPoint,
    as_trained_scoring,
    check_branched,
    collect_job,
    partnered_evaluations,
)
from qscaling.studies.study import Evaluation, Job, Scoring, label

STUDY = "chen2025"
KEY = f"studies.{STUDY}"
FULL = "full"  # the fp32 partner of every QAT point (Chen et al.'s BF16 baseline)
PRECISIONS = ("W4A4", "W4A16", "W16A4", "W4A4_FC2_8bit", "W16A4_FC2_8bit")
CHANNEL = "channel"
# Quantized Linear inputs whose row length a group must divide: QKV, O and FC1 read d_model, FC2 reads d_ff.
INPUT_DIMS = ("d_model", "d_ff")
INT, FP = "int", "fp"
ABSMAX = "absmax"
# Learnable quantizers (qscaling.quant.learnable) by the tensor they quantize.
QUANTIZERS = {"lsq": "weights", "lwc": "weights", "lac": "activations"}


def group_spec(bits: int, group, role: str, format: str = INT) -> str:
    """The `bits`-bit absmax spec of a group size (or per-channel weights / per-token activations): INT, or FP4
    E2M1 for `format` fp (8-bit FP is E4M3), blocks of G along the input dimension either way."""
    granularity = ("channel" if role == "weights" else "token") if group == CHANNEL else None
    if format == FP:
        element = "e2m1" if bits == 4 else "e4m3"
        return f"fp:{element}:{granularity or f'b{group}'}"
    return f"int{bits}:{granularity or f'g{group}'}"


def training_precision(name: str, group, bits: int = 4, format: str = INT, quantizer: str = ABSMAX) -> dict:
    """The `training_precision` of one of PRECISIONS at group size `group`, in `format`, with `quantizer` (absmax
    or a key of QUANTIZERS) on the tensor it learns."""
    weights, activations = name.startswith("W4"), "A4" in name
    precision = {
        "weights": group_spec(bits, group, "weights", format) if weights else None,
        "activations": group_spec(bits, group, "activations", format) if activations else None,
    }
    if name.endswith("_FC2_8bit"):
        precision["overrides"] = {"fc2": {"activations": group_spec(8, group, "activations", format)}}
    if quantizer != ABSMAX:
        precision["quantizer"] = {QUANTIZERS[quantizer]: quantizer}
    return precision


def law_group(common: Common, size: str, group) -> int:
    return common.ladder[size].d_model if group == CHANNEL else int(group)


def check(settings: Chen2025Settings, common: Common) -> None:
    check_branched(KEY, settings)
    for index, cell in enumerate(settings.cells):
        _check_cell(f"{KEY}.cells.{index}", cell, settings, common)
    seeds = settings.seeds
    common.check_sizes(f"{KEY}.seeds.size", seeds.size)
    _check_group(common, f"{KEY}.seeds.group", seeds.group, [seeds.size])
    if seeds.precision not in PRECISIONS:
        raise ConfigError(f"config key {KEY}.seeds.precision: unknown precision {seeds.precision!r}")
    if seeds.budget not in settings.budgets:
        raise ConfigError(f"config key {KEY}.seeds.budget: {seeds.budget} is not one of {KEY}.budgets")
    if common.training.seed in seeds.extra:
        raise ConfigError(f"config key {KEY}.seeds.extra: repeats the recipe's seed {common.training.seed}")


def _check_cell(where: str, cell: ChenCell, settings: Chen2025Settings, common: Common) -> None:
    common.check_sizes(f"{where}.sizes", cell.sizes)
    for name in cell.precisions:
        if name not in PRECISIONS:
            raise ConfigError(f"config key {where}.precisions: unknown precision {name!r} (valid: {PRECISIONS})")
    for group in cell.groups:
        _check_group(common, f"{where}.groups", group, cell.sizes)
    if not set(cell.budgets or []) <= set(settings.budgets):
        raise ConfigError(f"config key {where}.budgets: not all of them are in {KEY}.budgets")
    for quantizer in set(cell.quantizers or []) - {ABSMAX}:
        role = QUANTIZERS.get(quantizer)
        if role is None:
            raise ConfigError(
                f"config key {where}.quantizers: unknown quantizer {quantizer!r} (valid: {', '.join(QUANTIZERS)})"
            )
        if (cell.format or INT) != INT or any(training_precision(name, 8)[role] is None for name in cell.precisions):
            raise ConfigError(
                f"config key {where}.quantizers: {quantizer} learns an INT {role} quantizer, which not every "
                f"precision of the cell has"
            )


def _check_group(common: Common, key: str, group, sizes) -> None:
    if group == CHANNEL:
        return
    if not isinstance(group, int) or group < 2:
        raise ConfigError(f"config key {key}: group size {group!r} must be an integer ≥ 2 or '{CHANNEL}'")
    for size in sizes:
        for dim in INPUT_DIMS:
            width = getattr(common.ladder[size], dim)
            if width % group:
                raise ConfigError(f"config key {key}: G = {group} does not divide {size}'s {dim} = {width}")


def points(settings: Chen2025Settings, common: Common) -> list[dict]:
    """Every QAT point of the grid and of the seed repeats, once:
    {size, budget, precision, group, format, quantizer, lr_scale, seed}."""
    seed = common.training.seed
    grid = [
        {
            "size": size,
            "budget": budget,
            "precision": name,
            "group": group,
            "format": cell.format or INT,
            "quantizer": quantizer,
            "lr_scale": float(lr_scale),
            "seed": seed,
        }  # fmt: skip
        for cell in settings.cells
        for name in cell.precisions
        for size in cell.sizes
        for group in cell.groups
        for budget in cell.budgets or settings.budgets
        for quantizer in cell.quantizers or [ABSMAX]
        for lr_scale in cell.lr_scales or [1]
    ]
    repeats = settings.seeds
    grid += [
        {
            **{k: getattr(repeats, k) for k in ("size", "budget", "precision", "group")},
            "format": INT,
            "quantizer": ABSMAX,
            "lr_scale": 1.0,
            "seed": extra,
        }  # fmt: skip
        for extra in [seed, *repeats.extra]
    ]
    unique = {tuple(point.values()): point for point in grid}
    return list(unique.values())


def plan(settings: Chen2025Settings, common: Common, planner) -> list[Evaluation]:
    """Each QAT point and its full-precision partner (one evaluation per checkpoint, every label it carries)."""
    return partnered_evaluations(
        STUDY, settings, planner, [partnered(common, point, settings.branched) for point in points(settings, common)]
    )


def partnered(common: Common, point: dict, branched: bool) -> PartneredPoint:
    size, seed, lr_scale = point["size"], point["seed"], point["lr_scale"]
    recipe = {"seed": seed}
    if lr_scale != 1.0:
        recipe["lr"] = common.peak_lr(size, lr_scale)
    group = law_group(common, size, point["group"])
    granularity = CHANNEL if point["group"] == CHANNEL else "group"
    variant = {"precision": point["precision"], "format": point["format"], "quantizer": point["quantizer"]}
    return PartneredPoint(
        size,
        point["budget"],
        training_precision(point["precision"], point["group"], 4, point["format"], point["quantizer"]),
        label(**variant, lr_scale=lr_scale, G=group, granularity=granularity, seed=seed),
        label(precision=FULL, format="", quantizer="", lr_scale=lr_scale, G=0, granularity="", seed=seed),
        recipe,
        branched,
    )


def scoring(settings: Chen2025Settings, common: Common, layout: Layout) -> Scoring:
    """Each checkpoint as trained (the shared scoring's windows), plus its Linear-input statistics."""
    return dataclasses.replace(
        as_trained_scoring(settings, common, layout),
        function="qscaling.studies.chen2025.score:score_job",
        outputs=("activations",),
    )


def jobs(settings: Chen2025Settings, common: Common, evaluations: list[Evaluation], layout: Layout) -> list[Job]:
    """`chen2025_activations`: every checkpoint's input statistics in one table (Fig. 9, the kurtosis claim)."""
    function = "qscaling.studies.chen2025.analysis:collect_activations_job"
    return [collect_job(STUDY, "activations", evaluations, layout, function, "Collecting the Linear-input statistics")]
