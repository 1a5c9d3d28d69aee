"""The claims table: per claim of a paper, the statistic measured here, its CI, two verdicts and the scale.

Verdicts are decided by the data, never tuned. The direction verdict (`verdict`) is `reproduced` when the CI
excludes zero on the paper's side, `not reproduced` when it excludes zero on the other side, `inconclusive`
otherwise. The magnitude verdict (`magnitude`), for a claim with a paper value, says whether the CI covers that
value (`Interval.magnitude`): a right sign at a wrong size is a different finding from a right sign at the paper's
size, and a CI too wide to have missed the paper's value (UNINFORMATIVE_*) is neither.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from qscaling.noise import Sigma, noise_floor

# noise: the σ_seed a claim between separately trained runs was held to (its source), empty for a claim read on one
# checkpoint's paired evaluations; min_detectable: the smallest effect (nats) that σ_seed lets the claim resolve,
# its 95 % t-floor; expected_effect: the effect the paper's own law predicts on this run's grid, beside it.
COLUMNS = [
    "study", "claim", "statistic", "ci", "verdict", "paper", "magnitude", "noise", "expected_effect", "min_detectable",
    "scale",
]  # fmt: skip
NO_SIGMA = "no σ_seed: no seed study in this run and fewer than two seed repeats with any spread"
COVERS_PAPER = "covers paper"
EXCLUDES_PAPER = "excludes paper"
UNINFORMATIVE = "uninformative"
NO_PAPER_VALUE = "no paper value"
INCONCLUSIVE = "inconclusive"
MAGNITUDES = (COVERS_PAPER, EXCLUDES_PAPER, UNINFORMATIVE, INCONCLUSIVE)  # for a claim with a paper value
# A CI covering the paper's value matches it only where it could have missed it: one that admits most of what the
# statistic can be is uninformative. How wide is too wide depends on the statistic:
# - a parameter with finite bounds (a law's): a CI over more than this share of its range keeps more than it
#   rules out;
UNINFORMATIVE_SHARE = 0.5
# - a positive scale parameter (an exponent, a share, a ratio): its size is its order of magnitude, which a CI whose
#   ends lie more than this many decades apart does not know (a CI reaching 0 spans infinitely many);
UNINFORMATIVE_DECADES = 1.0
# - a signed statistic without bounds (a slope, a difference): the paper's value is its only scale, and a CI wider
#   than this multiple of |paper| has a half-width beyond half the paper's value.
UNINFORMATIVE_PAPER_MULTIPLE = 1.0
CONFIDENCE = 0.95  # of every claim's CI
# A CI endpoint this close (relatively) to a parameter's bound was produced by the optimiser stopping there.
BOUND_RTOL = 1e-9


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
    row |= {"noise": "", "expected_effect": "", "min_detectable": ""}
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


@dataclass(frozen=True)
class PaperLaw:
    """A law at a paper's constants, predicting as a fit does: the effect the paper expects on this run's grid."""

    law: object  # qscaling.laws.Law
    params: Mapping[str, float]

    def predict(self, data) -> np.ndarray:
        return self.law(self.params, data)


def held_to(row: dict, sigma: Sigma | None, scale: float = 1.0, expected: float | None = None) -> dict:
    """`row` saying which σ_seed it was held to (`noise`), the smallest effect that σ_seed resolves
    (`min_detectable`: its 95 % t-floor for an effect whose seed-to-seed SD is `scale` σ_seed, √2 for a difference
    of two runs) and, beside it, the effect the paper's law predicts here (`expected`, nats)."""
    expected_text = f"{expected:.2g}" if expected is not None and math.isfinite(expected) else ""
    if sigma is None:
        return {**row, "noise": NO_SIGMA, "expected_effect": expected_text, "min_detectable": ""}
    floor = noise_floor(sigma, scale)
    return {**row, "noise": sigma.source, "expected_effect": expected_text, "min_detectable": f"{floor:.2g}"}


def floored_by_seed_noise(
    row: dict, effect: float, sigma: Sigma | None, what: str, scale: float = 1.0, expected: float | None = None
) -> dict:
    """`row` made inconclusive where its whole effect (`what`, in nats) is within the seed noise of nothing:
    separately trained runs differ by that much with no precision effect at all. Within the 95 % t-floor of
    `sigma` (`qscaling.noise.noise_floor`; `scale` as `held_to`'s), and inconclusive without a σ_seed (a claim
    between trained runs that no seed noise was measured for is not decided)."""
    row = held_to(row, sigma, scale, expected)
    if row["verdict"] == INCONCLUSIVE:
        return row
    if sigma is None:
        statistic = f"{row['statistic']}; not held to any σ_seed"
    else:
        floor = noise_floor(sigma, scale)
        if not (math.isfinite(floor) and effect <= floor):
            return row
        statistic = f"{row['statistic']}; {what} {effect:.2g} ≤ {floor:.2g}, the 95 % t-floor of σ_seed"
    magnitude = row["magnitude"] if row["magnitude"] == NO_PAPER_VALUE else INCONCLUSIVE
    return {**row, "statistic": statistic, "verdict": INCONCLUSIVE, "magnitude": magnitude}


