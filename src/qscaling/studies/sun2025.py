"""Sun et al. 2025, "Scaling Laws for Floating-Point Quantization Training": loss of FP-quantized training.

Grid (`cells`): each cell trains every listed FP format ExMy × size × block at every budget, from scratch, with
the paper's scaling-law targets fake-quantized: forward W, backward W (in dX = dY·W) and backward X (in
dW = dYᵀ·X) — "P2, P4, P6". IEEE-like ExMy with subnormals, round to nearest even, saturation; one fp32 scale
FP_max / max|block| per B consecutive elements along the input dimension (`channel`: one per row, B = its length;
`tensor`: one per tensor). Every point is a WSD cooldown branch of its (size, format, block) trunk and has a
full-precision (fp32, the papers' BF16 baseline) partner at the same (size, budget, seed): the ladder's own run.

Besides the grid: `validation` sizes are trained like the grid but left out of every fit, to test its
extrapolation (Fig. 4); `gemm_inputs` trains one point with each of the six GEMM inputs P1…P6 quantized alone
(Fig. 2); `seeds` repeats one point with more seeds, whose spread σ_seed of the loss is the noise floor of any
comparison between separately trained runs.

In the laws a channel-wise point has B = d_model (the row length of the QKV, O and FC1 inputs; FC2's is d_ff),
and full-precision partners enter the Capybara law as E8M23 (its precision term is then negligible) so that they
anchor the size and data terms. Tensor-wise points are left out of the fits: their effective block size is
solved from the block-size law instead (Fig. 12), as the paper does.
"""

import itertools
import math
import re

import numpy as np
import pandas as pd

from qscaling.config import ConfigError, check_sizes
from qscaling.laws import LAWS
from qscaling.laws import sun2025 as law
from qscaling.studies import (
    Evaluation,
    PartneredPoint,
    as_trained_scoring,
    label,
    partnered_evaluations,
    partnered_table,
    recipe_seed,
    trained,
    try_fit,
)
from qscaling.studies.claims import (
    COVERS_PAPER,
    EXCLUDES_PAPER,
    INCONCLUSIVE,
    NOISE_SIGMAS,
    claim,
    floored_by_seed_noise,
    magnitude_from_interval,
    pooled_slope,
)

STUDY = "sun2025"
FULL = "fp32"  # the format label of every full-precision partner
FULL_E, FULL_M = 8, 23  # fp32's exponent and mantissa bits, as the Capybara law reads a partner
CHANNEL, TENSOR = "channel", "tensor"
FORMAT_PATTERN = re.compile(r"e(\d+)m(\d+)")
# The six GEMM inputs of a Linear (Sun et al.'s Fig. 2) as training-precision fields: forward X and W; dY and W
# of dX = dY·W; dY and X of dW = dYᵀ·X.
GEMM_INPUTS = {
    "P1": ("activations", None),
    "P2": ("weights", None),
    "P3": ("backward_grad_output", "dx"),
    "P4": ("backward_weight", None),
    "P5": ("backward_grad_output", "dw"),
    "P6": ("backward_activation", None),
}
LAW_INPUTS = "P2+P4+P6"  # what the scaling-law runs quantize
WEIGHT_FIELDS = ("weights", "backward_weight")  # quantized per output row along the input dim; the rest per token
FIT, VALIDATION = "fit", "validation"
VARIANT = ["format", "block", "inputs", "split"]  # with PARTNER_KEYS, what tells one point from another
LABELS = ["format", "E", "M", "block", "B", "inputs", "split"]
DIVERGED_RULE = (
    "a point whose run diverged keeps its row with diverged = True and no loss (a partner that diverged leaves δ "
    "empty); fits, figures and claims read only the rows that trained"
)
KUMAR_FORM_OTHER_BITS = 16  # Kumar et al.'s P_a and P_kv for Sun et al.'s runs, which keep A and KV in BF16


def exponent_mantissa(name: str) -> tuple[int, int]:
    match = FORMAT_PATTERN.fullmatch(name)
    return int(match[1]), int(match[2])


