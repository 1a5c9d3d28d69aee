"""The training-precision study's claims: γ of activations and of the KV cache below that of weights, N_eff/N
saturated by 8 bits, a compute-optimal precision of 7–8 bits and, after training, lower-precision-trained weights
degrading less under PTQ; each effect held to the seed noise σ_seed of δ from the run's noise model
(`qscaling.noise.ClaimNoise`), beside the precision cost Kumar et al.'s own constants (Table 2) predict here."""

import math

import numpy as np
import pandas as pd

from qscaling.laws import kumar2024 as law
from qscaling.noise import OWN_REPEATS, ClaimNoise, Sigma, own_repeats_sigma
from qscaling.studies.claims import (
    INCONCLUSIVE,
    Interval,
    claim,
    floored_by_seed_noise,
    parameter_difference,
    parameter_interval,
    t_interval,
    verdict_from_interval,
)
from qscaling.studies.kumar2024_training.analysis import (
    TABLE2,
    law_rows,
    optimal_precision,
    precision_cost,
    seed_noise,
    sweep_rows,
)
from qscaling.studies.kumar2024_training.grid import STUDY
from qscaling.studies.kumar2024_training.precision import FULL, TENSOR_SPECS
from qscaling.studies.kumar2024_training.settings import Kumar2024TrainingSettings
from qscaling.studies.tables import recipe_seed

# "Saturated by 8 bits": less than this share of the effective parameters is lost at P_w = 8. Table 2's constants
# lose 6.8 %; at 6 bits they lose 14 %, so the paper's "6–8 bits" is read at its upper end.
SATURATION_LOSS = 0.1
SATURATION_BITS = 8
PAPER_OPTIMAL_RANGE = (7.0, 8.0)  # "7–8 bits" (Sec. 4.3.1); Table 2's constants give P* = 7.00


def _pinned(fit, *names) -> list[str]:
    return [
        f"{name} {'held at the paper value' if fit.held_fixed(name) else 'at its bound'}"
        for name in names
        if fit.held_fixed(name) or fit.at_bound(name)
    ]


def claims(
    tables: dict, fits: dict, settings: Kumar2024TrainingSettings, noise: ClaimNoise = OWN_REPEATS
) -> list[dict]:
    table = tables["table"]
    sigma = seed_noise(table, noise, settings.branched)
    rows = law_rows(table)
    return [
        *(_ordering_claim(fits, rows, tensor, sigma) for tensor in ("a", "kv")),
        _saturation_claim(fits.get("neff_w"), rows, sigma),
        _optimal_precision_claim(fits.get("neff_joint"), tables.get("optimal_precision"), rows, sigma),
        *(_robustness_claim(tables.get("ptq"), method, noise) for method in settings.ptq.methods),
    ]


def robustness_gaps(ptq: pd.DataFrame, method: str) -> pd.DataFrame:
    """Per weight-only point and P_post below its P_w: δ_PTQ of its fp32 partner less its own at the same P_post
    (`gap`, positive where the low-precision-trained model degrades less), by (size, D, seed, P_train, P_post)."""
    columns = ["size", "N", "D", "seed", "P_train", "P_post", "gap"]
    rows = ptq[ptq["method"] == method] if ptq is not None and not ptq.empty else pd.DataFrame(columns=columns)
    if rows.empty:
        return pd.DataFrame(columns=columns)
    keys = ["size", "N", "D", "seed", "P_post"]
    partner = rows[rows["precision"] == FULL].set_index(keys)["delta"].rename("partner_delta")
    points = rows[(rows["precision"] != FULL) & (rows["P_post"] < rows["P_train"])]
    joined = points.join(partner, on=keys, how="inner")
    return joined.assign(gap=joined["partner_delta"] - joined["delta"])[columns].reset_index(drop=True)


