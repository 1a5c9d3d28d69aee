"""Claims rows: the direction and magnitude verdicts, bound flags, tests that cannot fail, the rendered table."""

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from qscaling.laws import Fit, Law, Param
from qscaling.studies.claims import (
    COLUMNS,
    Interval,
    cannot_fail_claim,
    claim,
    claims_frame,
    magnitude_from_interval,
    parameter_difference,
    pooled_slope,
    positive_parameter_claim,
    render_markdown,
    resampled_pooled_slopes,
    slope_claim,
    student_t_quantile,
    t_interval,
)

LAW = Law(
    name="power",
    formula="y = A D^gamma",
    params=(Param("A", 1e-3, 1e3, start=(0.1, 10.0), log=True), Param("gamma", 0.0, 2.0, start=(0.1, 1.0))),
    inputs=("D",),
    target="y",
    function=lambda p, x: p["A"] * x["D"] ** p["gamma"],
)


class FitParts(SimpleNamespace):
    """The parts of a Fit that a parameter claim reads, with Fit's own note predicates."""

    at_bound = Fit.at_bound
    held_fixed = Fit.held_fixed


def fitted(gamma: float, ci: tuple[float, float], notes: tuple[str, ...] = ()) -> FitParts:
    return FitParts(law=LAW, params={"A": 1.0, "gamma": gamma}, ci={"gamma": ci}, r2=0.9, notes=list(notes))


def slope_frame(exponent: float) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        [
            {"N": n, "D": d, "delta": d**exponent * np.exp(rng.normal(0, 0.01))}
            for n in (1e4, 1e5)
            for d in np.geomspace(1e5, 1e7, 6)
        ]
    )


def test_a_ci_covering_the_paper_value():
    row = positive_parameter_claim("test", "gamma > 0", fitted(0.5, (0.4, 0.6)), "gamma", paper=0.5068)
    assert (row["verdict"], row["paper"], row["magnitude"]) == ("reproduced", "0.5068", "covers paper")


def test_a_ci_excluding_the_paper_value_keeps_its_direction_verdict():
    row = positive_parameter_claim("test", "gamma > 0", fitted(1.2, (1.1, 1.3)), "gamma", paper=0.5068)
    assert (row["verdict"], row["magnitude"]) == ("reproduced", "excludes paper")


def test_no_paper_value():
    row = positive_parameter_claim("test", "gamma > 0", fitted(0.5, (0.4, 0.6)), "gamma")
    assert (row["verdict"], row["paper"], row["magnitude"]) == ("reproduced", "", "no paper value")
    assert list(claims_frame([row], "smoke").columns) == COLUMNS


def test_a_ci_reaching_a_bound_is_flagged_and_read_at_the_bound():
    upper = positive_parameter_claim("test", "gamma > 0", fitted(1.8, (1.5, 2.0 * (1 - 1e-10))), "gamma", paper=1.9)
    assert "(CI reaches its bound 2)" in upper["statistic"]
    assert (upper["verdict"], upper["magnitude"], upper["ci"]) == ("reproduced", "covers paper", "[1.500, 2.000]")
    # Draws piled on the bound 0: the low end is the optimiser's stop, not evidence that gamma > 0; and a CI from 0
    # spans every decade below 0.4, so covering 0.3 says nothing about its size.
    lower = positive_parameter_claim("test", "gamma > 0", fitted(0.2, (1e-12, 0.4)), "gamma", paper=0.3)
    assert "(CI reaches its bound 0)" in lower["statistic"]
    assert (lower["verdict"], lower["magnitude"]) == ("inconclusive", "uninformative")


def test_a_ci_short_of_a_bound_is_not_flagged():
    row = positive_parameter_claim("test", "gamma > 0", fitted(0.2, (1e-6, 0.4)), "gamma")
    assert "bound " not in row["statistic"] and "at its bound" not in row["statistic"]


def test_a_point_at_its_bound_leaves_the_direction_inconclusive_and_an_exclusion_visible():
    """At 53d1b33 a parameter on its bound was inconclusive on both counts: Kumar's γ_N = 0 with CI [0, 0.045]
    read magnitude "inconclusive" against the paper's 0.344, seven times beyond the CI's far end."""
    pinned_low = fitted(0.0, (0.0, 0.045), notes=("gamma = 0 is at its bound (0, 2)",))
    row = positive_parameter_claim("test", "gamma > 0", pinned_low, "gamma", paper=0.3439)
    assert "(at its bound)" in row["statistic"]
    assert (row["verdict"], row["magnitude"]) == ("inconclusive", "excludes paper")
    # Inside the CI the bound's end spans every decade: no match either way.
    assert positive_parameter_claim("test", "g", pinned_low, "gamma", paper=0.02)["magnitude"] == "uninformative"
    pinned_high = fitted(2.0, (1.9, 2.0), notes=("gamma = 2 is at its bound (0, 2)",))
    row = positive_parameter_claim("test", "gamma > 0", pinned_high, "gamma", paper=0.5)
    assert (row["verdict"], row["magnitude"]) == ("inconclusive", "excludes paper")


