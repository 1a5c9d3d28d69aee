"""Sun et al. 2025's grid (torch-free): the GEMM inputs it quantizes and their FP specs, the checks of its block,
each quantized point beside its full-precision partner, and how a checkpoint is scored (as trained)."""

import itertools
import math
import re

from qscaling.config import Common
from qscaling.layout import Layout
from qscaling.quant.spec import parse_spec
from qscaling.settings import ConfigError
from qscaling.studies.grids import PartneredPoint, as_trained_scoring, check_branched, partnered_evaluations
from qscaling.studies.study import Evaluation, Scoring, label
from qscaling.studies.sun2025.settings import Sun2025Settings, SunCell

STUDY = "sun2025"
KEY = f"studies.{STUDY}"
FULL = "fp32"  # the format label of every full-precision partner
FULL_E, FULL_M = 8, 23  # fp32's exponent and mantissa bits, as the Capybara law reads a partner
CHANNEL, TENSOR = "channel", "tensor"
FORMAT_PATTERN = re.compile(r"e(\d+)m(\d+)")
# The six GEMM inputs of a Linear (Sun et al.'s Fig. 2) as training-precision fields: forward X and W; dY and W
# of dX = dY·W; dY and X of dW = dYᵀ·X.
GEMM_INPUTS = {
    "P1": ("activations", None),
    "P2": ("weights", None),
    "P3": ("backward_grad_output", "dx"),
    "P4": ("backward_weight", None),
    "P5": ("backward_grad_output", "dw"),
    "P6": ("backward_activation", None),
}
LAW_INPUTS = "P2+P4+P6"  # what the scaling-law runs quantize
WEIGHT_FIELDS = ("weights", "backward_weight")  # quantized per output row along the input dim; the rest per token
FIT, VALIDATION = "fit", "validation"


def exponent_mantissa(name: str) -> tuple[int, int]:
    match = FORMAT_PATTERN.fullmatch(name)
    return int(match[1]), int(match[2])


def element_spec(name: str, block, field: str) -> str:
    """The FP spec of one training-precision field: format `name` (e.g. e2m1) scaled per `block` of consecutive
    input-dimension elements, per row (`channel`: a weight's output row, an activation's or gradient's token) or
    per tensor."""
    if block == CHANNEL:
        granularity = CHANNEL if field in WEIGHT_FIELDS else "token"
    else:
        granularity = TENSOR if block == TENSOR else f"b{block}"
    return f"fp:{name}:{granularity}"


def training_precision(name: str, block, inputs: str = LAW_INPUTS) -> dict:
    """The training precision quantizing the GEMM inputs `inputs` ("P2+P4+P6", "P3", …) in format `name`."""
    precision = {}
    for target in inputs.split("+"):
        field, gemms = GEMM_INPUTS[target]
        precision[field] = element_spec(name, block, field)
        if gemms is not None:
            precision["grad_output_gemms"] = gemms
    return precision


def law_block(common: Common, size: str, block) -> float:
    """B as the laws read it: the block size, d_model for channel-wise scaling, NaN for tensor-wise."""
    if block == TENSOR:
        return math.nan
    return float(common.ladder[size].d_model if block == CHANNEL else block)


def check(settings: Sun2025Settings, common: Common) -> None:
    check_branched(KEY, settings)
    fit_sizes = set()
    for index, cell in enumerate(settings.cells):
        _check_cell(f"{KEY}.cells.{index}", cell, settings, common)
        fit_sizes |= set(cell.sizes)
    validation = settings.validation
    common.check_sizes(f"{KEY}.validation.sizes", validation.sizes)
    _check_formats(f"{KEY}.validation.formats", validation.formats)
    overlap = sorted(fit_sizes & set(validation.sizes))
    if overlap:
        raise ConfigError(f"config key {KEY}.validation.sizes: {', '.join(overlap)} also in the fitted cells")
    for name in ("gemm_inputs", "seeds"):
        point = getattr(settings, name)
        common.check_sizes(f"{KEY}.{name}.size", point.size)
        _check_formats(f"{KEY}.{name}.format", [point.format])
        _check_block(common, f"{KEY}.{name}.block", point.block, [point.size])
    if common.training.seed in settings.seeds.extra:
        raise ConfigError(f"config key {KEY}.seeds.extra: repeats the recipe's seed {common.training.seed}")


