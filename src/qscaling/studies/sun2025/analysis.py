"""Sun et al. 2025's analysis: the tidy table (δ of each point against its partner), the rows each law reads, the
fits, the block-size slopes (Fig. 11), the effective block of tensor-wise scaling (Fig. 12), and the seed repeats
and GEMM-input points the claims and figures compare.

In the laws a channel-wise point has B = d_model (the row length of the QKV, O and FC1 inputs; FC2's is d_ff),
and full-precision partners enter the Capybara law as E8M23 (its precision term is then negligible) so that they
anchor the size and data terms. Tensor-wise points are left out of the fits: their effective block size is
solved from the block-size law instead (Fig. 12), as the paper does.
"""

import numpy as np
import pandas as pd

from qscaling.comparison import training_frame
from qscaling.laws import LAWS, try_fit
from qscaling.laws import sun2025 as law
from qscaling.laws.table import constant_inputs, unidentifiable
from qscaling.noise import ClaimNoise, Sigma, cells_of, delta_quantity, own_repeats_sigma, repeats_by_cell
from qscaling.studies.sun2025.grid import CHANNEL, FIT, FULL, GEMM_INPUTS, LAW_INPUTS, STUDY, TENSOR
from qscaling.studies.sun2025.settings import Sun2025Settings
from qscaling.studies.tables import partnered_table, recipe_seed, trained

VARIANT = ["format", "block", "inputs", "split"]  # with PARTNER_KEYS, what tells one point from another
LABELS = ["format", "E", "M", "block", "B", "inputs", "split"]
DIVERGED_RULE = (
    "a point whose run diverged keeps its row with diverged = True and no loss (a partner that diverged leaves δ "
    "empty); fits, figures and claims read only the rows that trained"
)
KUMAR_FORM_OTHER_BITS = 16  # Kumar et al.'s P_a and P_kv for Sun et al.'s runs, which keep A and KV in BF16


def build_table(rows: pd.DataFrame, settings: Sun2025Settings) -> pd.DataFrame:
    """One row per checkpoint and variant (`partnered_table`): its loss and, for a quantized point, δ against its
    full-precision partner. Diverged runs keep a row (DIVERGED_RULE)."""
    table = partnered_table(rows, STUDY, VARIANT, LABELS, "format", FULL)
    table["bits"] = table["E"] + table["M"] + 1
    table["tokens_per_param"] = table["D"] / table["N"]
    order = ["split", "inputs", "format", "block", "N", "D", "seed"]
    return table.sort_values(order).reset_index(drop=True)


def law_rows(table: pd.DataFrame, split: str = FIT) -> pd.DataFrame:
    """The points the laws describe: P2+P4+P6 quantized (and their partners), block or channel scaling, the
    recipe's seed (seed repeats would weigh their point thrice), trained."""
    rows = trained(table)
    rows = rows[(rows["split"] == split) & (rows["seed"] == recipe_seed(table))]
    return rows[rows["inputs"].isin([LAW_INPUTS, ""]) & (rows["block"] != TENSOR)]


def quantized_rows(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["format"] != FULL]


def kumar_form_inputs(rows: pd.DataFrame) -> pd.DataFrame:
    """Kumar et al.'s N_eff law reads a run by its weight bits alone: P_w = E + M + 1 (32 for fp32)."""
    return rows.assign(
        P_w=rows["bits"].astype(float), P_a=float(KUMAR_FORM_OTHER_BITS), P_kv=float(KUMAR_FORM_OTHER_BITS)
    )


def _channel_sweep(rows: pd.DataFrame, **held) -> pd.DataFrame:
    """Quantized channel-wise points with the named bits held (M = 1 for the exponent sweep, E = 1 for mantissa)."""
    points = quantized_rows(rows)
    keep = points["block"] == CHANNEL
    for column, value in held.items():
        keep &= points[column] == value
    return points[keep]


