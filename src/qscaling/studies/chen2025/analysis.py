"""Chen et al. 2025's analysis: the table of δs paired with their fp32 partners, the QAT law per precision and the
tables made with the fits (the W4A4 decomposition, the activation-to-weight ratio R); the claims are in `claims`.

The laws, fits and claims read the main grid only (`main_grid`): INT4, absmax, the recipe's LR.
"""

import math

import numpy as np
import pandas as pd

from qscaling.atomic import write_table
from qscaling.comparison import full_precision, training_frame
from qscaling.laws import chen2025 as law
from qscaling.laws import try_fit
from qscaling.laws.table import constant_inputs, unidentifiable
from qscaling.noise import ClaimNoise, Sigma, cells_of, delta_quantity, noise_floor, own_repeats_sigma, repeats_by_cell
from qscaling.stats import standard_error
from qscaling.studies.chen2025.grid import ABSMAX, CHANNEL, FP, FULL, INT, STUDY
from qscaling.studies.chen2025.settings import Chen2025Settings
from qscaling.studies.tables import PARTNER_KEYS, split_diverged

KEYS = [*PARTNER_KEYS, "lr_scale"]  # a QAT point and its full-precision partner share these
LAW_INPUTS = ("N", "D", "G")


def main_grid(table: pd.DataFrame) -> pd.Series:
    """The rows the law describes: INT4, absmax, the recipe's LR, trained without diverging (full-precision
    partners pass at the recipe's LR)."""
    trained = ~table["diverged"] if "diverged" in table else True
    own_format = table["format"].isin([INT, ""]) & table["quantizer"].isin([ABSMAX, ""])
    return own_format & (table["lr_scale"] == 1.0) & trained


def collect_activations_job(inputs: dict, outputs: dict, params: dict) -> None:
    """`chen2025_activations` (`grid.jobs`): every checkpoint's Linear-input statistics in one sorted table."""
    frames = [pd.read_parquet(path) for path in inputs["scored"]]
    table = pd.concat(frames, ignore_index=True).sort_values(["precision", "N", "D", "G", "seed", "block", "role"])
    write_table(table.reset_index(drop=True), outputs["activations"])


VARIANT = ["precision", "format", "quantizer", "G"]  # with KEYS, what tells one QAT point from another
DIVERGED_RULE = (
    "a QAT point whose run, or whose full-precision partner, diverged keeps its row with diverged = True and no δ; "
    "fits, fit tables, figures and claims read only the other rows"
)


def build_table(rows: pd.DataFrame, settings: Chen2025Settings) -> pd.DataFrame:
    """One row per QAT checkpoint: its loss, its partner's, and δ paired over windows with its standard error.
    `budget` is the token budget the point was planned at (the config's), D the tokens it saw (whole steps).
    Points lost to a diverged run are kept as rows with `diverged` True (DIVERGED_RULE)."""
    rows, diverged = split_diverged(rows)
    per_window = rows.drop_duplicates(["run", "window", *VARIANT])
    full = per_window[per_window["precision"] == FULL][[*KEYS, "window", "loss", "run"]]
    qat = per_window[per_window["precision"] != FULL]
    paired = qat.merge(full, on=[*KEYS, "window"], suffixes=("", "_base"), validate="many_to_one")
    paired["difference"] = paired["loss"] - paired["loss_base"]
    groups = paired.groupby([*KEYS, "milestone", *VARIANT, "granularity", "run", "run_base"], sort=False)
    table = (
        groups.agg(
            loss=("loss", "mean"),
            loss_se=("loss", standard_error),
            base_loss=("loss_base", "mean"),
            delta=("difference", "mean"),
            delta_se=("difference", standard_error),
            windows=("window", "size"),
        )
        .reset_index()
        .rename(columns={"milestone": "budget"})
    )
    diverged_partners = diverged[diverged["precision"] == FULL]
    partnered = set(map(tuple, full[KEYS].to_numpy())) | set(map(tuple, diverged_partners[KEYS].to_numpy()))
    missing = set(map(tuple, qat[KEYS].drop_duplicates().to_numpy())) - partnered
    if missing:
        raise ValueError(f"{STUDY}: QAT points without a full-precision partner: {sorted(missing)}")
    lost = _diverged_points(qat, diverged, diverged_partners)
    table = pd.concat([table.assign(diverged=False, diverged_reason=""), lost], ignore_index=True)
    table["tokens_per_param"] = table["D"] / table["N"]
    return table.sort_values(["precision", "format", "quantizer", "lr_scale", "N", "D", "G", "seed"]).reset_index(
        drop=True
    )


