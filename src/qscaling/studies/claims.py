"""The claims table: per claim of a paper, the statistic measured here, its CI, two verdicts and the scale.

Verdicts are decided by the data, never tuned. The direction verdict (`verdict`) is `reproduced` when the CI
excludes zero on the paper's side, `not reproduced` when it excludes zero on the other side, `inconclusive`
otherwise. The magnitude verdict (`magnitude`), for a claim with a paper value, says whether the CI covers that
value: a right sign at a wrong size is a different finding from a right sign at the paper's size.
"""

import math

import numpy as np
import pandas as pd

from qscaling.noise import Sigma, noise_floor

COLUMNS = ["study", "claim", "statistic", "ci", "verdict", "paper", "magnitude", "scale"]
COVERS_PAPER = "covers paper"
EXCLUDES_PAPER = "excludes paper"
NO_PAPER_VALUE = "no paper value"
INCONCLUSIVE = "inconclusive"
MAGNITUDES = (COVERS_PAPER, EXCLUDES_PAPER, INCONCLUSIVE)  # for a claim with a paper value
# A CI endpoint this close (relatively) to a parameter's bound was produced by the optimiser stopping there.
BOUND_RTOL = 1e-9
NOISE_SIGMAS = 2  # an effect within 2 σ_seed of nothing is inconclusive


def claim(
    study: str,
    text: str,
    *,
    statistic: str,
    ci: str,
    verdict: str,
    paper: float | str | None = None,
    magnitude: str | None = None,
) -> dict:
    """One claims-table row. `paper` is the paper's value (a float is formatted, text kept as written); a row with
    a paper value needs its `magnitude` verdict, e.g. from `magnitude_from_interval`."""
    row = {"study": study, "claim": text, "statistic": statistic, "ci": ci, "verdict": verdict}
    if paper is None:
        if magnitude not in (None, NO_PAPER_VALUE):
            raise ValueError(f"claim {text!r}: magnitude {magnitude!r} compares with a paper value; pass paper=")
        return {**row, "paper": "", "magnitude": NO_PAPER_VALUE}
    if magnitude not in MAGNITUDES:
        raise ValueError(
            f"claim {text!r}: a paper value ({paper}) needs magnitude= one of {MAGNITUDES}, got {magnitude!r}"
        )
    return {**row, "paper": paper if isinstance(paper, str) else f"{paper:g}", "magnitude": magnitude}


def cannot_fail_claim(study: str, text: str, reason: str) -> dict:
    """A claim whose test could not have come out against the paper here (a test that cannot fail is no test):
    inconclusive, with `reason` saying why, e.g. "every variant counts 0 outlier dimensions"."""
    return claim(study, text, statistic=f"{reason}: the test cannot fail", ci="", verdict=INCONCLUSIVE)


def floored_by_seed_noise(
    row: dict, effect: float, sigma: Sigma | float, noise: str | None, what: str, scale: float = 1.0
) -> dict:
    """`row` made inconclusive where its whole effect (`what`, in nats) is within the seed noise of nothing:
    separately trained runs differ by that much with no precision effect at all. With a `Sigma`, within its 95 %
    t-floor (`qscaling.noise.noise_floor`; `scale`: the effect's seed-to-seed SD in σ_seed, √2 for a difference of
    two runs), and `noise` defaults to its source; with a bare σ (no dof), within NOISE_SIGMAS σ. `noise` (how
    σ_seed was measured) joins the row's CI."""
    noise = sigma.source if noise is None and isinstance(sigma, Sigma) else noise
    row = {**row, "ci": f"{row['ci']} ({noise})" if row["ci"] else noise}
    if isinstance(sigma, Sigma):
        floor = noise_floor(sigma, scale)
        rule = f"{floor:.2g}, the 95 % t-floor of σ_seed ({sigma.dof:.1f} dof)"
    else:
        floor, rule = NOISE_SIGMAS * sigma * scale, f"{NOISE_SIGMAS * scale:.3g} σ_seed"
    if math.isfinite(floor) and effect <= floor and row["verdict"] != INCONCLUSIVE:
        statistic = f"{row['statistic']}; {what} {effect:.2g} ≤ {rule}"
        magnitude = row["magnitude"] if row["magnitude"] == NO_PAPER_VALUE else INCONCLUSIVE
        return {**row, "statistic": statistic, "verdict": INCONCLUSIVE, "magnitude": magnitude}
    return row


def verdict_from_interval(low: float, high: float, expect: str) -> str:
    if expect == "positive":
        return "reproduced" if low > 0 else ("not reproduced" if high < 0 else INCONCLUSIVE)
    return "reproduced" if high < 0 else ("not reproduced" if low > 0 else INCONCLUSIVE)


def magnitude_from_interval(low: float, high: float, paper: float | None) -> str:
    """Whether the CI [low, high] contains the paper's value; inconclusive where there is no finite CI."""
    if paper is None:
        return NO_PAPER_VALUE
    if not (math.isfinite(low) and math.isfinite(high)):
        return INCONCLUSIVE
    return COVERS_PAPER if low <= paper <= high else EXCLUDES_PAPER


