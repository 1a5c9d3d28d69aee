"""Sun et al. 2025, "Scaling Laws for Floating-Point Quantization Training": the Capybara law and its parts.

FP formats are ExMy (E exponent bits, M mantissa bits, one sign bit: P = E + M + 1 bits); B is the number of
consecutive elements sharing one scale. Constants are Table 2 of the paper.
"""

import math

import numpy as np
from scipy.optimize import minimize_scalar

from qscaling.laws.law import Law, PaperParams, Param

COMPUTE_PER_BIT = 6 / 16  # C = k·P·N·D with k = 6/16 (Sec. 5)
CHANNELWISE_LOG2_BLOCK = 13.1567  # channel-wise scaling behaves like a block of 2^13.1567 elements (Sec. 4)
TABLE2 = {
    "n": 69.2343, "alpha": 0.2368, "d": 68973.0621, "beta": 0.5162, "epsilon": 1.9061,
    "gamma": 11334.5197, "delta": 3.1926, "nu": 2.9543,
}  # fmt: skip


def data_size_terms(p, x):
    """n/N^α + d/D^β + ε, the BF16 part shared by every law here (Chinchilla form, Sec. 3.1)."""
    return p["n"] / x["N"] ** p["alpha"] + p["d"] / x["D"] ** p["beta"] + p["epsilon"]


def precision_weight(p, x):
    """D^β / N^α: the precision penalty grows with data and shrinks with size (Sec. 3.4)."""
    return x["D"] ** p["beta"] / x["N"] ** p["alpha"]


def capybara_loss(p, x):
    """L = n/N^α + d/D^β + ε + (D^β/N^α) · log2(B) / (γ (E+0.5)^δ (M+0.5)^ν)  (Eq. 7, "Capybara")."""
    format_term = p["gamma"] * (x["E"] + 0.5) ** p["delta"] * (x["M"] + 0.5) ** p["nu"]
    return data_size_terms(p, x) + precision_weight(p, x) * np.log2(x["B"]) / format_term


def exponent_loss(p, x):
    """The exponent-only law: mantissa and block fixed, so they fold into γ_E  (Sec. 3.2, Fig. 9 left)."""
    return data_size_terms(p, x) + precision_weight(p, x) / (p["gamma_E"] * (x["E"] + 0.5) ** p["delta"])


def mantissa_loss(p, x):
    """The mantissa-only law: exponent and block fixed, folded into γ_M  (Sec. 3.3, Fig. 9 right)."""
    return data_size_terms(p, x) + precision_weight(p, x) / (p["gamma_M"] * (x["M"] + 0.5) ** p["nu"])


def block_loss(p, x):
    """The block-size law: format fixed, folded into γ_B; penalty ∝ log2 B  (Sec. 3.4, Fig. 3)."""
    return data_size_terms(p, x) + precision_weight(p, x) * np.log2(x["B"]) / p["gamma_B"]


_BASE_PARAMS = (
    Param("n", 1e-3, 1e7, start=(1.0, 1e4), log=True),
    Param("alpha", 1e-2, 1.5, start=(0.1, 0.6)),
    Param("d", 1e-2, 1e10, start=(1e2, 1e7), log=True),
    Param("beta", 1e-2, 1.5, start=(0.2, 0.8)),
    Param("epsilon", 0.1, 10.0, start=(1.0, 3.0), log=True),
)
_GAMMA_RANGE = dict(low=1e-2, high=1e12, start=(1e2, 1e7), log=True)
_DELTA = Param("delta", 0.0, 10.0, start=(1.0, 5.0))
_NU = Param("nu", 0.0, 10.0, start=(1.0, 5.0))

# The sub-laws are Capybara with the swept factor kept and the others folded into one constant; their paper
# constants below are Table 2's evaluated at the sweeps' fixed settings (exponent sweep at M = 1, mantissa
# sweep at E = 1, block sweep in E1M1; E/M sweeps channel-wise — assumed (?)). The paper's own sub-law fits
# (γ, ι, κ of Figs. 9–11) were fitted separately and drift with N/D.
_SWEEP = {"E": 1, "M": 1, "log2_B": CHANNELWISE_LOG2_BLOCK}
_TABLE2_SOURCE = "Sun et al. 2025, Table 2"


def _folded(**kept):
    """Table 2's γ with the non-swept factors of the precision term folded in."""
    t = TABLE2
    folded = t["gamma"] / _SWEEP["log2_B"] if "B" not in kept else t["gamma"]
    if "E" not in kept:
        folded *= (_SWEEP["E"] + 0.5) ** t["delta"]
    if "M" not in kept:
        folded *= (_SWEEP["M"] + 0.5) ** t["nu"]
    return folded


