"""A minimal study plug-in, registered from the config alone (`studies: {toy2025: {module: toy2025, …}}`):
RTN at a few bit widths on the last learning-curve checkpoint of each size, one claim, one figure
(toy2025_figures.py). tests/test_plugin_study.py builds it through the real workflow."""

from qscaling.config import ConfigError, check_sizes, check_weight_spec
from qscaling.studies import Evaluation, Quantization, label, ptq_scoring
from qscaling.studies.claims import slope_claim

STUDY = "toy2025"
FIGURES = "toy2025_figures"


def check_config(config: dict) -> None:
    study, key = config["studies"][STUDY], f"studies.{STUDY}"
    check_sizes(config, f"{key}.sizes", study["sizes"])
    if not study["bits"]:
        raise ConfigError(f"config key {key}.bits: at least one bit width")
    for bits in study["bits"]:
        check_weight_spec(f"{key}.bits", "rtn", f"int{bits}:channel")


def plan(config: dict, planner) -> list[Evaluation]:
    """The shared trunks' last learning-curve checkpoint: nothing is trained for this study."""
    tokens = config["learning_curves"]["total_tokens"]
    return [
        Evaluation(STUDY, planner.trunk(size, upto=tokens, milestones=[tokens]), tokens, (label(variant="toy"),))
        for size in config["studies"][STUDY]["sizes"]
    ]


def quantizations(config: dict) -> list[Quantization]:
    return [Quantization("rtn", f"int{bits}:channel") for bits in config["studies"][STUDY]["bits"]]


def scoring(config: dict, layout):
    return ptq_scoring(config, layout, STUDY, quantizations(config))


def build_table(rows, settings: dict):
    return rows.sort_values(["N", "bits"]).reset_index(drop=True)


def fit_names(settings: dict) -> list[str]:
    return []


def fit_laws(table, settings: dict) -> dict:
    return {}


def claims(tables: dict, fits: dict, settings: dict) -> list[dict]:
    rows = tables["table"][tables["table"]["method"] == "rtn"]
    return [
        slope_claim(STUDY, "RTN degradation falls with bits", rows, x="bits", y="delta", by="N", expect="negative",
                    log_x=False)
    ]  # fmt: skip
