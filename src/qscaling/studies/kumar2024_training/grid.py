"""The training-precision grid (torch-free): the points its cells and seed repeats train, each beside its fp32
partner, the P_post each checkpoint is post-quantized to, how a checkpoint is scored, and the PTQ table's job."""

import itertools

from qscaling.config import Common, check_weight_spec
from qscaling.layout import Layout
from qscaling.quant.spec import parse_spec
from qscaling.settings import ConfigError
from qscaling.studies.grids import PartneredPoint, check_branched, collect_job, partnered_evaluations
from qscaling.studies.kumar2024_training.precision import (
    FULL,
    law_precisions,
    precision_bits,
    training_precision,
    varied_tensor,
)
from qscaling.studies.kumar2024_training.settings import Kumar2024TrainingSettings, PTQAfterTraining
from qscaling.studies.study import Evaluation, Job, Scoring, label

STUDY = "kumar2024_training"
KEY = f"studies.{STUDY}"


def check(settings: Kumar2024TrainingSettings, common: Common) -> None:
    check_branched(KEY, settings)
    for index, cell in enumerate(settings.cells):
        where = f"{KEY}.cells.{index}"
        common.check_sizes(f"{where}.sizes", cell.sizes)
        for position, name in enumerate(cell.precisions):
            _check_precision(f"{where}.precisions.{position}", name)
        if not set(cell.budgets or []) <= set(settings.budgets):
            raise ConfigError(f"config key {where}.budgets: not all of them are in {KEY}.budgets")
    seeds = settings.seeds
    common.check_sizes(f"{KEY}.seeds.size", seeds.size)
    _check_precision(f"{KEY}.seeds.precision", seeds.precision)
    if common.training.seed in seeds.extra:
        raise ConfigError(f"config key {KEY}.seeds.extra: repeats the recipe's seed {common.training.seed}")
    ptq = settings.ptq
    for method, bits in itertools.product(ptq.methods, ptq.bits):
        check_weight_spec(f"{KEY}.ptq.weight_format", method, ptq.weight_format, bits=bits)


def _check_precision(key: str, name) -> None:
    try:
        for spec in training_precision(name).values():
            parse_spec(spec)
    except ValueError as error:
        raise ConfigError(f"config key {key}: {error}") from None


def points(settings: Kumar2024TrainingSettings, common: Common) -> list[dict]:
    """Every quantized point, once: {size, budget, precision, seed}."""
    seed = common.training.seed
    grid = [
        {"size": size, "budget": budget, "precision": name, "seed": seed}
        for cell in settings.cells
        for name, size in itertools.product(cell.precisions, cell.sizes)
        for budget in cell.budgets or settings.budgets
    ]
    repeats = settings.seeds
    grid += [
        {"size": repeats.size, "budget": repeats.budget, "precision": repeats.precision, "seed": run_seed}
        for run_seed in [seed, *repeats.extra]
    ]
    unique = {tuple(p.values()): p for p in grid}
    return list(unique.values())


def plan(settings: Kumar2024TrainingSettings, common: Common, planner) -> list[Evaluation]:
    """Each quantized point and its full-precision partner (one evaluation per checkpoint, every label it carries)."""
    full = label(precision=FULL, **law_precisions(FULL))
    return partnered_evaluations(
        STUDY,
        settings,
        planner,
        [
            PartneredPoint(
                p["size"],
                p["budget"],
                training_precision(p["precision"]),
                label(precision=p["precision"], **law_precisions(p["precision"]), seed=p["seed"]),
                full + label(seed=p["seed"]),
                {"seed": p["seed"]},
                settings.branched,
            )
            for p in points(settings, common)
        ],
    )


def post_training_bits(ptq: PTQAfterTraining, precision: str) -> list[int]:
    """The P_post a checkpoint trained at `precision` is post-quantized to: every configured bit width for fp32,
    those ≤ P_w for a weight-only point (a lower P_post than P_w is what Fig. 7 asks about; an equal one tells how
    much PTQ adds to the training-time quantizer), none for a point that quantizes activations or the KV cache."""
    bits = sorted(ptq.bits)
    if precision == FULL:
        return bits
    if varied_tensor(precision) != "w":
        return []
    return [value for value in bits if value <= precision_bits(precision)["w"]]


def scoring(settings: Kumar2024TrainingSettings, common: Common, layout: Layout) -> Scoring:
    inputs = {"val": layout.data("val.bin"), "calibration": layout.data("train.bin")}
    params = {
        "eval_tokens": settings.eval_tokens,
        "batch_size": common.evaluation.batch_size,
        "ptq": settings.ptq.model_dump(mode="json", exclude_unset=True),
        "gptq_damp": common.ptq.gptq_damp,
    }
    function = "qscaling.studies.kumar2024_training.score:score_job"
    return Scoring(function, inputs, params, outputs=("ptq",), message="Scoring as trained and post-quantized")


def jobs(
    settings: Kumar2024TrainingSettings, common: Common, evaluations: list[Evaluation], layout: Layout
) -> list[Job]:
    """`kumar2024_training_ptq`: every checkpoint's PTQ rows in one table (Fig. 7, the unified law)."""
    function = "qscaling.studies.kumar2024_training.analysis:collect_ptq_job"
    return [collect_job(STUDY, "ptq", evaluations, layout, function, "Collecting the PTQ-after-training rows")]