def element_spec(name: str, block, field: str) -> str:
    """The FP spec of one training-precision field: format `name` (e.g. e2m1) scaled per `block` of consecutive
    input-dimension elements, per row (`channel`: a weight's output row, an activation's or gradient's token) or
    per tensor."""
    if block == CHANNEL:
        granularity = CHANNEL if field in WEIGHT_FIELDS else "token"
    else:
        granularity = TENSOR if block == TENSOR else f"b{block}"
    return f"fp:{name}:{granularity}"


def training_precision(name: str, block, inputs: str = LAW_INPUTS) -> dict:
    """The training precision quantizing the GEMM inputs `inputs` ("P2+P4+P6", "P3", …) in format `name`."""
    precision = {}
    for target in inputs.split("+"):
        field, gemms = GEMM_INPUTS[target]
        precision[field] = element_spec(name, block, field)
        if gemms is not None:
            precision["grad_output_gemms"] = gemms
    return precision


def law_block(config: dict, size: str, block) -> float:
    """B as the laws read it: the block size, d_model for channel-wise scaling, NaN for tensor-wise."""
    if block == TENSOR:
        return math.nan
    return float(config["ladder"][size]["d_model"] if block == CHANNEL else block)


def check_config(config: dict) -> None:
    block, key = config["studies"][STUDY], f"studies.{STUDY}"
    fit_sizes = set()
    for index, cell in enumerate(block["cells"]):
        where = f"{key}.cells.{index}"
        check_sizes(config, f"{where}.sizes", cell["sizes"])
        fit_sizes |= set(cell["sizes"])
        _check_formats(f"{where}.formats", cell["formats"])
        for item in cell["blocks"]:
            _check_block(config, f"{where}.blocks", item, cell["sizes"])
        if not set(cell.get("budgets", [])) <= set(block["budgets"]):
            raise ConfigError(f"config key {where}.budgets: not all of them are in {key}.budgets")
    validation = block["validation"]
    check_sizes(config, f"{key}.validation.sizes", validation["sizes"])
    _check_formats(f"{key}.validation.formats", validation["formats"])
    overlap = sorted(fit_sizes & set(validation["sizes"]))
    if overlap:
        raise ConfigError(f"config key {key}.validation.sizes: {', '.join(overlap)} also in the fitted cells")
    for name in ("gemm_inputs", "seeds"):
        point = block[name]
        check_sizes(config, f"{key}.{name}.size", point["size"])
        _check_formats(f"{key}.{name}.format", [point["format"]])
        _check_block(config, f"{key}.{name}.block", point["block"], [point["size"]])
    if config["training"]["seed"] in block["seeds"]["extra"]:
        raise ConfigError(f"config key {key}.seeds.extra: repeats the recipe's seed {config['training']['seed']}")


def _check_formats(key: str, names) -> None:
    from qscaling.quant import parse_spec

    for index, name in enumerate(names):
        if not isinstance(name, str) or FORMAT_PATTERN.fullmatch(name) is None:
            raise ConfigError(f"config key {key}.{index}: format {name!r} is not ExMy (e.g. e2m1)")
        try:
            parse_spec(f"fp:{name}:channel")
        except ValueError as error:
            raise ConfigError(f"config key {key}.{index}: {error}") from None


def _check_block(config: dict, key: str, block, sizes) -> None:
    if block in (CHANNEL, TENSOR):
        return
    if not isinstance(block, int) or isinstance(block, bool) or block < 2:
        raise ConfigError(f"config key {key}: block {block!r} must be an integer ≥ 2, '{CHANNEL}' or '{TENSOR}'")
    for size in sizes:
        # Every Linear's input and output rows (d_model and d_ff wide) are cut into blocks: forward and backward.
        for dim in ("d_model", "d_ff"):
            width = config["ladder"][size][dim]
            if width % block:
                raise ConfigError(f"config key {key}: B = {block} does not divide {size}'s {dim} = {width}")