def verdict_from_interval(low: float, high: float, expect: str) -> str:
    if expect == "positive":
        return "reproduced" if low > 0 else ("not reproduced" if high < 0 else INCONCLUSIVE)
    return "reproduced" if high < 0 else ("not reproduced" if low > 0 else INCONCLUSIVE)


def student_t_quantile(dof: float) -> float:
    """The two-sided CONFIDENCE quantile of Student's t with `dof` degrees of freedom: 4.30 for an SD over 3
    seeds (2 dof), 1.96 as dof grows; infinite without one (a single seed measures no spread)."""
    return float(stats.t.ppf((1 + CONFIDENCE) / 2, dof)) if dof > 0 else math.inf


def t_interval(estimate: float, se: float, dof: float) -> tuple[float, float]:
    """estimate ± t·se: the CI of a value whose standard error was estimated with `dof` degrees of freedom (from
    a sample SD over k seeds or cells: k − 1). A normal quantile would treat that SD as exact."""
    half = student_t_quantile(dof) * se if se > 0 else 0.0
    return estimate - half, estimate + half


@dataclass(frozen=True)
class Interval:
    """A CI [low, high] with what its magnitude verdict needs. An end is open where a bound cut it (the optimiser,
    not the data, stopped there: the statistic may lie beyond it); `bounds` are the values the statistic can take
    and `positive` marks a scale parameter (the UNINFORMATIVE_* rules)."""

    low: float
    high: float
    open_low: bool = False
    open_high: bool = False
    bounds: tuple[float, float] = (-math.inf, math.inf)
    positive: bool = False

    def text(self, digits: int = 3) -> str:
        return f"[{self.low:.{digits}f}, {self.high:.{digits}f}]"

    def verdict(self, expect: str) -> str:
        """The direction verdict, an open end read as unbounded: where a bound cut the CI, the data did not."""
        low, high = (-math.inf if self.open_low else self.low), (math.inf if self.open_high else self.high)
        return verdict_from_interval(low, high, expect)

    def magnitude(self, paper: float | None) -> str:
        """Covers or excludes the paper's value, uninformative where it covers it but is too wide to have missed
        it, inconclusive without a finite CI or where the value lies beyond an open end."""
        if paper is None:
            return NO_PAPER_VALUE
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return INCONCLUSIVE
        if paper < self.low or paper > self.high:
            beyond_open = self.open_low if paper < self.low else self.open_high
            return INCONCLUSIVE if beyond_open else EXCLUDES_PAPER
        return UNINFORMATIVE if self.too_wide(paper) else COVERS_PAPER

    def too_wide(self, paper: float) -> bool:
        width, span = self.high - self.low, self.bounds[1] - self.bounds[0]
        if math.isfinite(span) and width > UNINFORMATIVE_SHARE * span:
            return True
        if self.positive:
            return self.low <= 0 or math.log10(self.high / self.low) > UNINFORMATIVE_DECADES
        return not math.isfinite(span) and width > UNINFORMATIVE_PAPER_MULTIPLE * abs(paper)


def magnitude_from_interval(low: float, high: float, paper: float | None, **scale) -> str:
    """`Interval(low, high, **scale).magnitude(paper)`: covers paper, excludes paper, uninformative or
    inconclusive; `scale` as Interval's (bounds, positive, open ends), a signed unbounded statistic without it."""
    return Interval(low, high, **scale).magnitude(paper)


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


