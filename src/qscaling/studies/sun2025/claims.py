"""Sun et al. 2025's claims, each held to the seed noise σ_seed of δ from the run's noise model
(`qscaling.noise.ClaimNoise`) where it compares separately trained runs: exponent over mantissa bits (δ > ν), the
block-size penalty, the optimal FP4 and FP8 layouts, backward against forward GEMM inputs, the critical data size,
and the Capybara law against Kumar et al.'s form. A floored claim carries, beside the floor, the effect Sun et
al.'s own constants (Table 2) predict on this run's grid."""

import itertools
import math

import numpy as np
import pandas as pd

from qscaling.laws import sun2025 as law
from qscaling.noise import OWN_REPEATS, ClaimNoise, Sigma, cells_of, delta_quantity, noise_floor
from qscaling.studies.claims import (
    COVERS_PAPER,
    EXCLUDES_PAPER,
    INCONCLUSIVE,
    UNINFORMATIVE,
    UNINFORMATIVE_SHARE,
    claim,
    floored_by_seed_noise,
    held_to,
    parameter_difference,
    parameter_interval,
    pooled_slope,
    t_interval,
    verdict_from_interval,
)
from qscaling.studies.sun2025.analysis import (
    block_rows,
    gemm_rows,
    law_rows,
    quantized_rows,
    seed_noise,
)
from qscaling.studies.sun2025.grid import CHANNEL, STUDY
from qscaling.studies.sun2025.settings import Sun2025Settings

EXPONENT_OVER_MANTISSA = "Exponent bits matter slightly more than mantissa bits (δ > ν)"
BLOCK_SIZE = "Loss grows with the block size (∝ log2 B, Fig. 3)"
BACKWARD_INPUTS = (
    "Quantizing a backward GEMM input (P4, P6) costs less than the forward weight (P2) at equal bits (Fig. 2)"
)
CRITICAL_DATA = "Low-precision training has a critical data size beyond which more data raises the loss (Sec. 4.2)"
FORM = "The Capybara law predicts left-out sizes better than Kumar et al.'s N_eff form (Fig. 1)"


def claims(tables: dict, fits: dict, settings: Sun2025Settings, noise: ClaimNoise = OWN_REPEATS) -> list[dict]:
    table = tables["table"]
    sigma = seed_noise(table, noise, settings.branched)
    capybara = fits.get("capybara")
    rows = law_rows(table)
    return [
        _exponent_over_mantissa_claim(capybara, rows, sigma),
        _block_size_claim(table, settings, sigma),
        *(_layout_claim(capybara, bits, paper) for bits, paper in ((4, (2, 1)), (8, (4, 3)))),
        _backward_inputs_claim(table, sigma),
        _critical_data_claim(capybara, rows, sigma),
        _form_claim(capybara, fits.get("kumar_form"), rows, sigma),
    ]


def _blocked(table: pd.DataFrame) -> pd.DataFrame:
    """The block sweep's points scaled per block of B (channel-wise included, tensor-wise left out)."""
    rows = block_rows(table)
    return rows[rows["B"].notna()]


def power(planned: pd.DataFrame, settings: Sun2025Settings, noise: ClaimNoise) -> list[dict]:
    """Before any run, each claim held to σ_seed: the effect Sun et al.'s constants (Table 2) predict on the
    planned grid beside the smallest effect σ_seed resolves there (`held_to`), as `claims` fills them in after the
    run; the paper's law predicts no effect for the claims that compare single inputs or laws (nan)."""
    rows = law_rows(planned)
    sigma = noise.sigma(delta_quantity(settings.branched), cells_of(rows))
    expected = [
        (EXPONENT_OVER_MANTISSA, precision_effect(law.TABLE2, rows), 1.0),
        (BLOCK_SIZE, paper_block_effect(_blocked(planned)), 1.0),
        (BACKWARD_INPUTS, math.nan, math.sqrt(2)),
        (CRITICAL_DATA, math.nan, math.sqrt(2)),
        (FORM, math.nan, 1.0),
    ]
    return [held_to({"study": STUDY, "claim": text}, sigma, scale, effect) for text, effect, scale in expected]