def points(config: dict) -> list[dict]:
    """Every quantized point, once: {size, budget, format, block, inputs, split, seed}."""
    block, seed = config["studies"][STUDY], config["training"]["seed"]

    def point(size, budget, name, item, inputs=LAW_INPUTS, split=FIT, run_seed=seed):
        return {"size": size, "budget": budget, "format": name, "block": item, "inputs": inputs, "split": split,
                "seed": run_seed}  # fmt: skip

    grid = [
        point(size, budget, name, item)
        for cell in block["cells"]
        for name, size, item in itertools.product(cell["formats"], cell["sizes"], cell["blocks"])
        for budget in cell.get("budgets", block["budgets"])
    ]
    validation = block["validation"]
    grid += [
        point(size, budget, name, CHANNEL, split=VALIDATION)
        for name, size, budget in itertools.product(validation["formats"], validation["sizes"], validation["budgets"])
    ]
    gemm = block["gemm_inputs"]
    grid += [
        point(gemm["size"], gemm["budget"], gemm["format"], gemm["block"], inputs)
        for inputs in [*GEMM_INPUTS, LAW_INPUTS]
    ]
    repeats = block["seeds"]
    grid += [
        point(repeats["size"], repeats["budget"], repeats["format"], repeats["block"], run_seed=extra)
        for extra in [seed, *repeats["extra"]]
    ]
    unique = {tuple(p.values()): p for p in grid}
    return list(unique.values())


def plan(config: dict, planner) -> list[Evaluation]:
    """Each quantized point and its full-precision partner (one evaluation per checkpoint, every label it carries)."""
    return partnered_evaluations(
        STUDY, config["studies"][STUDY], planner, [partnered(config, p) for p in points(config)]
    )


def partnered(config: dict, p: dict) -> PartneredPoint:
    size, seed = p["size"], p["seed"]
    E, M = exponent_mantissa(p["format"])
    variant = label(format=p["format"], E=E, M=M, block=str(p["block"]), B=law_block(config, size, p["block"]))
    full = label(format=FULL, E=FULL_E, M=FULL_M, block=CHANNEL, B=law_block(config, size, CHANNEL), inputs="")
    return PartneredPoint(
        size,
        p["budget"],
        training_precision(p["format"], p["block"], p["inputs"]),
        variant + label(inputs=p["inputs"], split=p["split"], seed=seed),
        full + label(split=p["split"], seed=seed),
        {"seed": seed},
    )


def scoring(config: dict, layout):
    return as_trained_scoring(config, layout, STUDY)


def build_table(rows: pd.DataFrame, settings: dict) -> pd.DataFrame:
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


def fit_names(settings: dict) -> list[str]:
    return list(FITS)


def fit_laws(table: pd.DataFrame, settings: dict) -> dict:
    """Every law on its rows of the grid, with CIs from resampling runs and the error on each left-out size.
    A parameter only an input the rows hold constant could pin (one mantissa width in the exponent sweep, …) is
    held at the law's paper value, and the fit's notes say so."""
    from qscaling.laws.table import constant_inputs, unidentifiable

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
        options = {"bootstrap": settings["bootstrap"], "group_col": "N", "run_col": "run", "seed": 0}
        fits[name] = try_fit(law_name, selected, fixed=fixed or None, **options)
    return fits


FIT_TABLES = ("block_slopes",)


def fit_tables(table: pd.DataFrame, settings: dict) -> dict:
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


def seed_sigma(table: pd.DataFrame) -> float:
    """σ_seed: the spread (sample SD) over seeds of δ at the repeated point. A point and its partner share their
    seed (initialisation and data order), and so do all points at the recipe seed, so a seed moves their losses
    together; what it moves apart — the noise floor of a difference between two points' losses or δs — is δ."""
    deltas = seed_points(table)["delta"]
    return float(deltas.std(ddof=1)) if len(deltas) >= 2 else math.nan


