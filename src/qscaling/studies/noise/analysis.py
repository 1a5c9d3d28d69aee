"""The seed study's analysis: its table (one row per run: size, budget, precision, seed, loss and, for a quantized
run, δ against its fp32 partner of the same seed) and the noise model built from it (`results/fits/noise.json`)."""

import pandas as pd

from qscaling.noise import OWN_REPEATS, ClaimNoise, NoiseModel, delta_quantity, write_noise_models
from qscaling.studies.noise.grid import BRANCHED, FULL, STUDY
from qscaling.studies.noise.settings import NoiseSettings
from qscaling.studies.tables import partnered_table

LABELS = ["precision"]
DIVERGED_RULE = (
    "a run that diverged keeps its row with diverged = True and no loss (a partner that diverged leaves δ empty); "
    "the noise model and the figure read only the rows that trained, and say how many seeds each σ rests on"
)


def build_table(rows: pd.DataFrame, settings: NoiseSettings) -> pd.DataFrame:
    """One row per run: its held-out loss and, for the quantized precision, δ = its loss − its fp32 partner's,
    paired over the same windows (`delta_se`: that pairing's evaluation noise)."""
    table = partnered_table(rows, STUDY, ["precision"], LABELS, "precision", FULL)
    return table.sort_values(["N", "budget", "precision", "seed"]).reset_index(drop=True)


def claims(tables: dict, fits: dict, settings: NoiseSettings, noise: ClaimNoise = OWN_REPEATS) -> list[dict]:
    """None of its own: the study measures the noise every other study's claims are held to."""
    return []


def noise_models(table: pd.DataFrame) -> dict[str, NoiseModel]:
    """σ_seed per (size, budget) of the trained runs: "loss" of the fp32 runs' held-out loss, "delta" of the
    quantized runs' δ (a seed moves a run and its partner together; δ is what it moves apart), and where the study
    trains them "delta_branched" of the quantized runs branched from their partner's trunk after warmup."""
    trained = table[~table["diverged"]]
    full, quantized = trained[trained["precision"] == FULL], trained[trained["precision"] != FULL]
    branched = quantized["precision"].str.endswith(f" {BRANCHED}")
    models = {
        "loss": NoiseModel.from_frame(full, value="loss", quantity="held-out loss of an fp32 run", budget="budget"),
        delta_quantity(branched=False): _delta_model(quantized[~branched], ""),
    }
    if branched.any():
        models[delta_quantity(branched=True)] = _delta_model(
            quantized[branched], ", branched from its trunk after warmup"
        )
    return models


def _delta_model(quantized: pd.DataFrame, start: str) -> NoiseModel:
    label = quantized["precision"].iloc[0] if len(quantized) else "the quantized precision"
    quantity = f"δ of a {label} run against its fp32 partner{start}"
    return NoiseModel.from_frame(quantized, value="delta", quantity=quantity, budget="budget")


def noise_model_job(inputs: dict, outputs: dict, params: dict) -> None:
    write_noise_models(noise_models(pd.read_parquet(inputs["table"])), outputs["noise"])