def _diverged_points(qat: pd.DataFrame, diverged: pd.DataFrame, diverged_partners: pd.DataFrame) -> pd.DataFrame:
    """The QAT points a diverged run took out: those that diverged, and those whose partner did."""
    columns = [*KEYS, "milestone", *VARIANT, "granularity", "run"]
    if diverged.empty:
        return pd.DataFrame(columns=[*columns, "diverged", "diverged_reason"]).rename(columns={"milestone": "budget"})
    own = diverged[diverged["precision"] != FULL][[*columns, "diverged_reason"]]
    points = qat.drop_duplicates([*KEYS, *VARIANT])[columns]
    partners = diverged_partners[[*KEYS, "run", "diverged_reason"]].rename(columns={"run": "run_base"})
    orphaned = points.merge(partners, on=KEYS)
    orphaned["diverged_reason"] = "its full-precision partner " + orphaned["run_base"] + " diverged"
    lost = pd.concat([own, orphaned], ignore_index=True).assign(diverged=True)
    return lost.rename(columns={"milestone": "budget"})


def seed_points(table: pd.DataFrame, settings: Chen2025Settings) -> pd.DataFrame:
    """The main grid's rows of the point `seeds` repeats, one per seed."""
    repeats = settings.seeds
    table = table[main_grid(table)]
    rows = table[
        (table["size"] == repeats.size)
        & (table["budget"] == repeats.budget)
        & (table["precision"] == repeats.precision)
    ]
    return rows[rows["granularity"].eq(CHANNEL) if repeats.group == CHANNEL else rows["G"].eq(repeats.group)]


def seed_sigma(table: pd.DataFrame, settings: Chen2025Settings) -> Sigma | None:
    """σ_seed of δ from this study's own seed repeats (their MAD): what its figures draw."""
    return own_repeats_sigma(repeats_by_cell(seed_points(table, settings)))


def seed_noise(table: pd.DataFrame, settings: Chen2025Settings, noise: ClaimNoise) -> Sigma | None:
    """σ_seed of δ that the claims are held to: the noise model's over the main grid's cells (its largest), or the
    study's own repeats without a seed study (the model of branched runs' δ for a `branched` study)."""
    cells, repeats = cells_of(table[main_grid(table)]), repeats_by_cell(seed_points(table, settings))
    return noise.sigma(delta_quantity(settings.branched), cells, repeats)


def grid_rows(table: pd.DataFrame, settings: Chen2025Settings, precision: str) -> pd.DataFrame:
    """The recipe-seed points of one precision that trained (seed repeats would weigh their point thrice)."""
    seed = settings.training.seed
    return table[(table["precision"] == precision) & (table["seed"] == seed) & main_grid(table)]


# Chen et al.'s Tables 2 and 4 weigh the law against reduced ones on W4A4 and W4A16: each variant holds the
# named exponents at 0 (without D: γ_D; N only: γ_D and γ_G, so δ = k / N^γ_N).
REDUCED_LAWS = {"no_D": ("gamma_D",), "N_only": ("gamma_D", "gamma_G")}
REDUCED_PRECISIONS = ("W4A4", "W4A16")


def fit_plan(settings: Chen2025Settings) -> dict[str, tuple[str, tuple[str, ...]]]:
    """{fit name: (precision, exponents held at 0)}: `qat` is W4A4 (the figures' and Table 1's first row),
    `qat_<precision>` the others, `<that name>_no_D` / `_N_only` the reduced laws of REDUCED_PRECISIONS."""
    present = list(dict.fromkeys(name for cell in settings.cells for name in cell.precisions))
    plan = {fit_name(name): (name, ()) for name in present}
    for name in (name for name in REDUCED_PRECISIONS if name in present):
        plan.update({fit_name(name, variant): (name, zeros) for variant, zeros in REDUCED_LAWS.items()})
    return plan