def gemm_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Fig. 2's points by their inputs (P1…P6 and the law's set P2+P4+P6) at the one point they share."""
    rows = trained(table)
    rows = rows[(rows["split"] == FIT) & (rows["seed"] == recipe_seed(table))]
    alone = rows[rows["inputs"].isin(list(GEMM_INPUTS))]
    if alone.empty:
        return alone.set_index("inputs")
    point = _point_rows(rows[rows["format"] != FULL], alone.iloc[0])
    return point[point["inputs"].isin([*GEMM_INPUTS, LAW_INPUTS])].set_index("inputs")


def claims(tables: dict, fits: dict, settings: dict) -> list[dict]:
    table = tables["table"]
    sigma = seed_sigma(table)
    noise = f"σ_seed = {sigma:.2g} over {len(seed_points(table))} seeds"
    capybara = fits.get("capybara")
    rows = law_rows(table)
    return [
        _exponent_over_mantissa_claim(capybara, rows, sigma, noise),
        _block_size_claim(table, settings, sigma, noise),
        *(_layout_claim(capybara, bits, paper) for bits, paper in ((4, (2, 1)), (8, (4, 3)))),
        _backward_inputs_claim(table, sigma, noise),
        _critical_data_claim(capybara, rows, sigma, noise),
        _form_claim(capybara, fits.get("kumar_form"), rows, sigma, noise),
    ]


def _pinned(fit, *names) -> list[str]:
    return [
        f"{name} {'held at the paper value' if fit.held_fixed(name) else 'at its bound'}"
        for name in names
        if fit.held_fixed(name) or fit.at_bound(name)
    ]


def precision_effect(fit, rows: pd.DataFrame) -> float:
    """How far the fitted precision term moves over the quantized points of the grid (max − min, nats)."""
    points = quantized_rows(rows)
    if points.empty:
        return math.nan
    x = {name: points[name].to_numpy(float) for name in ("N", "D", "E", "M", "B")}
    term = law.capybara_loss(fit.params, x) - law.data_size_terms(fit.params, x)
    return float(np.ptp(term))


def _exponent_over_mantissa_claim(fit, rows: pd.DataFrame, sigma: float, noise: str) -> dict:
    """δ − ν from the Capybara fit, its CI the difference of the two CIs' far ends."""
    text = "Exponent bits matter slightly more than mantissa bits (δ > ν)"
    paper = round(law.TABLE2["delta"] - law.TABLE2["nu"], 4)
    if fit is None:
        return claim(STUDY, text, statistic="no Capybara fit", ci="", verdict=INCONCLUSIVE, paper=paper,
                     magnitude=INCONCLUSIVE)  # fmt: skip
    pinned = _pinned(fit, "delta", "nu")
    values = f"δ {fit.params['delta']:.3f}, ν {fit.params['nu']:.3f}"
    if pinned:
        return claim(STUDY, text, statistic=f"{values}: {'; '.join(pinned)}", ci="", verdict=INCONCLUSIVE,
                     paper=paper, magnitude=INCONCLUSIVE)  # fmt: skip
    low = fit.ci["delta"][0] - fit.ci["nu"][1]
    high = fit.ci["delta"][1] - fit.ci["nu"][0]
    row = claim(
        STUDY,
        text,
        statistic=f"δ − ν = {fit.params['delta'] - fit.params['nu']:.3f} ({values})",
        ci=f"[{low:.3f}, {high:.3f}] (difference of the two bootstrap CIs' ends)",
        verdict="reproduced" if low > 0 else ("not reproduced" if high < 0 else INCONCLUSIVE),
        paper=paper,
        magnitude=magnitude_from_interval(low, high, paper),
    )
    return floored_by_seed_noise(row, precision_effect(fit, rows), sigma, noise, "precision term's range over the grid")


