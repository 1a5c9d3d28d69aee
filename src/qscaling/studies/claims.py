"""The claims table: per claim of a paper, the statistic measured here, its CI, a verdict and the scale.

Verdicts are decided by the data, never tuned: `reproduced` when the CI excludes zero on the paper's side,
`not reproduced` when it excludes zero on the other side, `inconclusive` otherwise.
"""

import numpy as np
import pandas as pd

COLUMNS = ["study", "claim", "statistic", "ci", "verdict", "scale"]


def claim(study: str, text: str, *, statistic: str, ci: str, verdict: str) -> dict:
    return {"study": study, "claim": text, "statistic": statistic, "ci": ci, "verdict": verdict}


def verdict_from_interval(low: float, high: float, expect: str) -> str:
    if expect == "positive":
        return "reproduced" if low > 0 else ("not reproduced" if high < 0 else "inconclusive")
    return "reproduced" if high < 0 else ("not reproduced" if low > 0 else "inconclusive")


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
) -> dict:
    """The pooled within-group log-log slope of y on x, with a percentile bootstrap CI over rows."""
    frame = frame[frame[y] > 0]
    if len(frame) < 3:
        return claim(study, text, statistic=f"too few positive points ({len(frame)})", ci="", verdict="inconclusive")
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
    )


def positive_parameter_claim(study: str, text: str, fit, name: str) -> dict:
    """A fitted exponent has the paper's (positive) sign: decided by its bootstrap CI; a parameter pinned at its
    bound is inconclusive whatever its CI, since the optimum lies outside the law's range."""
    low, high = fit.ci[name]
    at_bound = any(note.startswith(f"{name} = ") and "at its bound" in note for note in fit.notes)
    verdict = "inconclusive" if at_bound else verdict_from_interval(low, high, "positive")
    statistic = f"{name} = {fit.params[name]:.3f}, R² = {fit.r2:.2f}" + (" (at its bound)" if at_bound else "")
    return claim(study, text, statistic=statistic, ci=f"[{low:.3f}, {high:.3f}]", verdict=verdict)


def claims_frame(rows: list[dict], scale: str) -> pd.DataFrame:
    return pd.DataFrame([{**row, "scale": scale} for row in rows], columns=COLUMNS)


def render_markdown(frame: pd.DataFrame) -> str:
    lines = ["| study | claim | statistic | 95 % CI | verdict | scale |", "|---|---|---|---|---|---|"]
    for row in frame.itertuples(index=False):
        lines.append(f"| {row.study} | {row.claim} | {row.statistic} | {row.ci} | **{row.verdict}** | {row.scale} |")
    return "\n".join(lines) + "\n"