def fit_names(settings: Chen2025Settings) -> list[str]:
    return list(fit_plan(settings))


def fit_name(precision: str, reduced: str | None = None) -> str:
    """The fit of `precision`'s law, or of its `reduced` form (a key of REDUCED_LAWS)."""
    name = "qat" if precision == "W4A4" else f"qat_{precision}"
    return f"{name}_{reduced}" if reduced else name


def fit_laws(table: pd.DataFrame, settings: Chen2025Settings) -> dict:
    """δ_p(N, D, G) per precision, on every δ (negative ones too: the law is fitted on linear residuals); CIs from
    resampling runs, held-out error leaving out each N.
    An exponent whose input the grid holds constant (one G for a precision) is held at that precision's Table 1
    value (the fit's notes say so)."""
    fits = {}
    for name, (precision, zeros) in fit_plan(settings).items():
        rows = grid_rows(table, settings, precision).dropna(subset=["delta"])
        if rows.empty:
            fits[name] = f"chen2025.qat: no {precision} point"
            continue
        paper = law.QAT.paper_params[precision]
        fixed = {param: paper[param] for param in unidentifiable(law.QAT, constant_inputs(law.QAT, rows))}
        fixed.update(dict.fromkeys(zeros, 0.0))
        options = {"bootstrap": settings.bootstrap, "group_col": "N", "run_col": "run", "seed": 0}
        fits[name] = try_fit("chen2025.qat", rows, fixed=fixed or None, **options)
    return fits


def fit_tables(table: pd.DataFrame, settings: Chen2025Settings) -> dict:
    """The tables made from the δs the fits read: the W4A4 decomposition and the ratio R."""
    return {"decomposition": decomposition(table, settings), "ratio": activation_weight_ratio(table, settings)}


def decomposition(table: pd.DataFrame, settings: Chen2025Settings) -> pd.DataFrame:
    """δ_W4A4 beside δ_W4A16 + δ_W16A4 at each (N, D, G) all three share (Fig. 6)."""
    index = ["N", "D", "G"]
    parts = [
        grid_rows(table, settings, name)[[*index, "delta", "delta_se"]].rename(
            columns={"delta": name, "delta_se": f"{name}_se"}
        )
        for name in ("W4A4", "W4A16", "W16A4")
    ]
    joined = parts[0].merge(parts[1], on=index).merge(parts[2], on=index)
    return pd.DataFrame(
        {
            **{name: joined[name] for name in index},
            "delta_W4A4": joined["W4A4"],
            "delta_W4A4_se": joined["W4A4_se"],
            "delta_sum": joined["W4A16"] + joined["W16A4"],
            "delta_sum_se": np.hypot(joined["W4A16_se"], joined["W16A4_se"]),
        }
    ).sort_values(index, ignore_index=True)


def decomposition_slope(frame: pd.DataFrame, bootstrap: int, seed: int = 0) -> tuple[float, float, float]:
    """c in δ_W4A4 = c · (δ_W4A16 + δ_W16A4): least squares through the origin, percentile CI over points."""

    def slope(rows):
        x, y = rows["delta_sum"].to_numpy(float), rows["delta_W4A4"].to_numpy(float)
        return float(x @ y / (x @ x)) if x @ x > 0 else math.nan

    return _with_percentile_ci(frame, slope, bootstrap, seed)


def _with_percentile_ci(frame: pd.DataFrame, statistic, bootstrap: int, seed: int) -> tuple[float, float, float]:
    """`statistic(frame)` and its 95 % percentile CI over `bootstrap` resamples of the frame's rows."""
    rng = np.random.default_rng(seed)
    draws = [statistic(frame.iloc[rng.integers(0, len(frame), len(frame))]) for _ in range(bootstrap)]
    with np.errstate(all="ignore"):
        low, high = np.nanpercentile(draws, [2.5, 97.5]) if draws else (math.nan, math.nan)
    return statistic(frame), float(low), float(high)


RATIO_VARIANTS = {"plain": "W16A4", "FC2 8-bit": "W16A4_FC2_8bit"}