def pooled_slope(frame: pd.DataFrame, x: str, y: str, by, *, log_x: bool = True, log_y: bool = True) -> float:
    """Slope of y on x within each `by` group (group means removed), pooled across groups."""
    xs, ys = [], []
    for _, group in frame.groupby(by):
        if len(group) < 2:
            continue
        gx = np.log(group[x].to_numpy(float)) if log_x else group[x].to_numpy(float)
        gy = np.log(group[y].to_numpy(float)) if log_y else group[y].to_numpy(float)
        xs.append(gx - gx.mean())
        ys.append(gy - gy.mean())
    if not xs:
        return float("nan")
    x_all, y_all = np.concatenate(xs), np.concatenate(ys)
    return float((x_all @ y_all) / (x_all @ x_all)) if x_all @ x_all > 0 else float("nan")


def slope_claim(
    study: str,
    text: str,
    frame: pd.DataFrame,
    *,
    x: str,
    y: str,
    by,
    expect: str,
    log_x: bool = True,
    bootstrap: int = 1000,
    seed: int = 0,
    paper: float | None = None,
) -> dict:
    """The pooled within-group log-log slope of y on x, with a percentile bootstrap CI over rows; `paper` is the
    paper's slope, which the CI covers or excludes."""
    frame = frame[frame[y] > 0]
    if len(frame) < 3:
        magnitude = None if paper is None else INCONCLUSIVE
        statistic = f"too few positive points ({len(frame)})"
        return claim(study, text, statistic=statistic, ci="", verdict=INCONCLUSIVE, paper=paper, magnitude=magnitude)
    estimate = pooled_slope(frame, x, y, by, log_x=log_x)
    rng = np.random.default_rng(seed)
    draws = [
        pooled_slope(frame.iloc[rng.integers(0, len(frame), len(frame))], x, y, by, log_x=log_x)
        for _ in range(bootstrap)
    ]
    low, high = np.nanpercentile(draws, [2.5, 97.5])
    kind = "log-log" if log_x else "log-linear"
    return claim(
        study,
        text,
        statistic=f"{kind} slope of {y} on {x} = {estimate:.3f} ({len(frame)} points)",
        ci=f"[{low:.3f}, {high:.3f}]",
        verdict=verdict_from_interval(low, high, expect),
        paper=paper,
        magnitude=magnitude_from_interval(low, high, paper),
    )


def positive_parameter_claim(study: str, text: str, fit, name: str, paper: float | None = None) -> dict:
    """A fitted exponent has the paper's (positive) sign, decided by its bootstrap CI, and `paper`'s size when
    the CI covers it.

    A parameter pinned at its bound is inconclusive on both counts whatever its CI, since the optimum lies
    outside the law's range. A CI that only reaches a bound keeps its verdicts, but the statistic says so: the
    bound cut off part of the bootstrap's spread.
    """
    low, high, reached = ci_within_bounds(fit, name)
    at_bound = fit.at_bound(name)
    statistic = f"{name} = {fit.params[name]:.3f}, R² = {fit.r2:.2f}"
    if at_bound:
        verdict, magnitude = INCONCLUSIVE, (None if paper is None else INCONCLUSIVE)
        statistic += " (at its bound)"
    else:
        verdict, magnitude = verdict_from_interval(low, high, "positive"), magnitude_from_interval(low, high, paper)
        statistic += "".join(f" (CI reaches its bound {bound:g})" for bound in reached)
    ci = f"[{low:.3f}, {high:.3f}]"
    return claim(study, text, statistic=statistic, ci=ci, verdict=verdict, paper=paper, magnitude=magnitude)


def ci_within_bounds(fit, name: str) -> tuple[float, float, list[float]]:
    """`fit.ci[name]` with an endpoint that equals a bound of `fit.law`'s parameter (within BOUND_RTOL) set to
    that bound, and the bounds so reached.

    Set, not kept: a percentile between draws piled on a bound of 0 and the next draw is a hair above 0, and
    would read as a CI excluding zero although the optimiser, not the data, stopped the draws there.
    """
    low, high = fit.ci[name]
    param = next((param for param in fit.law.params if param.name == name), None)
    if param is None:
        return low, high, []
    # A bound of 0 has no relative scale: there the parameter's span stands in for it.
    absolute = 0.0 if param.log else BOUND_RTOL * (param.high - param.low)
    reached = [
        bound
        for endpoint, bound in ((low, param.low), (high, param.high))
        if math.isclose(endpoint, bound, rel_tol=BOUND_RTOL, abs_tol=absolute)
    ]
    return (param.low if param.low in reached else low), (param.high if param.high in reached else high), reached


def claims_frame(rows: list[dict], scale: str) -> pd.DataFrame:
    return pd.DataFrame([{**row, "scale": scale} for row in rows], columns=COLUMNS)


def render_markdown(frame: pd.DataFrame) -> str:
    header = ["study", "claim", "statistic", "95 % CI", "direction", "paper", "magnitude", "scale"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in frame.itertuples(index=False):
        cells = [row.study, row.claim, row.statistic, row.ci, f"**{row.verdict}**", row.paper, row.magnitude, row.scale]
        # A "|" inside a cell (e.g. "|ρ| < 0.5") would otherwise end the cell.
        lines.append("| " + " | ".join(str(cell).replace("|", r"\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"