def _block_size_claim(table: pd.DataFrame, settings: dict, sigma: float, noise: str) -> dict:
    """The pooled slope of loss on log2 B within each (N, D) of the block sweep (tensor-wise left out), with a
    percentile CI over resampled points; its effect is the slope times the widest span of log2 B."""
    text = "Loss grows with the block size (∝ log2 B, Fig. 3)"
    rows = block_rows(table)
    rows = rows[rows["B"].notna()].assign(log2_B=lambda frame: np.log2(frame["B"]))
    blocks_per_point = rows.groupby(["N", "D"])["log2_B"].nunique()
    if blocks_per_point.empty or blocks_per_point.max() < 2:
        return claim(STUDY, text, statistic="no (N, D) with two block sizes", ci="", verdict=INCONCLUSIVE)

    def slope(frame):
        return pooled_slope(frame, "log2_B", "loss", ["N", "D"], log_x=False, log_y=False)

    rng = np.random.default_rng(0)
    draws = [slope(rows.iloc[rng.integers(0, len(rows), len(rows))]) for _ in range(settings["bootstrap"])]
    low, high = np.nanpercentile(draws, [2.5, 97.5]) if draws else (math.nan, math.nan)
    estimate = slope(rows)
    span = float(rows.groupby(["N", "D"])["log2_B"].agg(np.ptp).max())
    row = claim(
        STUDY,
        text,
        statistic=f"slope of loss on log2 B = {estimate:.3g} nats per doubling ({len(rows)} points, "
        f"{rows.groupby(['N', 'D']).ngroups} (N, D))",
        ci=f"[{low:.3g}, {high:.3g}]",
        verdict="reproduced" if low > 0 else ("not reproduced" if high < 0 else INCONCLUSIVE),
    )
    return floored_by_seed_noise(row, abs(estimate) * span, sigma, noise, "loss change over the blocks")


def layouts_within(fit, bits: int) -> set[tuple[int, int]]:
    """The optimal (E, M) at `bits` total bits for δ and ν at every corner of their CIs and at the estimate."""
    corners = itertools.product([*fit.ci["delta"], fit.params["delta"]], [*fit.ci["nu"], fit.params["nu"]])
    return {law.optimal_layout({"delta": d, "nu": n}, bits) for d, n in corners}


def _layout_claim(fit, bits: int, paper: tuple[int, int]) -> dict:
    paper_name = "E{}M{}".format(*paper)
    text = f"The optimal FP{bits} layout is {paper_name} (Sec. 4.1)"
    if fit is None:
        return claim(STUDY, text, statistic="no Capybara fit", ci="", verdict=INCONCLUSIVE, paper=paper_name,
                     magnitude=INCONCLUSIVE)  # fmt: skip
    best = law.optimal_layout(fit.params, bits)
    pinned = _pinned(fit, "delta", "nu")
    statistic = f"E{best[0]}M{best[1]} at δ {fit.params['delta']:.2f}, ν {fit.params['nu']:.2f}"
    if pinned:
        return claim(STUDY, text, statistic=f"{statistic}: {'; '.join(pinned)}", ci="", verdict=INCONCLUSIVE,
                     paper=paper_name, magnitude=INCONCLUSIVE)  # fmt: skip
    within = sorted(layouts_within(fit, bits))
    ci = "layouts over the CIs of δ and ν: " + ", ".join("E{}M{}".format(*layout) for layout in within)
    verdict = INCONCLUSIVE if len(within) > 1 else ("reproduced" if within == [paper] else "not reproduced")
    magnitude = COVERS_PAPER if paper in within else EXCLUDES_PAPER
    return claim(STUDY, text, statistic=statistic, ci=ci, verdict=verdict, paper=paper_name, magnitude=magnitude)


def _backward_inputs_claim(table: pd.DataFrame, sigma: float, noise: str) -> dict:
    """δ of backward W (P4) and backward X (P6) against forward W (P2), each quantized alone in one format: the
    three share a partner, so each difference is a difference of two separately trained runs' losses."""
    text = "Quantizing a backward GEMM input (P4, P6) costs less than the forward weight (P2) at equal bits (Fig. 2)"
    rows = gemm_rows(table)
    if not {"P2", "P4", "P6"} <= set(rows.index) or not math.isfinite(sigma):
        return claim(STUDY, text, statistic="no P2, P4 and P6 runs, or no σ_seed", ci="", verdict=INCONCLUSIVE)
    gaps = {target: float(rows.loc["P2", "loss"] - rows.loc[target, "loss"]) for target in ("P4", "P6")}
    half = 1.96 * sigma * math.sqrt(2)
    low, high = min(gaps.values()) - half, max(gaps.values()) + half
    deltas = ", ".join(f"{target} {rows.loc[target, 'delta']:.3g}" for target in ("P2", "P4", "P6"))
    return claim(
        STUDY,
        text,
        statistic=f"loss of P2 − P4 {gaps['P4']:.3g}, P2 − P6 {gaps['P6']:.3g} nats (δ: {deltas})",
        ci=f"[{low:.3g}, {high:.3g}] (smaller gap − 1.96·√2 σ_seed, larger + it; {noise})",
        verdict="reproduced" if low > 0 else ("not reproduced" if high < 0 else INCONCLUSIVE),
    )


