"""Every verdict of every claim is reachable: per claim of the ladder, Kumar et al. 2024 (PTQ) and Ouyang et al.
2024, synthetic inputs that give reproduced, not reproduced and inconclusive (a claim where one is structurally
impossible says why in its row, and the test checks that it does). Each docstring names what 53d1b33 did instead
where this changed it. Claims tested where their study's other tests live: Kumar's critical data size
(tests/test_kumar2024_truth.py), Ouyang's weight changes (tests/test_ouyang2024_truth.py)."""

import functools
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from qscaling.config import Training
from qscaling.laws import LAWS, Fit
from qscaling.laws.baseline import CHINCHILLA
from qscaling.laws.chen2025 import QAT
from qscaling.laws.kumar2024 import PTQ
from qscaling.laws.ouyang2024 import UNIFIED_CONSTANTS
from qscaling.studies.claims import positive_parameter_claim
from qscaling.studies.kumar2024 import analysis as kumar
from qscaling.studies.ladder import analysis as ladder
from qscaling.studies.ouyang2024 import analysis as ouyang
from qscaling.studies.ouyang2024 import bitnet

SIZES = (2e4, 4e4, 8e4, 2e5)


class FitParts(SimpleNamespace):
    """The parts of a Fit a claim reads, with Fit's own note predicates."""

    at_bound = Fit.at_bound
    held_fixed = Fit.held_fixed


def pinned(name: str, value: float) -> str:
    """A fit's note that `name` sits on its bound, as the fitter writes it."""
    return f"{name} = {value:g} is at its bound"


# The ladder ----------------------------------------------------------------------------------------------------

RECIPE = Training.model_construct(lr=6e-3, lr_reference_params=1e5, lr_exponent=0.6)


def lr_sweep(exponent: float, jitter=(1.0, 1.0, 1.0, 1.0), edge: bool = False) -> pd.DataFrame:
    """LR sweep rows of four sizes whose optimum follows LR* ∝ N^−exponent (times `jitter`), swept at ¼–4× the
    recipe's LR; with `edge`, the largest size's optimum lies beyond the swept range."""
    rows = []
    for n, factor in zip(SIZES, jitter):
        optimum = 6e-3 * (n / 1e5) ** -exponent * factor * (100.0 if edge and n == SIZES[-1] else 1.0)
        for multiplier in (0.25, 0.5, 1.0, 2.0, 4.0):
            lr = RECIPE.peak_lr(n) * multiplier
            rows.append({"N": n, "lr": lr, "loss": 3.0 + 0.1 * math.log(lr / optimum) ** 2, "variant": "lr_sweep"})
    return ladder.lr_sweep_table(pd.DataFrame(rows), RECIPE)


@pytest.mark.parametrize(
    "sweep, verdict",
    [
        (lambda: lr_sweep(0.6, (1.02, 0.98, 1.01, 0.99)), "reproduced"),
        (lambda: lr_sweep(0.2, (1.02, 0.98, 1.01, 0.99)), "not reproduced"),
        (lambda: lr_sweep(0.6, (0.5, 1.8, 0.6, 1.0)), "inconclusive"),  # CI holds 0 and 0.6
        (lambda: lr_sweep(0.6, edge=True), "inconclusive"),
    ],
)
def test_ladder_lr_recipe(sweep, verdict):
    """At 53d1b33 a CI holding the recipe's exponent was "reproduced" even where it held 0 too ([−0.02, 1.13]
    in the reference run), and nothing was "not reproduced"."""
    row = ladder.lr_recipe_claim(sweep(), RECIPE)
    assert row["verdict"] == verdict, row
    if "holds 0" in row["statistic"]:
        low, high = (float(x) for x in row["ci"].split(" (")[0].strip("[]").split(", "))
        assert low <= 0 <= high and low <= 0.6 <= high


def chinchilla_fit(alpha_ci, *, alpha=0.3, notes=()) -> FitParts:
    params = {"A": 40.0, "alpha": alpha, "B": 300.0, "beta": 0.37, "E": 1.8}
    ci = {"alpha": alpha_ci, "E": (1.5, 2.0), "beta": (0.3, 0.4)}
    return FitParts(law=CHINCHILLA, params=params, ci=ci, r2=0.99, notes=list(notes))


