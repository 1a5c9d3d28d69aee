"""Ahmadian et al. 2023's tables (pandas): the study table in a fixed order, the proxy and block-value tables
collected from every checkpoint, and no fits (the paper's claims compare recipes: `claims`)."""

import pandas as pd

from qscaling.atomic import write_table
from qscaling.studies.ahmadian2023.grid import FACTORS
from qscaling.studies.ahmadian2023.settings import Ahmadian2023Settings


def build_table(rows: pd.DataFrame, settings: Ahmadian2023Settings) -> pd.DataFrame:
    """The scoring rows (already labelled by variant: a shared run appears under each), in a fixed order."""
    order = {factor: i for i, factor in enumerate((*FACTORS, "recipe", "seed", "outlier_prone", "released"))}
    return (
        rows.assign(factor_order=rows["factor"].map(order))
        .sort_values(["factor_order", "group", "level", "N", "D", "method"])
        .drop(columns="factor_order")
        .reset_index(drop=True)
    )


def fit_names(settings: Ahmadian2023Settings) -> list[str]:
    """No scaling law: the paper's claims are comparisons between recipes."""
    return []


def fit_laws(table: pd.DataFrame, settings: Ahmadian2023Settings, **options) -> dict:
    return {}


def collect_proxies_job(inputs: dict, outputs: dict, params: dict) -> None:
    """`ahmadian2023_collect_proxies`: every checkpoint's per-block proxies and block values, one table each."""
    for name in ("proxies", "values"):
        write_table(pd.concat([pd.read_parquet(path) for path in inputs[name]], ignore_index=True), outputs[name])
