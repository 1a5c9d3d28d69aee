"""A minimal study plug-in, registered from the config alone (`studies: {toy2025: {module: toy2025, …}}`):
RTN at a few bit widths on the last learning-curve checkpoint of each size, one claim, one figure
(toy2025_figures.py). tests/test_plugin_study.py builds it through the real workflow."""

from pydantic import Field

from qscaling.config import check_weight_spec
from qscaling.noise import ClaimNoise
from qscaling.settings import Bits, Calibration, PositiveInt, Sizes, StudySettings
from qscaling.studies.claims import slope_claim
from qscaling.studies.grids import ptq_scoring
from qscaling.studies.study import Evaluation, Quantization, Study, label

NAME = "toy2025"


class ToySettings(StudySettings):
    sizes: Sizes = Field(description="ladder sizes whose last learning-curve checkpoint is quantized")
    bits: Bits = Field(description="RTN bit widths, per output channel")
    calibration: Calibration = Field(description="calibration windows (RTN reads none; the scoring takes them)")
    eval_tokens: PositiveInt = Field(description="held-out tokens each checkpoint is scored on")


def check(settings: ToySettings, common) -> None:
    common.check_sizes(f"studies.{NAME}.sizes", settings.sizes)
    for bits in settings.bits:
        check_weight_spec(f"studies.{NAME}.bits", "rtn", f"int{bits}:channel")


def plan(settings: ToySettings, common, planner) -> list[Evaluation]:
    """The shared trunks' last learning-curve checkpoint: nothing is trained for this study."""
    tokens = common.learning_curves.total_tokens
    return [
        Evaluation(NAME, planner.trunk(size, upto=tokens, milestones=[tokens]), tokens, (label(variant="toy"),))
        for size in settings.sizes
    ]


def scoring(settings: ToySettings, common, layout):
    quantizations = [Quantization("rtn", f"int{bits}:channel") for bits in settings.bits]
    return ptq_scoring(NAME, settings, common, layout, quantizations)


def build_table(rows, settings: ToySettings):
    return rows.sort_values(["N", "bits"]).reset_index(drop=True)


def claims(tables: dict, fits: dict, settings: ToySettings, noise: ClaimNoise) -> list[dict]:
    rows = tables["table"][tables["table"]["method"] == "rtn"]
    return [
        slope_claim(NAME, "RTN degradation falls with bits", rows, x="bits", y="delta", by="N", expect="negative",
                    log_x=False)
    ]  # fmt: skip


STUDY = Study(
    name=NAME,
    settings=ToySettings,
    check=check,
    plan=plan,
    scoring=scoring,
    build_table=build_table,
    claims=claims,
    figures=("toy2025_figures",),
)