# At one N, n/N^alpha is a constant beside epsilon and N^-alpha a factor gamma supplies (likewise d, beta at one D).
_BASE_IDENTIFIED_BY = {"n": ("N",), "alpha": ("N",), "d": ("D",), "beta": ("D",)}
_BASE_TABLE2 = {name: TABLE2[name] for name in ("n", "alpha", "d", "beta", "epsilon")}

CAPYBARA = Law(
    name="sun2025.capybara",
    formula="L = n/N^alpha + d/D^beta + epsilon + D^beta/N^alpha * log2(B) / (gamma (E+0.5)^delta (M+0.5)^nu)",
    params=_BASE_PARAMS + (Param("gamma", **_GAMMA_RANGE), _DELTA, _NU),
    inputs=("N", "D", "E", "M", "B"),
    target="loss",
    function=capybara_loss,
    identified_by={**_BASE_IDENTIFIED_BY, "delta": ("E",), "nu": ("M",)},
    paper_params={"table2": PaperParams(TABLE2, _TABLE2_SOURCE)},
    description="Loss of FP-quantized training over size, data, exponent and mantissa bits and block size.",
)
EXPONENT = Law(
    name="sun2025.exponent",
    formula="L = n/N^alpha + d/D^beta + epsilon + D^beta/N^alpha / (gamma_E (E+0.5)^delta)",
    params=_BASE_PARAMS + (Param("gamma_E", **_GAMMA_RANGE), _DELTA),
    inputs=("N", "D", "E"),
    target="loss",
    function=exponent_loss,
    identified_by={**_BASE_IDENTIFIED_BY, "delta": ("E",)},
    paper_params={
        "table2_M1_channel": PaperParams(
            {**_BASE_TABLE2, "gamma_E": _folded(E=True), "delta": TABLE2["delta"]},
            f"{_TABLE2_SOURCE} at M = 1, channel-wise scaling (derived)",
        )
    },
    description="Capybara restricted to an exponent-bits sweep.",
)
MANTISSA = Law(
    name="sun2025.mantissa",
    formula="L = n/N^alpha + d/D^beta + epsilon + D^beta/N^alpha / (gamma_M (M+0.5)^nu)",
    params=_BASE_PARAMS + (Param("gamma_M", **_GAMMA_RANGE), _NU),
    inputs=("N", "D", "M"),
    target="loss",
    function=mantissa_loss,
    identified_by={**_BASE_IDENTIFIED_BY, "nu": ("M",)},
    paper_params={
        "table2_E1_channel": PaperParams(
            {**_BASE_TABLE2, "gamma_M": _folded(M=True), "nu": TABLE2["nu"]},
            f"{_TABLE2_SOURCE} at E = 1, channel-wise scaling (derived)",
        )
    },
    description="Capybara restricted to a mantissa-bits sweep.",
)
BLOCK = Law(
    name="sun2025.block",
    formula="L = n/N^alpha + d/D^beta + epsilon + D^beta/N^alpha * log2(B) / gamma_B",
    params=_BASE_PARAMS + (Param("gamma_B", **_GAMMA_RANGE),),
    inputs=("N", "D", "B"),
    target="loss",
    function=block_loss,
    identified_by=_BASE_IDENTIFIED_BY,
    paper_params={
        "table2_E1M1": PaperParams({**_BASE_TABLE2, "gamma_B": _folded(B=True)}, f"{_TABLE2_SOURCE} in E1M1 (derived)")
    },
    description="Capybara restricted to a block-size sweep.",
)


def format_factor(params, E, M):
    """(E+0.5)^δ (M+0.5)^ν: the larger, the smaller the precision penalty (Fig. 5's y-axis)."""
    return (np.asarray(E, dtype=float) + 0.5) ** params["delta"] * (np.asarray(M, dtype=float) + 0.5) ** params["nu"]


def optimal_mantissa(params, total_bits):
    """Continuous optimum M = ν P / (δ + ν) − 0.5 for P = E + M + 1 bits (Sec. 4.1)."""
    return params["nu"] * total_bits / (params["delta"] + params["nu"]) - 0.5


def optimal_layout(params, total_bits: int) -> tuple[int, int]:
    """(E, M) with E + M + 1 = total_bits maximising the format factor; E2M1, E4M3, E8M7 for FP4/8/16."""
    if total_bits < 1:
        raise ValueError(f"total_bits must be >= 1 (sign bit included), got {total_bits}")
    mantissas = np.arange(total_bits)
    best = int(np.argmax(format_factor(params, total_bits - 1 - mantissas, mantissas)))
    return int(total_bits - 1 - mantissas[best]), int(mantissas[best])