def gap_sigma(gaps: pd.DataFrame) -> Sigma | None:
    """σ_seed of the robustness gap itself: the MAD over seeds pooled over the (size, D, P_w, P_post) groups that
    repeat it (a group whose seeds agree exactly, e.g. both at the bound of the format, adds no spread)."""
    keys = ["size", "D", "P_train", "P_post"]
    repeats = {
        (f"{size}, P_w {p_train:g} → P_post {p_post:g}", int(d)): group["gap"].tolist()
        for (size, d, p_train, p_post), group in gaps.groupby(keys)
        if group["seed"].nunique() >= 2
    }
    return own_repeats_sigma(repeats)


def _robustness_claim(ptq: pd.DataFrame | None, method: str, noise: ClaimNoise) -> dict:
    """The mean over points and P_post < P_w of δ_PTQ(fp32 partner) − δ_PTQ(point), its CI t-based on the spread
    over (size, D) cells (cells − 1 dof: each cell a separately trained pair); held to the seed noise of the gap
    itself: its spread over the repeated points' seeds (the noise model measures δ of training, not this gap)."""
    text = f"Models trained at lower weight precision degrade less under later PTQ ({method.upper()}; Sec. 5, Fig. 7)"
    gaps = robustness_gaps(ptq, method)
    if gaps.empty:
        return claim(STUDY, text, statistic="no weight-only point post-quantized below its P_w", ci="",
                     verdict=INCONCLUSIVE)  # fmt: skip
    recipe = gaps[gaps["seed"] == recipe_seed(gaps)]
    per_cell = recipe.groupby(["N", "D"])["gap"].mean()
    mean = float(recipe["gap"].mean())
    if len(per_cell) >= 2:
        low, high = t_interval(mean, float(per_cell.std(ddof=1)) / math.sqrt(len(per_cell)), len(per_cell) - 1)
        ci = f"[{low:.3g}, {high:.3g}] (t over {len(per_cell)} (N, D) cells)"
    else:
        low, high, ci = -math.inf, math.inf, "one (N, D) cell: no CI"
    sigma = gap_sigma(gaps)
    row = claim(
        STUDY,
        text,
        statistic=f"mean δ_PTQ(fp32) − δ_PTQ(P_w) = {mean:.3g} nats over {len(recipe)} (point, P_post) pairs",
        ci=ci,
        verdict=verdict_from_interval(low, high, "positive"),
    )
    return floored_by_seed_noise(row, abs(mean), sigma, "|mean gap| (nats)")


def _ordering_claim(fits: dict, rows: pd.DataFrame, tensor: str, sigma: Sigma | None) -> dict:
    """γ_w − γ_x from the two marginal fits (`parameter_difference`). γ alone does not rank sensitivities where the
    offsets n_x differ, so the statistic also gives N_eff/N of each at 4 bits. A γ held at the paper's value
    measures nothing; a γ or n on its bound leaves the direction inconclusive and the magnitude read off the CI,
    open where a bound cut it."""
    name = {"a": "activations", "kv": "the KV cache"}[tensor]
    text = f"Training precision of {name} has a smaller γ than that of weights (γ_{tensor} < γ_w, Table 2)"
    paper = round(TABLE2["gamma_w"] - TABLE2[f"gamma_{tensor}"], 4)
    weights, other = fits.get("neff_w"), fits.get(f"neff_{tensor}")
    if weights is None or other is None:
        return claim(STUDY, text, statistic=f"no neff_w or neff_{tensor} fit", ci="", verdict=INCONCLUSIVE,
                     paper=paper, magnitude=INCONCLUSIVE)  # fmt: skip
    gamma_w, gamma_x = weights.params["gamma_w"], other.params[f"gamma_{tensor}"]
    fractions = (
        f"N_eff/N at 4 bits: w {float(law.precision_fraction(weights.params, 4, 'w')):.3f}, "
        f"{tensor} {float(law.precision_fraction(other.params, 4, tensor)):.3f}"
    )
    values = f"γ_w {gamma_w:.3g}, γ_{tensor} {gamma_x:.3g}; {fractions}"
    held = [name for fit, name in ((weights, "gamma_w"), (other, f"gamma_{tensor}")) if fit.held_fixed(name)]
    if held:
        return claim(STUDY, text, statistic=f"{values}: {', '.join(held)} held at the paper value", ci="",
                     verdict=INCONCLUSIVE, paper=paper, magnitude=INCONCLUSIVE)  # fmt: skip
    pinned = _pinned(weights, "gamma_w", "n_w") + _pinned(other, f"gamma_{tensor}", f"n_{tensor}")
    interval = parameter_difference(weights, "gamma_w", other, f"gamma_{tensor}")
    row = claim(
        STUDY,
        text,
        statistic=f"γ_w − γ_{tensor} = {gamma_w - gamma_x:.3g} ({values})" + "".join(f"; {n}" for n in pinned),
        ci=f"[{interval.low:.3g}, {interval.high:.3g}] (difference of the two bootstrap CIs' ends)",
        verdict=INCONCLUSIVE if pinned else interval.verdict("positive"),
        paper=paper,
        magnitude=interval.magnitude(paper),
    )
    # Each γ is read off its own sweep: the smaller of the two fitted precision costs bounds what either shows.
    sweeps = ((weights, sweep_rows(rows, "w")), (other, sweep_rows(rows, tensor)))
    effect = min(precision_cost(fit, sweep) for fit, sweep in sweeps)
    expected = min(precision_cost(fit, sweep, paper=True) for fit, sweep in sweeps)
    return floored_by_seed_noise(row, effect, sigma, "smaller sweep's fitted precision cost (nats)", expected=expected)