@pytest.mark.parametrize(
    "fit, verdict",
    [
        (chinchilla_fit((0.2, 0.4)), "reproduced"),
        (chinchilla_fit((0.07, 0.5)), "not reproduced"),
        (chinchilla_fit((2.9, 3.0), alpha=3.0, notes=[pinned("alpha", 3.0)]), "inconclusive"),
        (chinchilla_fit((0.5, 3.0), alpha=1.0), "inconclusive"),  # above the target only up to the bound
    ],
)
def test_ladder_alpha_identified(fit, verdict):
    """At 53d1b33 a CI reaching below the target was "inconclusive": the design target, a fact about the CI,
    could not be missed."""
    assert ladder.alpha_identified_claim(fit, None)["verdict"] == verdict


def heldout_fit(errors: dict[float, float]) -> FitParts:
    return FitParts(
        heldout_relative_error=float(np.mean(list(errors.values()))),
        heldout_by_group={f"{n:g}": e for n, e in errors.items()},
        notes=[],
    )


def loss_rows(relative_se: float) -> pd.DataFrame:
    return pd.DataFrame({"N": np.repeat(SIZES, 3), "loss": 4.0, "loss_se": 4.0 * relative_se})


@pytest.mark.parametrize(
    "errors, relative_se, verdict",
    [
        ((0.01, 0.02, 0.015, 0.005), 0.001, "reproduced"),
        ((0.04, 0.02, 0.014, 0.005), 0.001, "not reproduced"),  # mean 1.9 %, one size at 4 %
        ((0.031, 0.02, 0.014, 0.005), 0.002, "inconclusive"),  # 3.1 % ± 0.4 %
    ],
)
def test_ladder_heldout(errors, relative_se, verdict):
    """At 53d1b33 the mean error decided: the reference run's 2.24 % was "reproduced" with N21k alone at 4.0 %."""
    row = ladder.heldout_claim(heldout_fit(dict(zip(SIZES, errors))), loss_rows(relative_se))
    assert row["verdict"] == verdict, row
    no_error = FitParts(heldout_relative_error=None, heldout_by_group={}, notes=["held-out: too few sizes"])
    assert ladder.heldout_claim(no_error, loss_rows(0.001))["verdict"] == "inconclusive"


# Every fitted exponent claimed positive (ladder α, β; Kumar γ_D, γ_N; Ouyang β, α, γ; Chen γ_N, γ_D, γ_G) ---------

EXPONENTS = [
    ("chinchilla", "alpha", ladder.EPOCH_AI["alpha"]),
    ("chinchilla", "beta", ladder.EPOCH_AI["beta"]),
    ("kumar2024.ptq", "gamma_D", PTQ.paper_params["table2"]["gamma_D"]),
    ("kumar2024.ptq", "gamma_N", PTQ.paper_params["table2"]["gamma_N"]),
    *(("ouyang2024.qid", name, UNIFIED_CONSTANTS[name]) for name in ("beta", "alpha", "gamma")),
    *(("chen2025.qat", name, QAT.paper_params["W4A4"][name]) for name in ("gamma_N", "gamma_D", "gamma_G")),
]


def exponent_fit(law_name: str, name: str, value: float, ci, notes=()) -> FitParts:
    law = LAWS[law_name]
    params = {param.name: param.start[0] for param in law.params} | {name: value}
    return FitParts(law=law, params=params, ci={name: ci}, r2=0.9, notes=list(notes))


@pytest.mark.parametrize("law_name, name, paper", EXPONENTS, ids=lambda v: str(v))
def test_fitted_exponents(law_name, name, paper):
    """Reproduced where the CI excludes 0, inconclusive where a bound cut it; never "not reproduced", since each
    law keeps its exponent at or above a bound ≥ 0, which the row says. At 53d1b33 a pinned exponent (Kumar's γ_N
    = 0, CI [0, 0.045], paper 0.344) read magnitude "inconclusive" and a CI from 0 covering the paper (Ouyang's α
    [0, 0.44], Chen's γ_G [0, 3.54]) read "covers paper"."""
    bound = next(param.low for param in LAWS[law_name].params if param.name == name)

    def row(value, ci, notes=()):
        return positive_parameter_claim("test", name, exponent_fit(law_name, name, value, ci, notes), name, paper)

    found = row(paper, (0.9 * paper, 1.1 * paper))
    assert (found["verdict"], found["magnitude"]) == ("reproduced", "covers paper")
    assert f"one-sided: the law keeps {name} ≥ {bound:g}" in found["statistic"]
    assert row(3 * paper, (2.5 * paper, 3.5 * paper))["magnitude"] == "excludes paper"
    reaching = row(paper / 2, (bound, 1.2 * paper))
    assert (reaching["verdict"], reaching["magnitude"]) == ("inconclusive", "uninformative")
    pinned_low = row(bound, (bound, bound + 0.1 * paper), notes=[pinned(name, bound)])
    assert (pinned_low["verdict"], pinned_low["magnitude"]) == ("inconclusive", "excludes paper")