def _critical_data_claim(fit, rows: pd.DataFrame, sigma: float, noise: str) -> dict:
    """The fitted D_crit of the lowest-precision channel-wise format at each fitted size, against the grid's D;
    where one falls inside the grid, the loss itself must rise past it beyond the seed noise."""
    text = "Low-precision training has a critical data size beyond which more data raises the loss (Sec. 4.2)"
    points = quantized_rows(rows)
    points = points[points["block"] == CHANNEL]
    if fit is None or points.empty:
        return claim(STUDY, text, statistic="no Capybara fit or no channel-wise point", ci="", verdict=INCONCLUSIVE)
    lowest = points.sort_values(["bits", "E"]).iloc[0]
    fmt = points[points["format"] == lowest["format"]]
    E, M = int(lowest["E"]), int(lowest["M"])
    crit = {N: float(law.critical_data_size(fit.params, N, E, M, group["B"].iloc[0])) for N, group in fmt.groupby("N")}
    statistic = f"fitted D_crit of E{E}M{M} channel-wise: " + ", ".join(
        f"{value:.3g} at N = {int(N):,}" for N, value in crit.items()
    )
    inside = {N: value for N, value in crit.items() if value < fmt.loc[fmt["N"] == N, "D"].max()}
    if not inside:
        span = f"{fmt['D'].min():.3g}–{fmt['D'].max():.3g}"
        return claim(STUDY, text, statistic=f"{statistic}; every one beyond the grid's D ({span})", ci=noise,
                     verdict=INCONCLUSIVE)  # fmt: skip
    rises = {}
    for N in inside:
        curve = fmt[fmt["N"] == N].sort_values("D")
        rises[N] = float(curve["loss"].iloc[-1] - curve["loss"].min())
    clear = math.isfinite(sigma) and max(rises.values()) > NOISE_SIGMAS * sigma
    statistic += "; loss rise to the last budget: " + ", ".join(f"{v:.3g} at N = {int(N):,}" for N, v in rises.items())
    return claim(STUDY, text, statistic=statistic, ci=noise, verdict="reproduced" if clear else INCONCLUSIVE)


def _form_claim(capybara, kumar, rows: pd.DataFrame, sigma: float, noise: str) -> dict:
    """Leave-one-size-out relative errors of the two laws on the same points. A gap smaller (in nats, at the
    points' mean loss) than 2 σ_seed is one that separately trained runs make by themselves."""
    text = "The Capybara law predicts left-out sizes better than Kumar et al.'s N_eff form (Fig. 1)"
    errors = [getattr(fit, "heldout_relative_error", None) for fit in (capybara, kumar)]
    if None in errors:
        return claim(STUDY, text, statistic="no held-out errors for both laws", ci="", verdict=INCONCLUSIVE)
    better = errors[0] < errors[1]
    row = claim(
        STUDY,
        text,
        statistic=f"leave-one-size-out relative error {errors[0]:.2%} (Capybara) vs {errors[1]:.2%} (Kumar form); "
        f"R² {capybara.r2:.3f} vs {kumar.r2:.3f}",
        ci="",
        verdict="reproduced" if better else "not reproduced",
    )
    gap = abs(errors[1] - errors[0]) * float(rows["loss"].mean())
    return floored_by_seed_noise(row, gap, sigma, noise, "error gap at the mean loss (nats)")
