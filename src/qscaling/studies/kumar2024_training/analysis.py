"""The training-precision study's analysis: its tidy table and the PTQ-after-training table, the N_eff law on each
marginal sweep and on every point, the unified law per PTQ method, Table 1's comparison of functional forms and
the bootstrap distribution of the compute-optimal precision P*.

In the laws a full-precision tensor enters at FULL_BITS (fp32): f_x(32) ≈ 1 for any sensible γ_x, n_x; a checkpoint
scored as trained has P_post = inf.
"""

import math

import numpy as np
import pandas as pd

from qscaling.atomic import write_table
from qscaling.comparison import training_frame
from qscaling.laws import LAWS, try_fit
from qscaling.laws import kumar2024 as law
from qscaling.laws.table import constant_inputs, unidentifiable
from qscaling.noise import ClaimNoise, Sigma, cells_of, delta_quantity, own_repeats_sigma, repeats_by_cell
from qscaling.studies.kumar2024_training.grid import STUDY
from qscaling.studies.kumar2024_training.precision import FULL, FULL_BITS, JOINT, TENSOR_SPECS, varied_tensor
from qscaling.studies.kumar2024_training.settings import Kumar2024TrainingSettings
from qscaling.studies.tables import partnered_table, recipe_seed, trained

LAW = "kumar2024.neff"
MAIN_SWEEPS = ("", "w", "a", "kv", JOINT)  # the paper's setup (INT at its granularities): what the main fits read
LABELS = ["precision", "P_w", "P_a", "P_kv"]
DIVERGED_RULE = (
    "a point whose run diverged keeps its row with diverged = True and no loss (a partner that diverged leaves δ "
    "empty); fits, figures and claims read only the rows that trained"
)
MOST_BITS = law.SOLVER_CEILING  # the top of the range the P* solvers search
TABLE2 = LAWS[LAW].paper_params["table2"]
UNIFIED_LAW = "kumar2024.unified"
UNIFIED_PAPER = LAWS[UNIFIED_LAW].paper_params["table2_assumed_C"]
AS_TRAINED = "none"  # the method of a PTQ-table row scoring its checkpoint as trained (P_post = inf)


def collect_ptq_job(inputs: dict, outputs: dict, params: dict) -> None:
    """Every checkpoint's PTQ rows (those its scoring wrote: none for a point quantizing activations or the KV
    cache) in one sorted table."""
    frames = [frame for path in inputs["scored"] if not (frame := pd.read_parquet(path)).empty]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*LABELS, "method", "P_post"])
    write_table(ptq_table(table), outputs["ptq"])