def _pinned(fit, *names) -> list[str]:
    return [
        f"{name} {'held at the paper value' if fit.held_fixed(name) else 'at its bound'}"
        for name in names
        if fit.held_fixed(name) or fit.at_bound(name)
    ]


def precision_effect(params, rows: pd.DataFrame) -> float:
    """How far the precision term of the Capybara law with `params` (a fit's, or the paper's Table 2) moves over
    the quantized points of the grid (max − min, nats)."""
    points = quantized_rows(rows)
    if points.empty:
        return math.nan
    x = {name: points[name].to_numpy(float) for name in ("N", "D", "E", "M", "B")}
    term = law.capybara_loss(params, x) - law.data_size_terms(params, x)
    return float(np.ptp(term))


def paper_block_effect(rows: pd.DataFrame) -> float:
    """The loss change over each (N, D)'s block sizes that Sun et al.'s constants predict, the largest (nats)."""
    changes = [
        float(np.ptp(law.capybara_loss(law.TABLE2, {name: group[name].to_numpy(float) for name in "NDEMB"})))
        for _, group in rows.groupby(["N", "D"])
    ]
    return max(changes, default=math.nan)


def _exponent_over_mantissa_claim(fit, rows: pd.DataFrame, sigma: Sigma | None) -> dict:
    """δ − ν from the Capybara fit (`parameter_difference`): inconclusive where either is held at the paper's value;
    where one sits on its bound, the direction is inconclusive and the magnitude read off the CI, open on that side."""
    text = EXPONENT_OVER_MANTISSA
    paper = round(law.TABLE2["delta"] - law.TABLE2["nu"], 4)
    if fit is None:
        return claim(STUDY, text, statistic="no Capybara fit", ci="", verdict=INCONCLUSIVE, paper=paper,
                     magnitude=INCONCLUSIVE)  # fmt: skip
    values = f"δ {fit.params['delta']:.3f}, ν {fit.params['nu']:.3f}"
    held = [f"{name} held at the paper value" for name in ("delta", "nu") if fit.held_fixed(name)]
    if held:
        return claim(STUDY, text, statistic=f"{values}: {'; '.join(held)}", ci="", verdict=INCONCLUSIVE,
                     paper=paper, magnitude=INCONCLUSIVE)  # fmt: skip
    pinned = _pinned(fit, "delta", "nu")
    interval = parameter_difference(fit, "delta", fit, "nu")
    row = claim(
        STUDY,
        text,
        statistic=f"δ − ν = {fit.params['delta'] - fit.params['nu']:.3f} ({values})"
        + "".join(f"; {note}" for note in pinned),
        ci=f"{interval.text()} (difference of the two bootstrap CIs' ends)",
        verdict=INCONCLUSIVE if pinned else interval.verdict("positive"),
        paper=paper,
        magnitude=interval.magnitude(paper),
    )
    effect, expected = precision_effect(fit.params, rows), precision_effect(law.TABLE2, rows)
    return floored_by_seed_noise(row, effect, sigma, "precision term's range over the grid", expected=expected)


def _block_size_claim(table: pd.DataFrame, settings: Sun2025Settings, sigma: Sigma | None) -> dict:
    """The pooled slope of loss on log2 B within each (N, D) of the block sweep (tensor-wise left out), with a
    percentile CI over resampled points; its effect is the slope times the widest span of log2 B."""
    text = BLOCK_SIZE
    rows = _blocked(table).assign(log2_B=lambda frame: np.log2(frame["B"]))
    blocks_per_point = rows.groupby(["N", "D"])["log2_B"].nunique()
    if blocks_per_point.empty or blocks_per_point.max() < 2:
        return claim(STUDY, text, statistic="no (N, D) with two block sizes", ci="", verdict=INCONCLUSIVE)

    def slope(frame):
        return pooled_slope(frame, "log2_B", "loss", ["N", "D"], log_x=False, log_y=False)

    rng = np.random.default_rng(0)
    draws = [slope(rows.iloc[rng.integers(0, len(rows), len(rows))]) for _ in range(settings.bootstrap)]
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
    expected = paper_block_effect(rows)
    return floored_by_seed_noise(row, abs(estimate) * span, sigma, "loss change over the blocks", expected=expected)