# Kumar et al. 2024 (PTQ) ----------------------------------------------------------------------------------------

BUDGETS = (2.5e5, 5e5, 1e6, 2e6, 4e6)


def ptq_table(delta, *, methods=("gptq",), anneal="wsd", main=True, seed=0) -> pd.DataFrame:
    """A main-grid PTQ table over SIZES × BUDGETS × INT3–6 with δ = `delta(N, D, bits, method, rng)`."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in SIZES:
        for d in BUDGETS:
            base = {
                "N": n,
                "D": d,
                "split": "val",
                "anneal": anneal,
                "main": main,
                "repeat": False,
                "run": f"{anneal}-{n:g}-{d:g}",
            }
            for method in methods:
                for bits in (3, 4, 5, 6):
                    value = float(delta(n, d, bits, method, rng))
                    rows.append({**base, "method": method, "bits": bits, "delta": value, "delta_se": 1e-3 * value})
    return pd.DataFrame(rows)


def power_law(d_exponent=0.5, n_exponent=-0.3, bits_slope=-1.7, noise=0.02):
    return lambda n, d, bits, method, rng: (
        (d / 1e6) ** d_exponent * (n / 1e5) ** n_exponent * math.exp(bits_slope * (bits - 3)) * rng.lognormal(0, noise)
    )


@pytest.mark.parametrize(
    "law, verdict",
    [
        (power_law(d_exponent=0.5, n_exponent=-0.34, bits_slope=-1.7), "reproduced"),
        (power_law(d_exponent=-0.5, n_exponent=0.3, bits_slope=1.0), "not reproduced"),
        (power_law(d_exponent=0.0, n_exponent=0.0, bits_slope=0.0, noise=2.0), "inconclusive"),
    ],
)
def test_kumar_slopes(law, verdict, monkeypatch):
    """δ_PTQ's trends in D, bits and N (fewer bootstrap draws than the claims table's, for speed)."""
    monkeypatch.setattr(kumar, "slope_claim", functools.partial(kumar.slope_claim, bootstrap=200))
    rows = kumar.slope_claims(ptq_table(law))
    assert [row["verdict"] for row in rows] == [verdict] * 3, rows


def schedule_table(factors) -> pd.DataFrame:
    """The main WSD grid and a cosine ablation at the smallest size whose δ is the WSD δ times factors[budget]."""
    wsd = ptq_table(power_law(noise=0.0))
    cosine = wsd[wsd["N"] == SIZES[0]].assign(anneal="cosine", main=False)
    scale = cosine["D"].map(dict(zip(BUDGETS, factors)))
    return pd.concat([wsd, cosine.assign(delta=cosine["delta"] * scale, delta_se=cosine["delta_se"] * scale)])


@pytest.mark.parametrize(
    "factors, verdict",
    [
        ((1.9, 2.1, 2.0, 1.95, 2.05), "reproduced"),
        ((1.02, 0.97, 1.01, 0.99, 1.03), "not reproduced"),  # within 0.8–1.25
        ((0.6, 1.5, 0.9, 1.3, 0.8), "inconclusive"),
    ],
)
def test_kumar_schedule(factors, verdict):
    """At 53d1b33 the claim was reproduced or inconclusive only, its bootstrap over (N, D, bits) cells blind to
    the run-to-run noise that separately trained models carry (a model's bits share it)."""
    row = kumar.schedule_claim(schedule_table(factors))
    assert row["verdict"] == verdict, row
    assert "t over run pairs" in row["ci"] and "5 run pairs" in row["statistic"]


def method_law(awq_excess: float, rtn_excess: float, noise: float = 0.0):
    """δ of GPTQ from the power law; AWQ's and RTN's add `*_excess` of GPTQ's δ, plus `noise` of it."""
    base = power_law(noise=0.0)

    def delta(n, d, bits, method, rng):
        excess = {"gptq": 0.0, "awq": awq_excess, "rtn": rtn_excess}[method]
        return base(n, d, bits, method, rng) * (1 + excess + noise * rng.standard_normal())

    return delta


@pytest.mark.parametrize(
    "law, verdict",
    [
        (method_law(0.2, 0.5), "reproduced"),
        (method_law(-0.2, 0.5), "not reproduced"),
        (method_law(0.0, 0.5, noise=0.3), "inconclusive"),
    ],
)
def test_kumar_method_order(law, verdict):
    """At 53d1b33 the order of the three means decided, with no interval: GPTQ won only 76 % of the reference
    run's cells against AWQ."""
    row = kumar.method_order_claim(ptq_table(law, methods=("gptq", "awq", "rtn")))
    assert row["verdict"] == verdict, row
    assert "t over 20 checkpoints" in row["ci"]
    assert kumar.method_order_claim(ptq_table(law, methods=("gptq", "awq"))) is None


# Ouyang et al. 2024 ---------------------------------------------------------------------------------------------

NO_WEIGHT_CHANGES = pd.DataFrame(columns=["run", "matrix", "D_from", "D_to", "relative_change"])


def qid_table(d_exponent: float, noise: float, seed: int = 0) -> pd.DataFrame:
    """GPTQ rows over SIZES × BUDGETS × 2–4 bits on the in-domain and out-of-domain sets, QiD ∝ D^d_exponent."""
    rng = np.random.default_rng(seed)
    rows = [
        {"N": n, "D": d, "bits": bits, "split": split, "method": "gptq",
         "delta": 0.05 * (d / 1e6) ** d_exponent * 2.0 ** (3 - bits) * rng.lognormal(0, noise), "delta_se": 1e-6}
        for n in SIZES for d in BUDGETS for bits in (2, 3, 4) for split in ("val", "ood")
    ]  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "d_exponent, noise, verdict",
    [(0.5, 0.05, "reproduced"), (-0.5, 0.05, "not reproduced"), (0.0, 2.0, "inconclusive")],
)
def test_ouyang_qid_grows_with_tokens_in_and_out_of_domain(d_exponent, noise, verdict, monkeypatch):
    monkeypatch.setattr(ouyang, "slope_claim", functools.partial(ouyang.slope_claim, bootstrap=200))
    rows = ouyang.claims({"table": qid_table(d_exponent, noise), "weight_changes": NO_WEIGHT_CHANGES}, {}, None)
    slopes = [row for row in rows if row["claim"].startswith("QiD grows with training tokens")]
    assert [row["verdict"] for row in slopes] == [verdict, verdict], slopes


