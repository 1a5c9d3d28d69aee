"""Kumar et al. 2024 figures of the training-precision study (targets `kumar2024_<name>`): they read the
kumar2024_training table (`tables["evals"]`: one row per checkpoint and precision), its PTQ-after-training table and
its fits. The paper's A, B, E belong to 30M–220M models on Dolma, so its constants enter only as γ_x, n_x beside
this run's size and data terms, labelled as such. This module holds what the figure modules share: `sweeps` (the
N_eff law on each sweep, Table 1), `compute` (compute-optimal and compute-matched precision), `ptq` (PTQ after
training) and `ablations` (granularity and FP weights)."""

import math

import numpy as np
import pandas as pd

from qscaling.figures import interval_text
from qscaling.figures.caveats import seed_band_note
from qscaling.studies.kumar2024_training.analysis import seed_sigma
from qscaling.studies.kumar2024_training.grid import STUDY
from qscaling.studies.kumar2024_training.precision import FULL, FULL_BITS, TENSOR_SPECS

STUDY_TABLES = {"evals": STUDY}
BITS = np.linspace(2, 12, 200)  # Fig. 3's range of training precisions (the paper's runs span 3–12 bits)
# What an empty table's selection holds: the columns the figures read.
EMPTY_COLUMNS = ["varied", "N", "D", "budget", "loss", "P_w", "P_a", "P_kv", "precision", "loss_se"]


def point_seed_sd(tables) -> float:
    """Each trained point's share of the between-run noise: σ_seed of δ from the study's own seed repeats
    (`analysis.seed_sigma`, their MAD) is the noise of a difference between two points at one seed, σ_seed/√2 per
    point. NaN where the table or its seed repeats are missing."""
    table = tables.get("evals")
    sigma = seed_sigma(table) if table is not None and len(table) else None
    return sigma.value / math.sqrt(2) if sigma is not None else math.nan


SEED_SOURCE = "σ_seed/√2 per point, σ_seed being the MAD over this study's seed repeats of δ, a difference of two runs"


def noise_note(tables) -> str:
    return f"Error bars: ± 2 s.e. over held-out windows; {seed_band_note(point_seed_sd(tables), SEED_SOURCE)}"


def fit_text(fit, tensor: str) -> str:
    """γ_x and n_x of a tensor with their CIs and the fit's R², for a footer."""
    if fit is None:
        return "no fit"
    gamma, offset = f"gamma_{tensor}", f"n_{tensor}"
    return (
        f"γ_{tensor} {fit.params[gamma]:.3g} {interval_text(fit, gamma)}, n_{tensor} {fit.params[offset]:.3g} "
        f"{interval_text(fit, offset)}; R² {fit.r2:.3f}"
    )


def law_inputs(N, D, column: str, bits) -> dict:
    """The N_eff law's inputs along a sweep of one tensor's precision (`column`: P_w, P_a or P_kv) through `bits`,
    the other tensors in fp32 (FULL_BITS); N and D a number or an array as long as `bits`."""
    bits = np.asarray(bits, dtype=float)
    at = {"N": np.broadcast_to(np.asarray(N, dtype=float), bits.shape), "D": np.full_like(bits, D)}
    return at | {f"P_{tensor}": np.full_like(bits, FULL_BITS) for tensor in TENSOR_SPECS} | {column: bits}


def selected_rows(tables, select) -> pd.DataFrame:
    """The rows `select` (`analysis.law_rows` or `analysis.recipe_rows`) takes from the study's table, none where
    the table is missing or empty."""
    table = tables.get("evals")
    if table is None or table.empty:
        return pd.DataFrame(columns=EMPTY_COLUMNS)
    return select(table)


def partner_line(ax, rows, N, D, colour="0.4") -> None:
    partner = rows[(rows["N"] == N) & (rows["D"] == D) & (rows["varied"] == "")]
    if not partner.empty:
        ax.axhline(partner["loss"].iloc[0], color=colour, ls=":", lw=0.8, label=f"{FULL} partner")