def layouts_within(fit, bits: int) -> set[tuple[int, int]]:
    """The optimal (E, M) at `bits` total bits for δ and ν at every corner of their CIs and at the estimate; where
    a bound cut δ or ν, every layout beyond on that side too (more mantissa as ν/δ grows)."""
    corners = itertools.product([*fit.ci["delta"], fit.params["delta"]], [*fit.ci["nu"], fit.params["nu"]])
    within = {law.optimal_layout({"delta": d, "nu": n}, bits) for d, n in corners}
    toward_mantissa = _open_toward(fit, "nu", upper=True) or _open_toward(fit, "delta", upper=False)
    toward_exponent = _open_toward(fit, "nu", upper=False) or _open_toward(fit, "delta", upper=True)
    mantissas = [m for _, m in within]
    extended = range(0 if toward_exponent else min(mantissas), (bits if toward_mantissa else max(mantissas) + 1))
    return {(bits - 1 - m, m) for m in extended}


def _open_toward(fit, name: str, *, upper: bool) -> bool:
    """Whether a bound cut `name`'s CI on its upper (or lower) side."""
    interval = parameter_interval(fit, name)
    return interval.open_high if upper else interval.open_low


def _layout_claim(fit, bits: int, paper: tuple[int, int]) -> dict:
    """The optimal layout over the CIs of δ and ν (`layouts_within`): reproduced where only the paper's remains,
    not reproduced where only another does, inconclusive otherwise and wherever δ or ν sits on its bound; the
    magnitude covers or excludes the paper's layout, uninformative where more than UNINFORMATIVE_SHARE of the
    layouts remain."""
    paper_name = "E{}M{}".format(*paper)
    text = f"The optimal FP{bits} layout is {paper_name} (Sec. 4.1)"
    if fit is None or fit.held_fixed("delta") or fit.held_fixed("nu"):
        return claim(STUDY, text, statistic="no Capybara fit with δ and ν fitted", ci="", verdict=INCONCLUSIVE,
                     paper=paper_name, magnitude=INCONCLUSIVE)  # fmt: skip
    best = law.optimal_layout(fit.params, bits)
    pinned = _pinned(fit, "delta", "nu")
    statistic = f"E{best[0]}M{best[1]} at δ {fit.params['delta']:.2f}, ν {fit.params['nu']:.2f}" + "".join(
        f"; {note}" for note in pinned
    )
    within = sorted(layouts_within(fit, bits))
    ci = "layouts over the CIs of δ and ν: " + ", ".join("E{}M{}".format(*layout) for layout in within)
    if pinned or len(within) > 1:
        verdict = INCONCLUSIVE
    else:
        verdict = "reproduced" if within == [paper] else "not reproduced"
    if paper not in within:
        magnitude = EXCLUDES_PAPER
    else:
        magnitude = UNINFORMATIVE if len(within) > UNINFORMATIVE_SHARE * bits else COVERS_PAPER
    return claim(STUDY, text, statistic=statistic, ci=ci, verdict=verdict, paper=paper_name, magnitude=magnitude)