def _check_cell(where: str, cell: SunCell, settings: Sun2025Settings, common: Common) -> None:
    common.check_sizes(f"{where}.sizes", cell.sizes)
    _check_formats(f"{where}.formats", cell.formats)
    for item in cell.blocks:
        _check_block(common, f"{where}.blocks", item, cell.sizes)
    if not set(cell.budgets or []) <= set(settings.budgets):
        raise ConfigError(f"config key {where}.budgets: not all of them are in {KEY}.budgets")


def _check_formats(key: str, names) -> None:
    for index, name in enumerate(names):
        if not isinstance(name, str) or FORMAT_PATTERN.fullmatch(name) is None:
            raise ConfigError(f"config key {key}.{index}: format {name!r} is not ExMy (e.g. e2m1)")
        try:
            parse_spec(f"fp:{name}:channel")
        except ValueError as error:
            raise ConfigError(f"config key {key}.{index}: {error}") from None


def _check_block(common: Common, key: str, block, sizes) -> None:
    if block in (CHANNEL, TENSOR):
        return
    if not isinstance(block, int) or isinstance(block, bool) or block < 2:
        raise ConfigError(f"config key {key}: block {block!r} must be an integer ≥ 2, '{CHANNEL}' or '{TENSOR}'")
    for size in sizes:
        # Every Linear's input and output rows (d_model and d_ff wide) are cut into blocks: forward and backward.
        for dim in ("d_model", "d_ff"):
            width = getattr(common.ladder[size], dim)
            if width % block:
                raise ConfigError(f"config key {key}: B = {block} does not divide {size}'s {dim} = {width}")


def points(settings: Sun2025Settings, common: Common) -> list[dict]:
    """Every quantized point, once: {size, budget, format, block, inputs, split, seed}."""
    seed = common.training.seed

    def point(size, budget, name, item, inputs=LAW_INPUTS, split=FIT, run_seed=seed):
        return {"size": size, "budget": budget, "format": name, "block": item, "inputs": inputs, "split": split,
                "seed": run_seed}  # fmt: skip

    grid = [
        point(size, budget, name, item)
        for cell in settings.cells
        for name, size, item in itertools.product(cell.formats, cell.sizes, cell.blocks)
        for budget in cell.budgets or settings.budgets
    ]
    validation = settings.validation
    grid += [
        point(size, budget, name, CHANNEL, split=VALIDATION)
        for name, size, budget in itertools.product(validation.formats, validation.sizes, validation.budgets)
    ]
    gemm = settings.gemm_inputs
    grid += [point(gemm.size, gemm.budget, gemm.format, gemm.block, inputs) for inputs in [*GEMM_INPUTS, LAW_INPUTS]]
    repeats = settings.seeds
    grid += [
        point(repeats.size, repeats.budget, repeats.format, repeats.block, run_seed=extra)
        for extra in [seed, *repeats.extra]
    ]
    unique = {tuple(p.values()): p for p in grid}
    return list(unique.values())


def plan(settings: Sun2025Settings, common: Common, planner) -> list[Evaluation]:
    """Each quantized point and its full-precision partner (one evaluation per checkpoint, every label it carries)."""
    partnered_points = [partnered(common, p, settings.branched) for p in points(settings, common)]
    return partnered_evaluations(STUDY, settings, planner, partnered_points)


def partnered(common: Common, p: dict, branched: bool) -> PartneredPoint:
    size, seed = p["size"], p["seed"]
    E, M = exponent_mantissa(p["format"])
    variant = label(format=p["format"], E=E, M=M, block=str(p["block"]), B=law_block(common, size, p["block"]))
    full = label(format=FULL, E=FULL_E, M=FULL_M, block=CHANNEL, B=law_block(common, size, CHANNEL), inputs="")
    return PartneredPoint(
        size,
        p["budget"],
        training_precision(p["format"], p["block"], p["inputs"]),
        variant + label(inputs=p["inputs"], split=p["split"], seed=seed),
        full + label(split=p["split"], seed=seed),
        {"seed": seed},
        branched,
    )


def scoring(settings: Sun2025Settings, common: Common, layout: Layout) -> Scoring:
    return as_trained_scoring(settings, common, layout)