def _e1m1_blocks(rows: pd.DataFrame) -> pd.DataFrame:
    points = quantized_rows(rows)
    return points[(points["E"] == 1) & (points["M"] == 1)]


# name: (law, the law rows it is fitted on).
FITS = {
    "capybara": ("sun2025.capybara", lambda rows: rows),
    "kumar_form": ("kumar2024.neff", kumar_form_inputs),
    "exponent": ("sun2025.exponent", lambda rows: _channel_sweep(rows, M=1)),
    "mantissa": ("sun2025.mantissa", lambda rows: _channel_sweep(rows, E=1)),
    "block": ("sun2025.block", _e1m1_blocks),
    "bf16_chinchilla": ("chinchilla", lambda rows: rows[rows["format"] == FULL]),
    "bf16_kaplan": ("kaplan", lambda rows: rows[rows["format"] == FULL]),
}


def fit_names(settings: Sun2025Settings) -> list[str]:
    return list(FITS)


def fit_laws(table: pd.DataFrame, settings: Sun2025Settings) -> dict:
    """Every law on its rows of the grid, with CIs from resampling runs and the error on each left-out size.
    A parameter only an input the rows hold constant could pin (one mantissa width in the exponent sweep, …) is
    held at the law's paper value, and the fit's notes say so."""
    rows = law_rows(table)
    fits = {}
    for name, (law_name, select) in FITS.items():
        selected = select(rows)
        paper = next(iter(LAWS[law_name].paper_params.values()))
        fixed = {
            param: paper[param] for param in unidentifiable(LAWS[law_name], constant_inputs(LAWS[law_name], selected))
        }
        free = len(LAWS[law_name].params) - len(fixed)
        if len(selected) <= free:
            # As many points as free parameters fit exactly, whatever the law: such a fit says nothing.
            fits[name] = f"{law_name}: {len(selected)} points for {free} free parameters (an exact fit; need more)"
            continue
        options = {"bootstrap": settings.bootstrap, "group_col": "N", "run_col": "run", "seed": 0}
        fits[name] = try_fit(law_name, selected, fixed=fixed or None, **options)
    return fits


def fit_tables(table: pd.DataFrame, settings: Sun2025Settings) -> dict:
    return {"block_slopes": block_slopes(table)}


