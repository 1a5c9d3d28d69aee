"""The laws against measurements no one here made: small published tables of post-training quantization of public
model families (`data/public/<name>.csv`, each beside a note `<name>.md` naming its source and licence), and each
applicable law's prediction from its paper's constants for every row.

A table has one row per model and quantization format: the model's parameters N and training tokens D as its
developers published them, the format's bits per weight, and the perplexity on one evaluation set before and after
quantizing. δ = ln(perplexity / baseline perplexity) is the loss gap in nats per token, the quantity the PTQ laws
predict; `perplexity_rounding` (half the last published digit) bounds how far rounding alone moves it.
"""

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from qscaling.laws import LAWS

PUBLIC_COLUMNS = {
    "model": str, "family": str, "N": float, "D": float, "format": str, "method": str, "bits": float,
    "baseline_perplexity": float, "perplexity": float, "perplexity_rounding": float,
}  # fmt: skip
# The laws of δ after post-training quantization whose inputs a table carries (N, D and bits), with the name each
# gives the bits; every paper variant of each is predicted.
PUBLIC_LAWS = {"kumar2024.ptq": "P_post", "ouyang2024.qid": "P"}
PREDICTION_COLUMNS = [
    "table", "model", "family", "N", "D", "format", "method", "bits", "measured_delta", "rounding_bound", "law",
    "variant", "source", "predicted_delta",
]  # fmt: skip


def read_public_table(path: str | Path) -> pd.DataFrame:
    """The table at `path`, typed; ValueError naming the file, and the column or row, of anything that does not
    fit PUBLIC_COLUMNS (a missing column, a value that is not a positive number, a model and format listed twice)."""
    path = Path(path)
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [name for name in PUBLIC_COLUMNS if name not in frame.columns]
    if missing:
        raise ValueError(f"{path}: column {missing[0]!r} missing; have {list(frame.columns)}")
    if frame.empty:
        raise ValueError(f"{path}: no rows")
    frame = frame[list(PUBLIC_COLUMNS)].copy()
    for name, kind in PUBLIC_COLUMNS.items():
        if kind is str:
            continue
        values = pd.to_numeric(frame[name], errors="coerce")
        bad = ~(np.isfinite(values) & (values > 0))
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(f"{path}, row {row + 2}: {name} = {frame[name].iloc[row]!r} is not a positive number")
        frame[name] = values.astype(float)
    twice = frame.duplicated(["model", "format"])
    if twice.any():
        row = int(np.flatnonzero(twice.to_numpy())[0])
        raise ValueError(f"{path}, row {row + 2}: model {frame['model'].iloc[row]!r} with format "
                         f"{frame['format'].iloc[row]!r} is listed twice")  # fmt: skip
    return frame


def public_tables(directory: str | Path) -> list[str]:
    """The tables in `directory` (every `*.csv`, sorted), each read once so that a bad one stops the workflow while
    Snakemake builds its DAG, before any job runs (`read_public_table`'s one-line ValueError)."""
    paths = sorted(str(path) for path in Path(directory).glob("*.csv"))
    for path in paths:
        read_public_table(path)
    return paths


def measured_delta(table: pd.DataFrame) -> np.ndarray:
    """ln(perplexity / baseline perplexity): the loss gap in nats per token."""
    return np.log(table["perplexity"].to_numpy(float) / table["baseline_perplexity"].to_numpy(float))


def rounding_bound(table: pd.DataFrame) -> np.ndarray:
    """How far the published perplexities' rounding alone can move δ (both perplexities off by their rounding)."""
    rounding = table["perplexity_rounding"].to_numpy(float)
    return rounding / table["perplexity"].to_numpy(float) + rounding / table["baseline_perplexity"].to_numpy(float)


def law_predictions(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per table row, law of PUBLIC_LAWS and paper variant: the measured δ, its rounding bound and the
    law's prediction from the paper's constants."""
    frames = []
    for name, table in tables.items():
        measured = table.assign(table=name, measured_delta=measured_delta(table), rounding_bound=rounding_bound(table))
        for law_name, bits_input in PUBLIC_LAWS.items():
            law = LAWS[law_name]
            inputs = pd.DataFrame({"N": table["N"], "D": table["D"], bits_input: table["bits"]})
            for variant, params in law.paper_params.items():
                frames.append(
                    measured.assign(
                        law=law_name,
                        variant=variant,
                        source=params.source,
                        predicted_delta=np.asarray(law(params, inputs), float),
                    )  # fmt: skip
                )
    if not frames:
        return pd.DataFrame(columns=PREDICTION_COLUMNS)
    return pd.concat(frames, ignore_index=True)[PREDICTION_COLUMNS]


def beyond_rounding(predictions: pd.DataFrame) -> pd.Series:
    """The rows whose measured δ the published perplexities' rounding alone cannot account for."""
    return predictions["measured_delta"] > predictions["rounding_bound"]


def transfer(predictions: pd.DataFrame) -> pd.DataFrame:
    """Per table, law and variant: how many rows have a measured δ beyond its rounding bound, and over those the
    median of predicted / measured δ and the share predicted within a factor of two."""
    resolved = predictions[beyond_rounding(predictions)]
    ratio = resolved["predicted_delta"] / resolved["measured_delta"]
    grouped = resolved.assign(ratio=ratio, within_two=(ratio >= 0.5) & (ratio <= 2.0)).groupby(
        ["table", "law", "variant"], sort=False
    )
    summary = grouped.agg(n_resolved=("ratio", "size"), median_ratio=("ratio", "median"),
                          share_within_two=("within_two", "mean"))  # fmt: skip
    counts = predictions.groupby(["table", "law", "variant"], sort=False).size().rename("n_rows")
    return counts.to_frame().join(summary).reset_index()