def lost_share(params: dict, bits: float) -> float:
    """1 − f_w(P) = e^(−P/γ_w + n_w), at most 1 (no effective parameters left): the share of effective parameters
    a P-bit weight precision loses."""
    return min(1.0, math.exp(-bits / params["gamma_w"] + params["n_w"]))


def saturation_interval(fit) -> Interval:
    """The CI of the share lost at SATURATION_BITS: it grows with both γ_w and n_w, so the corners of their CIs
    bound it, each end open where a bound cut either CI on that side. A share: a positive scale parameter in [0, 1]."""
    gamma, offset = parameter_interval(fit, "gamma_w"), parameter_interval(fit, "n_w")
    return Interval(
        lost_share({"gamma_w": gamma.low, "n_w": offset.low}, SATURATION_BITS),
        lost_share({"gamma_w": gamma.high, "n_w": offset.high}, SATURATION_BITS),
        open_low=gamma.open_low or offset.open_low,
        open_high=gamma.open_high or offset.open_high,
        bounds=(0.0, 1.0),
        positive=True,
    )


def _saturation_claim(fit, rows: pd.DataFrame, sigma: Sigma | None) -> dict:
    """The share of effective parameters lost at 8-bit weights, from the weight sweep's fit (`saturation_interval`):
    reproduced where its CI lies below SATURATION_LOSS, not reproduced where above. γ_w or n_w on its bound leaves
    the direction inconclusive and the magnitude read off the CI, open where the bound cut it."""
    text = (
        f"N_eff/N saturates by 6–8 bits: 8-bit weights lose under {SATURATION_LOSS:.0%} of the effective "
        "parameters (Fig. 3 left)"
    )
    paper = round(lost_share(TABLE2, SATURATION_BITS), 4)
    if fit is None:
        return claim(STUDY, text, statistic="no neff_w fit", ci="", verdict=INCONCLUSIVE, paper=paper,
                     magnitude=INCONCLUSIVE)  # fmt: skip
    share = lost_share(fit.params, SATURATION_BITS)
    gamma, offset = fit.params["gamma_w"], fit.params["n_w"]
    values = f"1 − N_eff/N at P_w = {SATURATION_BITS}: {share:.3g} (γ_w {gamma:.3g}, n_w {offset:.3g})"
    pinned = _pinned(fit, "gamma_w", "n_w")
    interval = saturation_interval(fit)
    shifted = Interval(interval.low - SATURATION_LOSS, interval.high - SATURATION_LOSS, interval.open_low,
                       interval.open_high)  # fmt: skip
    row = claim(
        STUDY,
        text,
        statistic=values + "".join(f"; {note}" for note in pinned),
        ci=f"[{interval.low:.3g}, {interval.high:.3g}] (at the corners of the bootstrap CIs of γ_w and n_w)",
        verdict=INCONCLUSIVE if pinned else shifted.verdict("negative"),
        paper=paper,
        magnitude=interval.magnitude(paper),
    )
    sweep = sweep_rows(rows, "w")
    return floored_by_seed_noise(row, precision_cost(fit, sweep), sigma, "weight sweep's fitted precision cost (nats)",
                                 expected=precision_cost(fit, sweep, paper=True))  # fmt: skip