def test_a_parameter_bounded_at_zero_says_its_test_is_one_sided():
    row = positive_parameter_claim("test", "gamma > 0", fitted(0.5, (0.4, 0.6)), "gamma")
    assert row["statistic"].endswith("one-sided: the law keeps gamma ≥ 0, so no fit shows it negative")


def test_slope_claim_compares_with_the_paper_slope():
    frame = slope_frame(0.5)
    near = slope_claim("test", "grows", frame, x="D", y="delta", by="N", expect="positive", paper=0.5)
    assert (near["verdict"], near["paper"], near["magnitude"]) == ("reproduced", "0.5", "covers paper")
    far = slope_claim("test", "grows", frame, x="D", y="delta", by="N", expect="positive", paper=0.8)
    assert (far["verdict"], far["paper"], far["magnitude"]) == ("reproduced", "0.8", "excludes paper")
    unmatched = slope_claim("test", "grows", frame, x="D", y="delta", by="N", expect="positive")
    assert unmatched["magnitude"] == "no paper value"
    too_few = slope_claim("test", "grows", frame.iloc[:2], x="D", y="delta", by="N", expect="positive", paper=0.5)
    assert (too_few["verdict"], too_few["magnitude"]) == ("inconclusive", "inconclusive")


def test_magnitude_from_interval():
    assert magnitude_from_interval(0.1, 0.3, 0.3) == "covers paper"
    assert magnitude_from_interval(0.1, 0.3, 0.31) == "excludes paper"
    assert magnitude_from_interval(float("nan"), float("nan"), 0.3) == "inconclusive"
    assert magnitude_from_interval(0.1, 0.3, None) == "no paper value"


def test_claim_checks_paper_and_magnitude_agree():
    with pytest.raises(ValueError, match="needs magnitude= one of"):
        claim("test", "x", statistic="s", ci="", verdict="reproduced", paper=0.5)
    with pytest.raises(ValueError, match="compares with a paper value; pass paper="):
        claim("test", "x", statistic="s", ci="", verdict="reproduced", magnitude="covers paper")
    written = claim("test", "x", statistic="s", ci="", verdict="reproduced", paper="≈ 0.5", magnitude="covers paper")
    assert written["paper"] == "≈ 0.5"


def test_cannot_fail_claim():
    row = cannot_fail_claim("test", "outliers matter", "every variant counts 0 outlier dimensions")
    assert row["verdict"] == "inconclusive" and row["magnitude"] == "no paper value"
    assert row["statistic"] == "every variant counts 0 outlier dimensions: the test cannot fail"


def test_render_markdown_shows_both_verdicts():
    rows = [
        positive_parameter_claim("test", "gamma > 0", fitted(0.5, (0.4, 0.6)), "gamma", paper=0.5068),
        claim("test", "no separation", statistic="ρ = 0.1", ci="|ρ| < 0.5", verdict="inconclusive"),
    ]
    header, rule, first, second = render_markdown(claims_frame(rows, "smoke")).splitlines()
    assert header == (
        "| study | claim | statistic | 95 % CI | direction | paper | magnitude | σ_seed held to | expected effect "
        "| min. detectable | scale |"
    )
    assert rule == "|---|---|---|---|---|---|---|---|---|---|---|"
    assert first.endswith("| **reproduced** | 0.5068 | covers paper |  |  |  | smoke |")
    assert r"\|ρ\| < 0.5" in second and second.count(" | ") == 10


def test_a_ci_too_wide_to_miss_the_paper_value_is_uninformative():
    """At 53d1b33 these read "covers paper": Kumar's training "N_eff/N at 8 bits" with CI [5e-28, 1], Chen's γ_G
    with [0, 3.54] and Ouyang's α with [0, 0.44]."""
    share_lost = Interval(5.38e-28, 1.0, bounds=(0.0, 1.0), positive=True)
    assert share_lost.magnitude(0.068) == "uninformative"
    assert Interval(0.0, 3.538, bounds=(0.0, 5.0), positive=True).magnitude(0.7779) == "uninformative"
    assert Interval(0.0, 0.439, bounds=(0.0, 2.0), positive=True).magnitude(0.2261) == "uninformative"
    # The ladder's α: within a decade and a sixth of its range.
    assert Interval(0.074, 0.541, bounds=(1e-3, 3.0), positive=True).magnitude(0.348) == "covers paper"