def block_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The block-size sweep: E1M1 points at every block, channel and tensor scaling, recipe seed, trained."""
    rows = trained(table)
    rows = rows[(rows["split"] == FIT) & (rows["seed"] == recipe_seed(table)) & (rows["inputs"] == LAW_INPUTS)]
    return rows[(rows["E"] == 1) & (rows["M"] == 1)]


def block_slopes(table: pd.DataFrame) -> pd.DataFrame:
    """Per (N, D) with ≥ 3 block sizes: the least-squares slope of loss on log2 B (Fig. 11's κ), its standard error
    and the range of log2 B it spans. The slope is taken of δ, which is the loss less one shared partner's, so it
    is the loss's slope with the paired (far smaller) evaluation error."""
    rows = block_rows(table)
    rows = rows[rows["B"].notna()]
    out = []
    for (N, D), group in rows.groupby(["N", "D"]):
        if group["B"].nunique() < 3:
            continue
        x = np.log2(group["B"].to_numpy(float))
        weights = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
        out.append(
            {
                "N": N,
                "D": D,
                "tokens_per_param": D / N,
                "slope": float(weights @ group["delta"].to_numpy(float)),
                "slope_se": float(np.sqrt((weights**2) @ group["delta_se"].to_numpy(float) ** 2)),
                "points": len(group),
                "log2_B_span": float(np.ptp(x)),
            }
        )
    return pd.DataFrame(out, columns=["N", "D", "tokens_per_param", "slope", "slope_se", "points", "log2_B_span"])


def effective_tensor_block(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """The tensor-wise points with the log2 B that the block-size law (`params`: a sun2025.block parameter set)
    needs to give each its loss (Fig. 12): (L − base) · γ_B · N^α / D^β, NaN where the loss is below the law's
    base; `channel_B` is the same size's channel-wise B (its d_model), for comparison."""
    rows = block_rows(table)
    rows = rows[rows["block"] == TENSOR].copy()
    channel = table[table["block"] == CHANNEL].groupby("size")["B"].first()
    rows["channel_B"] = rows["size"].map(channel)
    x = {"N": rows["N"].to_numpy(float), "D": rows["D"].to_numpy(float)}
    excess = rows["loss"].to_numpy(float) - law.data_size_terms(params, x)
    with np.errstate(invalid="ignore", divide="ignore"):
        log2_B = excess * params["gamma_B"] / law.precision_weight(params, x)
    rows["log2_B_effective"] = np.where(excess > 0, log2_B, np.nan)
    return rows


def _point_rows(rows: pd.DataFrame, point: pd.Series) -> pd.DataFrame:
    keep = np.ones(len(rows), bool)
    for column in ("size", "budget", "format", "block"):
        keep &= (rows[column] == point[column]).to_numpy()
    return rows[keep]


def seed_points(table: pd.DataFrame) -> pd.DataFrame:
    """Every seed of the repeated point (the one the recipe-seed-less points share), P2+P4+P6, trained."""
    rows = trained(table)
    rows = rows[(rows["split"] == FIT) & (rows["inputs"] == LAW_INPUTS)]
    repeats = rows[rows["seed"] != recipe_seed(table)]
    return _point_rows(rows, repeats.iloc[0]) if len(repeats) else repeats


def seed_sigma(table: pd.DataFrame) -> Sigma | None:
    """σ_seed of δ from this study's own seed repeats (their MAD): what its figures draw. A point and its partner
    share their seed (initialisation and data order), and so do all points at the recipe seed, so a seed moves
    their losses together; what it moves apart — the noise of a difference between two points' losses or δs — is
    δ."""
    return own_repeats_sigma(repeats_by_cell(seed_points(table)))


def seed_noise(table: pd.DataFrame, noise: ClaimNoise, branched: bool) -> Sigma | None:
    """σ_seed of δ that the claims are held to: the noise model's over the law's cells (its largest), or the
    study's own repeats without a seed study (the model of branched runs' δ for a `branched` study)."""
    return noise.sigma(delta_quantity(branched), cells_of(law_rows(table)), repeats_by_cell(seed_points(table)))


def gemm_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Fig. 2's points by their inputs (P1…P6 and the law's set P2+P4+P6) at the one point they share."""
    rows = trained(table)
    rows = rows[(rows["split"] == FIT) & (rows["seed"] == recipe_seed(table))]
    alone = rows[rows["inputs"].isin(list(GEMM_INPUTS))]
    if alone.empty:
        return alone.set_index("inputs")
    point = _point_rows(rows[rows["format"] != FULL], alone.iloc[0])
    return point[point["inputs"].isin([*GEMM_INPUTS, LAW_INPUTS])].set_index("inputs")


def law_points(table: pd.DataFrame, settings: Sun2025Settings) -> dict:
    """Its runs that quantize the law's GEMM inputs (and their fp32 partners) as training points of the law
    comparison (`qscaling.comparison`): FP format E, M and block size B (none for a per-tensor scale)."""
    rows = trained(table)
    rows = rows[(rows["format"] == FULL) | (rows["inputs"] == LAW_INPUTS)]
    full = rows["format"] == FULL
    bits = (1 + rows["E"] + rows["M"]).where(~full, np.inf).astype(float)
    return {
        "training": training_frame(
            rows[["run", "N", "D", "loss", "delta"]].assign(
                study=STUDY,
                format=np.where(full, "none", "fp"),
                P_w=bits,
                P_a=bits,
                P_kv=np.inf,
                E=rows["E"].where(~full),
                M=rows["M"].where(~full),
                B=rows["B"].where(~full),
            )
        )
    }