def ptq_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The PTQ rows, sorted, with `P_train` (the weights' training bits, FULL_BITS for fp32): one row per
    (checkpoint, label, method, P_post), its as-trained row (`AS_TRAINED`, P_post = inf) included."""
    table = rows.assign(P_train=rows["P_w"])
    order = ["method", "P_train", "P_post", "N", "D", "seed"]
    return table.sort_values(order).reset_index(drop=True)


def build_table(rows: pd.DataFrame, settings: Kumar2024TrainingSettings) -> pd.DataFrame:
    """One row per checkpoint and precision (`partnered_table`): its loss and, for a quantized point, δ against its
    full-precision partner; `varied` the sweep the point belongs to (w, a, kv, joint; "" for a partner). Diverged
    runs keep a row (DIVERGED_RULE)."""
    table = partnered_table(rows, STUDY, ["precision"], LABELS, "precision", FULL)
    table["varied"] = table["precision"].map(varied_tensor)
    table["tokens_per_param"] = table["D"] / table["N"]
    return table.sort_values(["varied", "precision", "N", "D", "seed"]).reset_index(drop=True)


def recipe_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Every point that trained at the recipe's seed (seed repeats would weigh their point thrice), the
    ablations' (FP weights, other granularities) included."""
    rows = trained(table)
    return rows[rows["seed"] == recipe_seed(table)]


def law_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The points the main laws describe: `recipe_rows` of the paper's INT setup (MAIN_SWEEPS)."""
    rows = recipe_rows(table)
    return rows[rows["varied"].isin(MAIN_SWEEPS)]


def sweep_rows(rows: pd.DataFrame, varied: str) -> pd.DataFrame:
    """One sweep's quantized points (`varied`: w, a, kv or joint) and every full-precision partner, which pin the
    law's size and data terms."""
    return rows[rows["varied"].isin([varied, ""])]


# name: the sweep it is fitted on (None: every point of the main grid). neff_w_fp: Fig. 16's FP weight fit.
FITS = {"neff_w": "w", "neff_a": "a", "neff_kv": "kv", "neff_joint": None, "neff_w_fp": "w_fp"}


def fit_names(settings: Kumar2024TrainingSettings) -> list[str]:
    return [*FITS, *(f"unified_{method}" for method in settings.ptq.methods)]


def fit_laws(table: pd.DataFrame, settings: Kumar2024TrainingSettings, ptq: pd.DataFrame | None = None) -> dict:
    """The N_eff law on each marginal sweep and on every point, and the unified law per PTQ method on the PTQ
    table, with CIs from resampling runs and the error on each left-out size."""
    rows = recipe_rows(table)
    options = {"bootstrap": settings.bootstrap, "group_col": "N", "run_col": "run", "seed": 0}
    fits = {name: _fit_sweep(rows, varied, **options) for name, varied in FITS.items()}
    for method in settings.ptq.methods:
        fits[f"unified_{method}"] = fit_unified(unified_rows(ptq, method), **options)
    return fits


def unified_rows(ptq: pd.DataFrame | None, method: str) -> pd.DataFrame:
    """What the unified law is fitted on for one PTQ method: every checkpoint of the PTQ table at the recipe seed,
    as trained (P_post = inf) and post-quantized by `method`."""
    if ptq is None or ptq.empty:
        return pd.DataFrame(columns=[*LAWS[UNIFIED_LAW].inputs, "loss", "run", "method"])
    rows = ptq[ptq["method"].isin([method, AS_TRAINED])]
    return rows[rows["seed"] == recipe_seed(ptq)].reset_index(drop=True)


def fit_unified(rows: pd.DataFrame, **options):
    """The unified law on one method's rows, or why it cannot be fitted. A tensor the rows never quantize (P_x one
    value throughout) keeps Table 2's γ_x, n_x and the assumed C_x = 1: its factors are then constants."""
    unified = LAWS[UNIFIED_LAW]
    if not (rows["P_post"] < np.inf).any():
        return f"{UNIFIED_LAW}: no post-quantized checkpoint"
    constant = constant_inputs(unified, rows)
    held = set(unidentifiable(unified, constant)) | {f"C_{t}" for t in TENSOR_SPECS if f"P_{t}" in constant}
    fixed = {param: UNIFIED_PAPER[param] for param in sorted(held)}
    free = len(unified.params) - len(fixed)
    if len(rows) <= free:
        return f"{UNIFIED_LAW}: {len(rows)} points for {free} free parameters (an exact fit; need more)"
    return try_fit(UNIFIED_LAW, rows, fixed=fixed or None, **options)


def _fit_sweep(rows: pd.DataFrame, varied: str | None, **options):
    """The N_eff law on one sweep (`varied` None: every row), or why it cannot be fitted. γ_x and n_x of a tensor
    the rows never quantize are held at Table 2's values (the fit's notes say so): f_x(FULL_BITS) is then a
    constant factor the law's A absorbs."""
    selected = rows[rows["varied"].isin(MAIN_SWEEPS)] if varied is None else sweep_rows(rows, varied)
    if not (selected["varied"] != "").any():
        return f"{LAW}: no trained point quantizes {'any tensor' if varied is None else f'{varied} alone'}"
    fixed = {param: TABLE2[param] for param in unidentifiable(LAWS[LAW], constant_inputs(LAWS[LAW], selected))}
    free = len(LAWS[LAW].params) - len(fixed)
    if len(selected) <= free:
        # As many points as free parameters fit exactly, whatever the law: such a fit says nothing.
        return f"{LAW}: {len(selected)} points for {free} free parameters (an exact fit; need more)"
    return try_fit(LAW, selected, fixed=fixed or None, **options)


def fit_tables(table: pd.DataFrame, settings: Kumar2024TrainingSettings, ptq: pd.DataFrame | None = None) -> dict:
    return {"optimal_precision": optimal_precision_draws(table, settings.bootstrap), "forms": form_comparison(table)}


FORM_COLUMNS = ["form", "law", "paper_heldout_r2", "heldout_r2", "heldout_r2_delta", "r2", "points", "folds", "at_bound",
                "error"]  # fmt: skip


def form_comparison(table: pd.DataFrame) -> pd.DataFrame:
    """Table 1: each functional form of weight training precision fitted on the weight sweep and its partners, and
    its held-out R²: every (N, D) cell left out in turn, its points predicted by the form refitted on the others
    (started from the full fit), R² of those predictions pooled; `heldout_r2_delta` the same for the precision
    effect alone, δ = loss − the partner's loss, predicted as the form at P_w less the form at FULL_BITS (the size
    and data terms, which every form shares, dominate the loss's own spread). A form that cannot be fitted keeps
    its row, with the reason in `error`."""
    rows = sweep_rows(law_rows(table), "w").reset_index(drop=True)
    cells = sorted(set(zip(rows["N"], rows["D"])))
    forms = {"neff": LAWS[LAW], **law.FORMS}
    out = []
    for name, form in forms.items():
        record = {"form": name, "law": form.name, "paper_heldout_r2": law.PAPER_FORM_R2[name], "points": len(rows),
                  "folds": len(cells), "heldout_r2": math.nan, "r2": math.nan, "at_bound": "", "error": ""}  # fmt: skip
        # The N_eff law's γ_x, n_x of the activations and KV cache stay Table 2's: this sweep never quantizes them.
        fixed = (
            {param: TABLE2[param] for param in TABLE2 if param.endswith(("_a", "_kv"))} if form is LAWS[LAW] else None
        )
        full = try_fit(form.name, rows, fixed=fixed, bootstrap=0, group_col=None) if len(cells) >= 2 else "one cell"
        if isinstance(full, str):
            out.append({**record, "error": full})
            continue
        predicted, predicted_delta = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
        for cell in cells:
            held_out = (rows["N"] == cell[0]).to_numpy() & (rows["D"] == cell[1]).to_numpy()
            refit = try_fit(form.name, rows[~held_out], fixed=fixed, starts=[full.params], bootstrap=0, group_col=None)
            if not isinstance(refit, str):
                predicted[held_out] = refit.predict(rows[held_out])
                predicted_delta[held_out] = predicted[held_out] - refit.predict(rows[held_out].assign(P_w=FULL_BITS))
        quantized = (rows["varied"] != "").to_numpy()
        bound = [param for param in form.param_names if not full.held_fixed(param) and full.at_bound(param)]
        out.append({**record, "heldout_r2": _r_squared(rows["loss"], predicted), "r2": full.r2,
                    "heldout_r2_delta": _r_squared(rows["delta"][quantized], predicted_delta[quantized]),
                    "at_bound": ", ".join(bound)})  # fmt: skip
    return pd.DataFrame(out, columns=FORM_COLUMNS)


def _r_squared(measured, predicted) -> float:
    """1 − SSE/SST over the rows with a prediction (NaN where they do not vary)."""
    measured, predicted = np.asarray(measured, float), np.asarray(predicted, float)
    scored = np.isfinite(predicted) & np.isfinite(measured)
    spread = np.sum((measured[scored] - measured[scored].mean()) ** 2)
    return float(1 - np.sum((measured[scored] - predicted[scored]) ** 2) / spread) if spread > 0 else math.nan


def optimal_precision(params: dict, offsets: bool = True) -> float:
    """Compute-optimal precision P* (Sec. 4.3.1), NaN where the law's N_eff has no optimum below MOST_BITS."""
    return law.optimum_or_nan(law.compute_optimal_precision, params, offsets=offsets)


def optimal_precision_draws(table: pd.DataFrame, draws: int, seed: int = 0) -> pd.DataFrame:
    """P* with and without the offsets n_x of the joint fit refitted on each of `draws` resamples of its runs,
    started from the joint fit's optimum: P*'s bootstrap distribution (a Fit keeps per-parameter CIs only). A
    resample that cannot be fitted, or whose law has no P*, gives NaN. Empty without a joint fit. Each row carries
    the joint fit's `ill_conditioned`: refits started from an optimum the data do not pin down land anywhere along
    the directions they leave free."""
    columns = ["draw", "P_star", "P_star_no_offsets", "ill_conditioned"]
    rows = law_rows(table)
    joint = _fit_sweep(rows, None, bootstrap=0, group_col=None, seed=seed)
    if isinstance(joint, str):
        return pd.DataFrame(columns=columns)
    fixed = {name: joint.params[name] for name in joint.law.param_names if joint.held_fixed(name)}
    rng = np.random.default_rng(seed)
    out = []
    for draw in range(draws):
        sample = rows.iloc[rng.integers(0, len(rows), len(rows))]
        refit = try_fit(LAW, sample, starts=[joint.params], bootstrap=0, group_col=None, fixed=fixed or None)
        values = (math.nan, math.nan) if isinstance(refit, str) else (
            optimal_precision(refit.params), optimal_precision(refit.params, offsets=False)
        )  # fmt: skip
        out.append(dict(zip(columns, (draw, *values, joint.ill_conditioned))))
    return pd.DataFrame(out, columns=columns)


def seed_points(table: pd.DataFrame) -> pd.DataFrame:
    """Every seed of the repeated point (the one the recipe-seed-less points share), quantized, trained."""
    rows = trained(table)
    rows = rows[rows["precision"] != FULL]
    repeats = rows[rows["seed"] != recipe_seed(table)]
    if repeats.empty:
        return repeats
    point = repeats.iloc[0]
    return rows[(rows[["size", "budget", "precision"]] == point[["size", "budget", "precision"]]).all(axis=1)]


def seed_sigma(table: pd.DataFrame) -> Sigma | None:
    """σ_seed of δ from this study's own seed repeats (their MAD): what its figures draw. A point and its partner
    share their seed (initialisation and data order), so a seed moves both losses together; what it moves apart —
    the noise of a difference between two points' losses or δs — is δ."""
    return own_repeats_sigma(repeats_by_cell(seed_points(table)))


def seed_noise(table: pd.DataFrame, noise: ClaimNoise, branched: bool) -> Sigma | None:
    """σ_seed of δ that the claims are held to: the noise model's over the laws' cells (its largest), or the
    study's own repeats without a seed study (the model of branched runs' δ for a `branched` study)."""
    return noise.sigma(delta_quantity(branched), cells_of(law_rows(table)), repeats_by_cell(seed_points(table)))


def precision_cost(fit, rows: pd.DataFrame, *, paper: bool = False) -> float:
    """The largest loss the fitted law puts on quantization over the quantized points of `rows` (nats): each point's
    prediction less its prediction with every tensor at FULL_BITS. `paper`: with Kumar et al.'s precision constants
    (Table 2's γ_x, n_x) in place of the fitted ones, on this fit's loss surface: the cost the paper predicts here."""
    points = rows[rows["varied"] != ""]
    if points.empty:
        return math.nan
    params = dict(fit.params)
    if paper:
        params |= {name: TABLE2[name] for name in params if name.startswith(("gamma_", "n_")) and name in TABLE2}
    full = points.assign(**{f"P_{tensor}": FULL_BITS for tensor in TENSOR_SPECS})
    return float(np.max(fit.law(params, points) - fit.law(params, full)))


def law_points(table: pd.DataFrame, settings: Kumar2024TrainingSettings) -> dict:
    """Its INT-trained runs at the paper's granularities and their fp32 partners, as training points of the law
    comparison (`qscaling.comparison`); the FP and per-tensor ablations are left out (no law there reads them)."""
    rows = trained(table)
    rows = rows[rows["varied"].isin(["", *TENSOR_SPECS, JOINT])]
    bits = {role: rows[role].where(rows[role] < FULL_BITS, np.inf) for role in ("P_w", "P_a", "P_kv")}
    return {
        "training": training_frame(
            rows[["run", "N", "D", "loss", "delta"]].assign(
                study=STUDY, format=np.where(rows["precision"] == FULL, "none", "int"), **bits
            )
        )
    }