@pytest.mark.parametrize(
    "interval, paper, magnitude",
    [
        (Interval(0.0, 0.6, bounds=(-1.0, 1.0)), 0.5, "covers paper"),  # 30 % of the range
        (Interval(-0.2, 0.9, bounds=(-1.0, 1.0)), 0.5, "uninformative"),  # 55 % of it
        (Interval(0.1, 0.99, positive=True), 0.5, "covers paper"),  # under a decade
        (Interval(0.05, 0.6, positive=True), 0.5, "uninformative"),  # over one
        (Interval(-1.2, -0.5), -1.0, "covers paper"),  # signed: narrower than |paper|
        (Interval(-1.6, -0.1), -1.0, "uninformative"),  # wider
        (Interval(-1.6, -0.1), -2.0, "excludes paper"),  # however wide, a value outside is excluded
        (Interval(0.0, 0.04, open_low=True), 0.3, "excludes paper"),  # beyond the closed end
        (Interval(1.9, 2.0, open_high=True), 2.5, "inconclusive"),  # beyond the end a bound cut
        (Interval(-math.inf, 1.0), 0.5, "inconclusive"),
    ],
)
def test_the_magnitude_rule(interval, paper, magnitude):
    assert interval.magnitude(paper) == magnitude
    assert magnitude_from_interval(interval.low, interval.high, paper, bounds=interval.bounds,
                                   positive=interval.positive, open_low=interval.open_low,
                                   open_high=interval.open_high) == magnitude  # fmt: skip


def test_a_difference_of_parameters_is_open_where_either_end_is():
    weights = fitted(0.6, (0.5, 0.7))
    pinned = fitted(0.0, (0.0, 0.1), notes=("gamma = 0 is at its bound (0, 2)",))
    difference = parameter_difference(weights, "gamma", pinned, "gamma")
    assert (difference.low, difference.high) == pytest.approx((0.4, 0.7))
    assert (difference.open_low, difference.open_high, difference.positive) == (False, True, False)
    assert difference.magnitude(0.9) == "inconclusive" and difference.magnitude(0.2) == "excludes paper"
    # Its scale is the paper's value, not the ±2 the two bounds leave: 0.3 wide is too wide to match 0.25.
    assert difference.magnitude(0.6) == "covers paper" and difference.magnitude(0.45) == "covers paper"
    assert parameter_difference(weights, "gamma", fitted(0.4, (0.3, 0.45)), "gamma").magnitude(0.25) == (
        "uninformative"
    )


def test_intervals_from_few_seeds_use_the_t_quantile():
    """At 53d1b33 Ahmadian's weight-decay slope, +4.4e-4 nats per decade with a 3-seed σ, read ±1.96 SE:
    [2.1e-4, 6.6e-4]. With t at 2 dof it covers zero."""
    se = (6.62e-4 - 2.12e-4) / (2 * 1.96)
    low, high = t_interval(4.37e-4, se, dof=2)
    assert (low, high) == pytest.approx((-0.57e-4, 9.31e-4), abs=0.02e-4)
    assert student_t_quantile(2) == pytest.approx(4.303, abs=1e-3)
    assert student_t_quantile(1e9) == pytest.approx(1.960, abs=1e-3)
    assert student_t_quantile(0) == math.inf and t_interval(1.0, 0.0, dof=0) == (1.0, 1.0)


@pytest.mark.parametrize("log_x, log_y", [(True, True), (False, False)])
def test_resampled_pooled_slopes_are_the_pooled_slope_of_each_resample(log_x, log_y):
    """Duplicated rows, groups a resample leaves with one row or none, and a row whose group key is missing."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(
        {
            "method": ["a"] * 6 + ["b"] * 5 + ["c"] * 2 + [None],
            "bits": [3, 3, 3, 4, 4, 4, 3, 3, 3, 3, 3, 5, 5, 3],
            "N": rng.choice([2e4, 4e4, 8e4, 2e5], 14),
            "delta": rng.uniform(0.01, 0.3, 14),
        }
    )
    rows = rng.integers(0, len(frame), (300, len(frame)))
    by = ["method", "bits"]
    expected = [pooled_slope(frame.iloc[r], "N", "delta", by, log_x=log_x, log_y=log_y) for r in rows]
    got = resampled_pooled_slopes(frame, "N", "delta", by, rows, log_x=log_x, log_y=log_y)
    assert np.isnan(expected).any() and not np.isnan(expected).all()
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
