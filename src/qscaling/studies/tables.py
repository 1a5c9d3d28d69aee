"""Table algebra several studies share (pandas only, torch-free): rows repeated under their variant labels, rows of
diverged runs set apart, and points paired with their full-precision partner over the same held-out windows."""

import pandas as pd

from qscaling.stats import standard_error

PARTNER_KEYS = ["size", "N", "D", "seed"]  # a point trained at a precision and its full-precision partner share these


def with_labels(frame: pd.DataFrame, labels: list[dict]) -> pd.DataFrame:
    """`frame` repeated under each variant label (its columns added); unchanged without labels."""
    if not labels:
        return frame
    labels = pd.DataFrame(labels)
    return frame.merge(labels.drop(columns=[column for column in labels if column in frame]), how="cross")


def split_diverged(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scored rows, rows of diverged checkpoints), each without the `diverged` columns."""
    if "diverged" not in rows:
        return rows, rows.iloc[:0]
    diverged = rows["diverged"].eq(True)
    columns = ["diverged", "diverged_reason"]
    # Scored rows' columns the diverged rows lack (loss, window, …) go; with none diverged, every column stays.
    lost = rows[diverged].dropna(axis="columns", how="all") if diverged.any() else rows[diverged]
    return rows[~diverged].drop(columns=columns), lost


def trained(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of runs that trained (not diverged)."""
    return table[~table["diverged"].astype(bool)]


def recipe_seed(table: pd.DataFrame) -> int:
    """The seed most points trained with (the recipe's): the `seeds` repeats are a few points at other seeds."""
    return int(table["seed"].mode().min())


def build_study_table(study, rows: pd.DataFrame, settings) -> pd.DataFrame:
    """The study's tidy table from its scored rows; rows of diverged runs need the study's `diverged_rule`."""
    if "diverged" in rows and rows["diverged"].eq(True).any() and study.diverged_rule is None:
        runs = sorted(rows.loc[rows["diverged"].eq(True), "run"].unique())
        raise ValueError(f"{study.name}: run(s) {', '.join(runs)} diverged and the study has no rule to leave them out")
    return study.build_table(rows, settings)


def _window_losses(per_window: pd.DataFrame, labels: list) -> pd.DataFrame:
    """Each checkpoint's mean loss over its held-out windows, with its standard error and window count."""
    return (
        per_window.groupby([*PARTNER_KEYS, "milestone", *labels, "run"], sort=False, dropna=False)
        .agg(loss=("loss", "mean"), loss_se=("loss", standard_error), windows=("window", "size"))
        .reset_index()
    )


def _paired_deltas(points: pd.DataFrame, partners: pd.DataFrame, variant: list) -> pd.DataFrame:
    """Each point's δ against its partner, paired window by window, with the standard error of the differences."""
    paired = points.merge(partners, on=[*PARTNER_KEYS, "window"], suffixes=("", "_base"), validate="many_to_one")
    paired["difference"] = paired["loss"] - paired["loss_base"]
    return (
        paired.groupby(["run", *variant, "seed"], sort=False)
        .agg(base_loss=("loss_base", "mean"), delta=("difference", "mean"), delta_se=("difference", standard_error))
        .reset_index()
    )


def _check_partnered(study: str, points, partners, diverged, partner_column: str, full: str) -> None:
    keys = PARTNER_KEYS
    partnered = {tuple(key) for key in partners[keys].drop_duplicates().to_numpy()}
    partnered |= {tuple(key) for key in diverged.loc[diverged[partner_column] == full, keys].to_numpy()}
    unpartnered = {tuple(key) for key in points[keys].drop_duplicates().to_numpy()} - partnered
    if unpartnered:
        raise ValueError(f"{study}: quantized points without a full-precision partner: {sorted(unpartnered)}")


def partnered_table(rows: pd.DataFrame, study: str, variant: list, labels: list, partner_column: str, full: str):
    """One row per checkpoint and variant (`variant`: the columns that tell one point from another besides
    PARTNER_KEYS; `labels`: every label column kept): its loss over the held-out windows and, for a point whose
    `partner_column` is not `full`, δ = its loss − its full-precision partner's, paired over the same windows, with
    standard errors. `budget` is the planned token budget, D the tokens seen. A diverged run keeps a row with
    `diverged` True and no loss; a point without a partner (trained or diverged) is an error."""
    rows, diverged = split_diverged(rows)
    per_window = rows.drop_duplicates(["run", "window", *variant, "seed"])
    is_full = per_window[partner_column] == full
    partners = per_window[is_full][[*PARTNER_KEYS, "window", "loss"]].drop_duplicates([*PARTNER_KEYS, "window"])
    points = per_window[~is_full]
    table = _window_losses(per_window, labels).merge(
        _paired_deltas(points, partners, variant), on=["run", *variant, "seed"], how="left"
    )
    _check_partnered(study, points, partners, diverged, partner_column, full)
    table = table.assign(diverged=False, diverged_reason="")
    if not diverged.empty:
        lost = diverged[[*PARTNER_KEYS, "milestone", *labels, "run", "diverged_reason"]].assign(diverged=True)
        table = pd.concat([table, lost], ignore_index=True)
    return table.rename(columns={"milestone": "budget"})