def critical_data_size(params, N, E, M, block_size):
    """Training tokens beyond which more data raises the loss: dL/dD = 0 gives
    D_crit = [d γ N^α (E+0.5)^δ (M+0.5)^ν / log2 B]^(1/(2β))  (Sec. 4.2)."""
    numerator = params["d"] * params["gamma"] * np.asarray(N, dtype=float) ** params["alpha"]
    return (numerator * format_factor(params, E, M) / np.log2(block_size)) ** (1 / (2 * params["beta"]))


def _best_split_factor(params, P):
    """Format factor at the continuous optimal split: (δP/(δ+ν))^δ (νP/(δ+ν))^ν."""
    total = params["delta"] + params["nu"]
    return (params["delta"] * P / total) ** params["delta"] * (params["nu"] * P / total) ** params["nu"]


def loss_at_precision(params, N, D, P, block_size):
    """Capybara loss at P total bits split optimally between exponent and mantissa."""
    x = {"N": N, "D": D}
    penalty = np.log2(block_size) / (params["gamma"] * _best_split_factor(params, P))
    return data_size_terms(params, x) + precision_weight(params, x) * penalty


def optimal_precision_fixed_size(params, compute, N, block_size=128):
    """P_opt for a fixed N under C = k P N D: P^(2β+δ+ν) = (β+δ+ν)/β · (C/kN)^(2β) N^−α log2 B / (γ c d),
    c = (δ/(δ+ν))^δ (ν/(δ+ν))^ν — the paper's P^(δ+ν+2β) N^(α+2β) ∝ C^(2β) (Sec. 5)."""
    a, b, dl, nu = params["alpha"], params["beta"], params["delta"], params["nu"]
    c = _best_split_factor(params, 1.0)
    rhs = (b + dl + nu) / b * (np.asarray(compute, dtype=float) / (COMPUTE_PER_BIT * N)) ** (2 * b)
    rhs = rhs * N**-a * np.log2(block_size) / (params["gamma"] * c * params["d"])
    return rhs ** (1 / (2 * b + dl + nu))


def optimal_precision_fixed_data(params, D, block_size=128):
    """P_opt for fixed D (N = C / kPD): P^(δ+ν) = (δ+ν−α)/α · D^β log2 B / (γ c n) — independent of C."""
    a, dl, nu = params["alpha"], params["delta"], params["nu"]
    c = _best_split_factor(params, 1.0)
    rhs = (dl + nu - a) / a * np.asarray(D, dtype=float) ** params["beta"] * np.log2(block_size)
    with np.errstate(invalid="ignore"):  # δ + ν ≤ α: no optimum (NaN), as a fit with ν on its 0 bound can give
        return (rhs / (params["gamma"] * c * params["n"])) ** (1 / (dl + nu))


def optimal_precision_joint(params, compute, block_size=128) -> tuple[float, float, float]:
    """(P, N, D) minimising the loss at compute C = k P N D over all three (Sec. 5, Fig. 7)."""

    def best_size(P):
        def loss(log_N):
            N = math.exp(log_N)
            return float(loss_at_precision(params, N, compute / (COMPUTE_PER_BIT * P * N), P, block_size))

        upper = math.log(compute / (COMPUTE_PER_BIT * P))  # D ≥ 1 token
        found = minimize_scalar(loss, bounds=(math.log(1e3), upper), method="bounded", options={"xatol": 1e-9})
        return found.fun, math.exp(found.x)

    found = minimize_scalar(lambda P: best_size(P)[0], bounds=(1.0, 64.0), method="bounded", options={"xatol": 1e-7})
    P = float(found.x)
    N = best_size(P)[1]
    return P, N, compute / (COMPUTE_PER_BIT * P * N)


def derived_quantities(law_name, params) -> dict[str, float | str]:
    """What `qscaling laws show` prints for the Capybara law."""
    if law_name != CAPYBARA.name:
        return {}
    quantities = {}
    for bits in (4, 8, 16):
        E, M = optimal_layout(params, bits)
        quantities[f"optimal layout FP{bits}"] = f"E{E}M{M}"
        quantities[f"D_crit N = 1e9, B = 128, E{E}M{M} (tokens)"] = float(critical_data_size(params, 1e9, E, M, 128))
    for compute in (1e21, 1e25, 1e31):
        quantities[f"P_opt joint at C = {compute:.0e} (bits)"] = optimal_precision_joint(params, compute)[0]
    return quantities