def resampled_pooled_slopes(
    frame: pd.DataFrame, x: str, y: str, by, rows: np.ndarray, *, log_x: bool = True, log_y: bool = True
) -> np.ndarray:
    """`pooled_slope` of each resample of `frame`, given as a (draws, n) array of row positions: all at once, as
    row multiplicities per group, instead of a groupby per draw (1000 of those took seconds per claim)."""
    gx = frame[x].to_numpy(float)
    gy = frame[y].to_numpy(float)
    gx, gy = (np.log(gx) if log_x else gx), (np.log(gy) if log_y else gy)
    groups = frame.groupby(by, sort=False).ngroup().fillna(-1).to_numpy(int)
    member = groups[:, None] == np.arange(groups.max() + 1)  # (n, groups)
    draws = np.arange(len(rows))[:, None]
    counts = np.zeros(rows.shape)
    np.add.at(counts, (draws, rows), 1.0)  # (draws, n): how often each row was drawn
    size = counts @ member
    kept = size >= 2
    weight = counts * (kept[:, groups] & (groups >= 0))  # rows with a missing key are in no group

    def deviations(values):
        means = np.divide((counts * values) @ member, size, out=np.zeros_like(size), where=kept)
        return values - means[:, groups]

    x_dev, y_dev = deviations(gx), deviations(gy)
    sxy, sxx = (weight * x_dev * y_dev).sum(axis=1), (weight * x_dev * x_dev).sum(axis=1)
    return np.divide(sxy, sxx, out=np.full_like(sxx, np.nan), where=sxx > 0)


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
    rows = np.random.default_rng(seed).integers(0, len(frame), (bootstrap, len(frame)))
    low, high = np.nanpercentile(resampled_pooled_slopes(frame, x, y, by, rows, log_x=log_x), [2.5, 97.5])
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
    """A fitted exponent has the paper's (positive) sign, decided by its bootstrap CI, and `paper`'s size, read
    off the same CI (`parameter_interval`).

    A parameter pinned at its bound leaves the direction inconclusive whatever its CI, since the optimum lies
    outside the law's range; the magnitude is still read, with the CI's end at that bound open, so a paper value
    beyond the other end stays excluded. A CI that only reaches a bound is read as open there (`Interval.verdict`)
    and the statistic says so: the bound cut off part of the bootstrap's spread. Where the law bounds the
    parameter at 0 or above, no fit can show the opposite sign (only the bound): the statistic says the test is
    one-sided.
    """
    interval = parameter_interval(fit, name)
    _, _, reached = ci_within_bounds(fit, name)
    statistic = f"{name} = {fit.params[name]:.3f}, R² = {fit.r2:.2f}"
    if fit.at_bound(name):
        verdict = INCONCLUSIVE
        statistic += " (at its bound)"
    else:
        verdict = interval.verdict("positive")
        statistic += "".join(f" (CI reaches its bound {bound:g})" for bound in reached)
    if interval.bounds[0] >= 0:
        statistic += f"; one-sided: the law keeps {name} ≥ {interval.bounds[0]:g}, so no fit shows it negative"
    return claim(
        study,
        text,
        statistic=statistic,
        ci=interval.text(),
        verdict=verdict,
        paper=paper,
        magnitude=interval.magnitude(paper),
    )


def parameter_interval(fit, name: str) -> Interval:
    """`name`'s bootstrap CI (`ci_within_bounds`) within the law's bounds, open at an end where a bound cut it: the
    CI reaches that bound, or the fitted value sits on it. A parameter bounded at 0 or above is a positive scale
    parameter."""
    low, high, reached = ci_within_bounds(fit, name)
    param = next((param for param in fit.law.params if param.name == name), None)
    if param is None:
        return Interval(low, high)
    value, pinned = fit.params[name], fit.at_bound(name)
    pinned_low = pinned and abs(value - param.low) <= abs(value - param.high)
    return Interval(
        low,
        high,
        open_low=param.low in reached or pinned_low,
        open_high=param.high in reached or (pinned and not pinned_low),
        bounds=(param.low, param.high),
        positive=param.low >= 0,
    )


def parameter_difference(first, first_name: str, second, second_name: str) -> Interval:
    """first's `first_name` − second's `second_name`, its CI the difference of the two CIs' far ends (wider than
    the difference's own: the two fits' bootstraps are not paired), open where an end it came from is. A signed
    statistic without bounds of its own: the two ranges' difference is an artefact of the laws' bounds (for two
    exponents in [0.1, 20], ±19.9), so the paper's value is its scale."""
    a, b = parameter_interval(first, first_name), parameter_interval(second, second_name)
    return Interval(
        a.low - b.high, a.high - b.low, open_low=a.open_low or b.open_high, open_high=a.open_high or b.open_low
    )


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
    header = [
        "study", "claim", "statistic", "95 % CI", "direction", "paper", "magnitude", "σ_seed held to",
        "expected effect", "min. detectable", "scale",
    ]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in frame.itertuples(index=False):
        cells = [
            row.study, row.claim, row.statistic, row.ci, f"**{row.verdict}**", row.paper, row.magnitude, row.noise,
            row.expected_effect, row.min_detectable, row.scale,
        ]  # fmt: skip
        # A "|" inside a cell (e.g. "|ρ| < 0.5") would otherwise end the cell.
        lines.append("| " + " | ".join(str(cell).replace("|", r"\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"