def bitnet_curves(widening: float, seed_shift: float) -> pd.DataFrame:
    """Binned fp32 and BitNet curves of one size, the BitNet gap growing by `widening` over four spans; a second
    seed's gap grows by `seed_shift` more."""
    rows = []
    for seed, shift in ((0, 0.0), (1, seed_shift)):
        for b in range(4):
            common = {"size": "N3k", "N": 3000, "seed": seed, "bin": b, "D": 100.0 * (b + 1), "points": 5}
            gap = 0.05 + (widening + shift) * b / 3
            rows.append({**common, "precision": "fp32", "loss": 4 - 0.1 * b, "loss_se": 0.0})
            rows.append({**common, "precision": "bitnet", "loss": 4 - 0.1 * b + gap, "loss_se": 0.0})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("widening, verdict", [(0.3, "reproduced"), (-0.3, "not reproduced"), (0.05, "inconclusive")])
def test_ouyang_bitnet_gap_widens(widening, verdict):
    """σ_seed of the widening from 2 seeds (1 dof) is 0.014: at 53d1b33 a widening of 0.05 cleared 2 σ_seed and
    was "reproduced"; the t-quantile at 1 dof (12.7) leaves it inconclusive."""
    curves = bitnet_curves(widening, 0.02).replace({"fp32": bitnet.FULL, "bitnet": bitnet.BITNET})
    assert bitnet.bitnet_claim(curves, recipe_seed=0)["verdict"] == verdict


def test_docs_claims_goes_through_every_claim_of_the_reference_run():
    """docs/claims.md says, per claim, how each verdict is reached and what noise it is held to: none missing."""
    root = Path(__file__).resolve().parents[1]
    page = " ".join((root / "docs" / "claims.md").read_text().split())
    claims = pd.read_csv(root / "reference" / "default" / "results" / "claims.csv")
    missing = [text for text in claims["claim"] if f"**{' '.join(text.split())}**" not in page]
    assert not missing, missing
    assert page.count(". **") >= len(claims)
