"""Chen et al. 2025, "Scaling Law for Quantization-Aware Training": the QAT error δ_p(N, D, G).

δ_p = loss(QAT run) − loss(BF16 run); G is the quantization group size (per-channel / per-token: the row
length). Precisions are named W{weight bits}A{activation bits}; FC2_8bit keeps the FC2 (down-projection)
input at 8 bits.
"""

import math

import numpy as np

from qscaling.laws.baseline import CHEN2025_CHINCHILLA
from qscaling.laws.law import LINEAR_DEGRADATION_HUBER_DELTA, Law, PaperParams, Param

DECOMPOSITION_SLOPE = 0.906  # δ_W4A4 ≈ 0.906 (δ_W4A16 + δ_W16A4), Fig. 6
# R = δ_W16A4 / δ_W4A16 at G = 32 (Fig. 8): {D/N: R}, and the slope of log R on log(D/N) between them.
RATIO_AT_TOKENS_PER_PARAM = {100: 1.67, 1000: 1.20}
RATIO_SLOPE = math.log(1.20 / 1.67) / math.log(1000 / 100)
# Relative prediction error of the law (Table 2), of it without the D term (Table 4) and of the earlier laws
# Table 2 compares against (their forms, not an N-only law).
PREDICTION_ERROR = {
    "W4A4": {"with D": 0.047, "without D": 0.086, "earlier laws": 0.085},
    "W4A16": {"with D": 0.052, "without D": 0.138, "earlier laws": 0.193},
}

_TABLE1 = {
    "W4A4": (0.1582, 0.2186, 0.0745, 0.7779, "Chen et al. 2025, Table 1"),
    "W4A16": (0.2522, 0.3589, 0.1610, 0.3533, "Chen et al. 2025, Table 1"),
    "W16A4": (0.1004, 0.1816, 0.0331, 0.9812, "Chen et al. 2025, Table 1"),
    "W4A4_FC2_8bit": (0.3519, 0.2637, 0.0964, 0.3407, "Chen et al. 2025 (secondary source quoting the paper)"),
    "W16A4_FC2_8bit": (0.1273, 0.2347, 0.0827, 0.4491, "Chen et al. 2025 (secondary source quoting the paper)"),
}


def qat_error(p, x):
    """δ_p(N, D, G) = k · D^γ_D · (log2 G)^γ_G / N^γ_N  (Eq. 5)."""
    return p["k"] * x["D"] ** p["gamma_D"] * np.log2(x["G"]) ** p["gamma_G"] / x["N"] ** p["gamma_N"]


QAT = Law(
    name="chen2025.qat",
    formula="delta = k * D^gamma_D * log2(G)^gamma_G / N^gamma_N",
    params=(
        Param("k", 1e-8, 1e6, start=(1e-3, 10.0), log=True),
        Param("gamma_N", 0.0, 2.0, start=(0.05, 0.8)),
        Param("gamma_D", 0.0, 2.0, start=(0.01, 0.5)),
        Param("gamma_G", 0.0, 5.0, start=(0.1, 2.0)),
    ),
    inputs=("N", "D", "G"),
    target="delta",
    huber_delta=LINEAR_DEGRADATION_HUBER_DELTA,
    residuals="linear",  # δ is a difference of two trained runs' losses: seed noise makes small ones negative
    function=qat_error,
    identified_by={"gamma_N": ("N",), "gamma_D": ("D",), "gamma_G": ("G",)},
    paper_params={
        variant: PaperParams({"k": k, "gamma_N": g_n, "gamma_D": g_d, "gamma_G": g_g}, source)
        for variant, (k, g_n, g_d, g_g, source) in _TABLE1.items()
    },
    description="QAT error over model size, training tokens and group size; one variant per precision setup.",
)


def effective_parameter_multiplier(params, N, D, G, *, A=CHEN2025_CHINCHILLA["A"], alpha=CHEN2025_CHINCHILLA["alpha"]):
    """eff = N_eff / N = (A / (A + δ_p N^α))^(1/α): the model size whose BF16 loss equals the QAT loss (Sec. 5).

    Follows from A/(eff·N)^α = A/N^α + δ_p; A and α default to Chen et al.'s Chinchilla fit (Table 1).
    """
    delta = qat_error(params, {"N": N, "D": D, "G": G})
    return (A / (A + delta * np.asarray(N, dtype=float) ** alpha)) ** (1 / alpha)


def iso_error_slope(params) -> float:
    """d log D / d log N along a contour of constant δ_p: γ_N / γ_D (≈ 2.93 for W4A4)."""
    return params["gamma_N"] / params["gamma_D"]


def derived_quantities(law_name, params) -> dict[str, float]:
    """What `qscaling laws show` prints for the QAT law."""
    quantities = {"iso-error slope d log D / d log N": iso_error_slope(params)}
    for N, D in ((595e6, 100e9), (7e9, 1e12), (70e9, 15e12)):
        for G in (32, 128):
            x = {"N": N, "D": D, "G": G}
            quantities[f"delta at N = {N:.3g}, D = {D:.3g}, G = {G}"] = float(qat_error(params, x))
            quantities[f"N_eff/N at N = {N:.3g}, D = {D:.3g}, G = {G}"] = float(
                effective_parameter_multiplier(params, N, D, G)
            )
    return quantities