def _optimal_precision_claim(fit, draws, rows: pd.DataFrame, sigma: Sigma | None) -> dict:
    """P* of the joint fit, its CI the percentiles of the bootstrap refits' P* (`optimal_precision_draws`):
    reproduced where the whole CI lies within 7–8 bits, not reproduced where it lies wholly outside; inconclusive
    where the joint fit is ill-conditioned, and in direction where a γ_x or n_x sits on its bound (its magnitude is
    then read with both ends open)."""
    low_bits, high_bits = PAPER_OPTIMAL_RANGE
    text = (
        f"Compute-optimal training precision is {low_bits:g}–{high_bits:g} bits (Sec. 4.3.1, P* with the offsets n_x)"
    )
    paper = round(optimal_precision(TABLE2), 2)
    if fit is None:
        return claim(STUDY, text, statistic="no neff_joint fit", ci="", verdict=INCONCLUSIVE, paper=paper,
                     magnitude=INCONCLUSIVE)  # fmt: skip
    values = f"P* = {optimal_precision(fit.params):.3g} bits ({optimal_precision(fit.params, offsets=False):.3g} without the offsets)"
    pinned = _pinned(fit, *(f"{name}_{tensor}" for tensor in TENSOR_SPECS for name in ("gamma", "n")))
    solved = draws["P_star"].dropna() if draws is not None else pd.Series(dtype=float)
    if len(solved) < 2:
        return claim(STUDY, text, statistic=f"{values}; fewer than 2 bootstrap refits with a P*", ci="",
                     verdict=INCONCLUSIVE, paper=paper, magnitude=INCONCLUSIVE)  # fmt: skip
    low, high = (float(value) for value in np.percentile(solved, [2.5, 97.5]))
    ci = f"[{low:.3g}, {high:.3g}] ({len(solved)} of {len(draws)} bootstrap refits of the joint fit have a P*)"
    if fit.ill_conditioned:
        # Its γ_x and n_x trade against each other along directions the data leave free: P* moves with them.
        unidentified = f"the joint fit is ill-conditioned (Jacobian condition number {fit.jacobian_condition:.2g})"
        return claim(STUDY, text, statistic=f"{values}: {unidentified}, P* is not identified", ci=ci,
                     verdict=INCONCLUSIVE, paper=paper, magnitude=INCONCLUSIVE)  # fmt: skip
    inside, outside = low >= low_bits and high <= high_bits, high < low_bits or low > high_bits
    # P* depends on every γ_x and n_x: a bound on any one cuts its CI on a side that parameter alone does not tell.
    interval = Interval(low, high, open_low=bool(pinned), open_high=bool(pinned), positive=True)
    row = claim(
        STUDY,
        text,
        statistic=values + "".join(f"; {note}" for note in pinned),
        ci=ci,
        verdict="reproduced"
        if inside and not pinned
        else ("not reproduced" if outside and not pinned else INCONCLUSIVE),
        paper=paper,
        magnitude=interval.magnitude(paper),
    )
    return floored_by_seed_noise(row, precision_cost(fit, rows), sigma, "joint fit's precision cost (nats)",
                                 expected=precision_cost(fit, rows, paper=True))  # fmt: skip