def activation_weight_ratio(
    table: pd.DataFrame, settings: Chen2025Settings, sigma: Sigma | None = None
) -> pd.DataFrame:
    """R = δ_W16A4 / δ_W4A16 at each (N, D, G) where both trained at the recipe seed, plain and with the FC2
    input at 8 bits in the activation-only run (Fig. 8; W4A16 quantizes no activation, so it has one variant).
    `R_se` propagates the two δs' evaluation SEs; `clear_of_seed_noise`: both δs exceed the 95 % t-floor of
    σ_seed (`sigma`; by default the study's own repeats'), so R is not a ratio of between-run noise (which R_se
    leaves out)."""
    index = ["N", "D", "G"]
    rows = table[(table["seed"] == settings.training.seed) & main_grid(table)]

    def deltas(precision):
        return rows[rows["precision"] == precision].set_index(index)[["delta", "delta_se"]]

    frames = [
        deltas(activations)
        .merge(deltas("W4A16"), left_index=True, right_index=True, suffixes=("_activations", "_weights"))
        .reset_index()
        .assign(variant=variant)
        for variant, activations in RATIO_VARIANTS.items()
    ]
    ratios = pd.concat(frames, ignore_index=True)
    ratios["tokens_per_param"] = ratios["D"] / ratios["N"]
    ratios["R"] = ratios["delta_activations"] / ratios["delta_weights"]
    relative = np.hypot(
        ratios["delta_se_activations"] / ratios["delta_activations"],
        ratios["delta_se_weights"] / ratios["delta_weights"],
    )
    ratios["R_se"] = ratios["R"].abs() * relative  # first-order, from the paired evaluation SEs only
    sigma = seed_sigma(table, settings) if sigma is None else sigma
    floor = noise_floor(sigma) if sigma is not None else math.nan
    ratios["sigma_seed"] = sigma.value if sigma is not None else math.nan
    ratios["clear_of_seed_noise"] = (ratios["delta_activations"] > floor) & (ratios["delta_weights"] > floor)
    return ratios.sort_values(["variant", "G", "N", "D"], ignore_index=True)


def ratio_trend(ratios: pd.DataFrame, bootstrap: int, seed: int = 0) -> tuple[float, float, float]:
    """Slope of log R on log(D/N) by least squares, with its percentile CI over points (R > 0 only)."""

    def slope(rows):
        x, y = np.log(rows["tokens_per_param"].to_numpy(float)), np.log(rows["R"].to_numpy(float))
        return float(np.polyfit(x, y, 1)[0]) if np.ptp(x) > 0 else math.nan

    return _with_percentile_ci(ratios, slope, bootstrap, seed)


# Chen et al.'s precisions as the bits of weights and activations (inf: kept in full precision).
PRECISION_BITS = {"W4A4": (4, 4), "W4A16": (4, np.inf), "W16A4": (np.inf, 4)}


def law_points(table: pd.DataFrame, settings: Chen2025Settings) -> dict:
    """Its QAT runs at the recipe's LR with the absmax quantizer, and their fp32 partners, as training points of
    the law comparison (`qscaling.comparison`); FP4 runs carry E2M1 with the group as block."""
    rows = table[~table["diverged"].astype(bool) & (table["lr_scale"] == 1.0) & (table["quantizer"] == ABSMAX)]
    rows = rows[rows["precision"].isin(list(PRECISION_BITS))]
    weights, activations = zip(*rows["precision"].map(PRECISION_BITS)) if len(rows) else ((), ())
    fp = rows["format"] == FP
    quantized = rows[["run", "N", "D", "loss", "G", "delta"]].assign(
        study=STUDY, format=rows["format"], P_w=list(weights), P_a=list(activations), P_kv=np.inf,
        E=np.where(fp, 2.0, np.nan), M=np.where(fp, 1.0, np.nan), B=rows["G"].where(fp),
    )  # fmt: skip
    partners = rows[["run_base", "N", "D", "base_loss"]].rename(columns={"run_base": "run", "base_loss": "loss"})
    return {"training": pd.concat([training_frame(quantized), full_precision(partners, STUDY)], ignore_index=True)}
