"""Claims rows: the direction and magnitude verdicts, bound flags, tests that cannot fail, the rendered table."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from qscaling.laws import Fit, Law, Param
from qscaling.studies.claims import (
    COLUMNS,
    cannot_fail_claim,
    claim,
    claims_frame,
    magnitude_from_interval,
    positive_parameter_claim,
    render_markdown,
    slope_claim,
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
    assert upper["statistic"].endswith("(CI reaches its bound 2)")
    assert (upper["verdict"], upper["magnitude"], upper["ci"]) == ("reproduced", "covers paper", "[1.500, 2.000]")
    # Draws piled on the bound 0: the low end is the optimiser's stop, not evidence that gamma > 0.
    lower = positive_parameter_claim("test", "gamma > 0", fitted(0.2, (1e-12, 0.4)), "gamma", paper=0.3)
    assert lower["statistic"].endswith("(CI reaches its bound 0)")
    assert (lower["verdict"], lower["magnitude"]) == ("inconclusive", "covers paper")


def test_a_ci_short_of_a_bound_is_not_flagged():
    row = positive_parameter_claim("test", "gamma > 0", fitted(0.2, (1e-6, 0.4)), "gamma")
    assert "bound" not in row["statistic"]


def test_a_point_at_its_bound_is_inconclusive_on_both_counts():
    at_bound = fitted(2.0, (1.9, 2.0), notes=("gamma = 2 is at its bound (0, 2)",))
    row = positive_parameter_claim("test", "gamma > 0", at_bound, "gamma", paper=0.5)
    assert "(at its bound)" in row["statistic"]
    assert (row["verdict"], row["magnitude"]) == ("inconclusive", "inconclusive")


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
    assert header == "| study | claim | statistic | 95 % CI | direction | paper | magnitude | scale |"
    assert rule == "|---|---|---|---|---|---|---|---|"
    assert first.endswith("| **reproduced** | 0.5068 | covers paper | smoke |")
    assert r"\|ρ\| < 0.5" in second and second.count(" | ") == 7