def _backward_inputs_claim(table: pd.DataFrame, sigma: Sigma | None) -> dict:
    """δ of backward W (P4) and backward X (P6) against forward W (P2), each quantized alone in one format: the
    three share a partner, so each difference is a difference of two separately trained runs' losses (the shared
    partner cancels), with SD √2 σ_seed and the t-quantile of σ_seed's dof."""
    text = BACKWARD_INPUTS
    rows = gemm_rows(table)
    if not {"P2", "P4", "P6"} <= set(rows.index) or sigma is None:
        row = claim(STUDY, text, statistic="no P2, P4 and P6 runs, or no σ_seed", ci="", verdict=INCONCLUSIVE)
        return held_to(row, sigma, math.sqrt(2))
    gaps = {target: float(rows.loc["P2", "loss"] - rows.loc[target, "loss"]) for target in ("P4", "P6")}
    low = t_interval(min(gaps.values()), sigma.value * math.sqrt(2), sigma.dof)[0]
    high = t_interval(max(gaps.values()), sigma.value * math.sqrt(2), sigma.dof)[1]
    deltas = ", ".join(f"{target} {rows.loc[target, 'delta']:.3g}" for target in ("P2", "P4", "P6"))
    row = claim(
        STUDY,
        text,
        statistic=f"loss of P2 − P4 {gaps['P4']:.3g}, P2 − P6 {gaps['P6']:.3g} nats (δ: {deltas})",
        ci=f"[{low:.3g}, {high:.3g}] (smaller gap − t·√2 σ_seed, larger + it, t at σ_seed's {sigma.dof:.1f} dof)",
        verdict=verdict_from_interval(low, high, "positive"),
    )
    return held_to(row, sigma, math.sqrt(2))


def _critical_data_claim(fit, rows: pd.DataFrame, sigma: Sigma | None) -> dict:
    """The fitted D_crit of the lowest-precision channel-wise format at each fitted size, against the grid's D;
    where one falls inside the grid, the loss itself decides past it, beyond the 95 % t-floor of a difference of
    two runs (√2 σ_seed): reproduced where
    it rises to the last budget at some size, not reproduced where it falls from D_crit to the last budget at every
    such size, inconclusive otherwise (and where every D_crit lies beyond the grid)."""
    text = CRITICAL_DATA
    points = quantized_rows(rows)
    points = points[points["block"] == CHANNEL]
    if fit is None or points.empty:
        row = claim(STUDY, text, statistic="no Capybara fit or no channel-wise point", ci="", verdict=INCONCLUSIVE)
        return held_to(row, sigma, math.sqrt(2))
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
        row = claim(STUDY, text, statistic=f"{statistic}; every one beyond the grid's D ({span})", ci="",
                    verdict=INCONCLUSIVE)  # fmt: skip
        return held_to(row, sigma, math.sqrt(2))
    rises, falls = {}, {}
    for N, value in inside.items():
        curve = fmt[fmt["N"] == N].sort_values("D")
        rises[N] = float(curve["loss"].iloc[-1] - curve["loss"].min())
        falls[N] = float(curve.loc[curve["D"] >= value, "loss"].iloc[0] - curve["loss"].iloc[-1])
    floor = noise_floor(sigma, math.sqrt(2)) if sigma is not None else math.inf
    if max(rises.values()) > floor:
        verdict = "reproduced"
    else:
        verdict = "not reproduced" if min(falls.values()) > floor else INCONCLUSIVE
    statistic += "; loss rise to the last budget: " + ", ".join(f"{v:.3g} at N = {int(N):,}" for N, v in rises.items())
    statistic += "; fall past D_crit: " + ", ".join(f"{v:.3g} at N = {int(N):,}" for N, v in falls.items())
    return held_to(claim(STUDY, text, statistic=statistic, ci="", verdict=verdict), sigma, math.sqrt(2))


def _form_claim(capybara, kumar, rows: pd.DataFrame, sigma: Sigma | None) -> dict:
    """Leave-one-size-out relative errors of the two laws on the same points. A gap smaller (in nats, at the
    points' mean loss) than σ_seed's 95 % t-floor is one that separately trained runs make by themselves."""
    text = FORM
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
    return floored_by_seed_noise(row, gap, sigma, "error gap at the mean loss (nats)")
