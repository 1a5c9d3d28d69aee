"""Kumar et al. 2024, "Scaling Laws for Precision": δ_PTQ, effective parameters N_eff and the unified law.

Constants are Table 2 of the paper. Precisions are bits; a tensor kept in high precision is P = inf.
"""

import math

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from qscaling.laws.baseline import KUMAR2024_CHINCHILLA
from qscaling.laws.law import DEGRADATION_HUBER_DELTA, Law, PaperParams, Param

TENSORS = ("w", "a", "kv")  # weights, activations, KV cache — each with its own γ_x and offset n_x
COMPUTE_PER_BIT = 6 / 16  # C = (6/16)·N·D·P: 6ND FLOPs at 16 bits, scaled linearly in bits (Sec. 4.3)

_NEFF_CONSTANTS = {
    "gamma_w": 2.6745, "n_w": 0.3037,
    "gamma_a": 2.2102, "n_a": 1.4072,
    "gamma_kv": 0.9578, "n_kv": 2.4185,
}  # fmt: skip
_PTQ_CONSTANTS = {"C_T": 0.0598, "gamma_D": 0.5068, "gamma_N": 0.3439, "gamma_post": 0.5907}
# Table 2 prints "b = 1.1277" beside γ_post without saying which term it offsets or its sign (papers.md);
# read as an offset added in the exponent, e^(−P/γ_post + b), it is a factor e^b on C_T, not identifiable apart from C_T.
PTQ_OFFSET_B = 1.1277
# C_x of the unified law's training/post-training interaction are not reported; 1.0 is an assumption (?)
# chosen so the interaction saturates within a few bits of P_post, as Fig. 7's heatmaps suggest.
_ASSUMED_INTERACTION = {"C_w": 1.0, "C_a": 1.0, "C_kv": 1.0}


# f_x ≤ 0 means no effective parameters left, i.e. unbounded loss; flooring f_x at this value keeps the
# law finite and continuous there, so an optimiser stepping into that region sees a steep wall, not NaN.
_LEAST_FRACTION = 1e-6


def precision_fraction(p, P, tensor):
    """f_x(P) = 1 − e^(−P/γ_x + n_x): the share of parameters a tensor at P bits keeps (Sec. 4.1, offsets per App.)."""
    return np.maximum(1 - np.exp(-P / p[f"gamma_{tensor}"] + p[f"n_{tensor}"]), _LEAST_FRACTION)


def effective_parameters(p, x):
    """N_eff = N · Π_{x∈w,a,kv} f_x(P_x)  (Eq. 4 with the fitted offsets)."""
    n_eff = x["N"]
    for tensor in TENSORS:
        n_eff = n_eff * precision_fraction(p, x[f"P_{tensor}"], tensor)
    return n_eff


def ptq_degradation(p, x):
    """δ_PTQ = C_T · D^γ_D / N^γ_N · e^(−P_post/γ_post)  (Eq. 2)."""
    return p["C_T"] * x["D"] ** p["gamma_D"] / x["N"] ** p["gamma_N"] * np.exp(-x["P_post"] / p["gamma_post"])


def training_precision_loss(p, x):
    """L = A·N_eff^−α + B·D^−α + E  (Eq. 5; α = β tied as in Table 2)."""
    return p["A"] * effective_parameters(p, x) ** -p["alpha"] + p["B"] * x["D"] ** -p["alpha"] + p["E"]


def unified_loss(p, x):
    """L = A·N_eff^−α + B·D^−α + E + δ_PTQ(N_eff, D, P_train, P_post)  (Eq. 7).

    δ_PTQ = C_T e^(−P_post/γ_post) (D^γ_D / N_eff^γ_N) Π_x [1 − e^(−C_x (P_x − P_post))]; no PTQ is
    P_post = inf, and a tensor trained at P_post bits loses nothing more (the factor is 0).
    """
    n_eff = effective_parameters(p, x)
    interaction = 1.0
    finite_post = np.isfinite(x["P_post"])
    for tensor in TENSORS:
        gap = np.where(finite_post, x[f"P_{tensor}"] - np.where(finite_post, x["P_post"], 0), np.inf)
        interaction = interaction * (1 - np.exp(-p[f"C_{tensor}"] * gap))
    post = np.where(finite_post, x["P_post"], np.inf)
    delta = p["C_T"] * np.exp(-post / p["gamma_post"]) * x["D"] ** p["gamma_D"] / n_eff ** p["gamma_N"] * interaction
    return training_precision_loss(p, x) + delta


_CHINCHILLA_PARAMS = (
    Param("A", 1e-3, 1e12, start=(10.0, 1e6), log=True),
    Param("alpha", 1e-2, 2.0, start=(0.1, 1.0)),
    Param("B", 1e-3, 1e12, start=(10.0, 1e6), log=True),
    Param("E", 1e-2, 20.0, start=(0.5, 4.0), log=True),
)
_NEFF_PARAMS = tuple(
    param
    for tensor in TENSORS
    for param in (
        Param(f"gamma_{tensor}", 0.1, 20.0, start=(0.5, 5.0), log=True),
        Param(f"n_{tensor}", -5.0, 5.0, start=(-1.0, 2.5)),
    )
)
_PTQ_PARAMS = (
    Param("C_T", 1e-10, 1e6, start=(1e-4, 10.0), log=True),
    Param("gamma_D", 0.0, 2.0, start=(0.1, 1.0)),
    Param("gamma_N", 0.0, 2.0, start=(0.1, 1.0)),
    Param("gamma_post", 0.05, 20.0, start=(0.2, 3.0), log=True),
)

_PRECISIONS = tuple(f"P_{tensor}" for tensor in TENSORS)
# N_eff = N·f(P_w)·f(P_a)·f(P_kv) varies with any of them; at one P_x, f_x is a constant factor A absorbs.
_NEFF_IDENTIFIED_BY = {
    "A": ("N", *_PRECISIONS),
    "alpha": ("N", "D", *_PRECISIONS),
    "B": ("D",),
    **{f"{name}_{tensor}": (f"P_{tensor}",) for tensor in TENSORS for name in ("gamma", "n")},
}

PTQ = Law(
    name="kumar2024.ptq",
    formula="delta = C_T * D^gamma_D / N^gamma_N * exp(-P_post/gamma_post)",
    params=_PTQ_PARAMS,
    inputs=("N", "D", "P_post"),
    infinite_allowed=("P_post",),
    target="delta",
    huber_delta=DEGRADATION_HUBER_DELTA,
    function=ptq_degradation,
    identified_by={"gamma_D": ("D",), "gamma_N": ("N",), "gamma_post": ("P_post",)},
    paper_params={
        "table2": PaperParams(_PTQ_CONSTANTS, "Kumar et al. 2024, Table 2; offset b = 1.1277 not applied"),
        "table2_offset": PaperParams(
            {**_PTQ_CONSTANTS, "C_T": _PTQ_CONSTANTS["C_T"] * math.exp(PTQ_OFFSET_B)},
            "Kumar et al. 2024, Table 2 with b = 1.1277 read as e^(-P/gamma_post + b), folded into C_T (inferred)",
        ),
    },
    description="Degradation from post-training quantization of a BF16-trained model to P_post bits.",
)

NEFF = Law(
    name="kumar2024.neff",
    formula="L = A*N_eff^-alpha + B*D^-alpha + E,  N_eff = N * prod_x (1 - exp(-P_x/gamma_x + n_x)), x in w,a,kv",
    params=_CHINCHILLA_PARAMS + _NEFF_PARAMS,
    inputs=("N", "D", "P_w", "P_a", "P_kv"),
    infinite_allowed=_PRECISIONS,
    target="loss",
    function=training_precision_loss,
    identified_by=_NEFF_IDENTIFIED_BY,
    paper_params={
        "table2": PaperParams({**KUMAR2024_CHINCHILLA, **_NEFF_CONSTANTS}, "Kumar et al. 2024, Table 2"),
        "fp_weights": PaperParams(
            {**KUMAR2024_CHINCHILLA, **_NEFF_CONSTANTS, "gamma_w": 2.8111, "n_w": 0.1240},
            "Kumar et al. 2024, Table 2 with the FP weight fit's gamma_w, n_w (Fig. 16)",
        ),
    },
    description="Loss of a model trained with weights, activations and KV cache quantized to P_w, P_a, P_kv bits.",
)

UNIFIED = Law(
    name="kumar2024.unified",
    formula=(
        "L = A*N_eff^-alpha + B*D^-alpha + E + C_T*exp(-P_post/gamma_post)*D^gamma_D/N_eff^gamma_N"
        " * prod_x (1 - exp(-C_x (P_x - P_post)))"
    ),
    params=_CHINCHILLA_PARAMS
    + _NEFF_PARAMS
    + _PTQ_PARAMS
    + tuple(Param(f"C_{tensor}", 1e-2, 1e2, start=(0.1, 10.0), log=True) for tensor in TENSORS),
    inputs=("N", "D", "P_w", "P_a", "P_kv", "P_post"),
    infinite_allowed=(*_PRECISIONS, "P_post"),
    target="loss",
    function=unified_loss,
    identified_by={
        **_NEFF_IDENTIFIED_BY,
        "gamma_D": ("D",),
        "gamma_N": ("N", *_PRECISIONS),
        "gamma_post": ("P_post",),
        **{f"C_{tensor}": (f"P_{tensor}", "P_post") for tensor in TENSORS},
    },
    paper_params={
        "table2_assumed_C": PaperParams(
            {**KUMAR2024_CHINCHILLA, **_NEFF_CONSTANTS, **_PTQ_CONSTANTS, **_ASSUMED_INTERACTION},
            "Kumar et al. 2024, Table 2; C_w = C_a = C_kv = 1 assumed (not reported)",
        ),
    },
    description="Quantized training and post-training quantization in one law.",
)


# Table 1's functional forms for the weight precision P_w (the N_eff form is NEFF itself): each says where
# precision enters the Chinchilla law. f(P) = 1 − e^(−P/γ + n) as in N_eff; the additive and multiplicative forms
# decay with P as e^(−P/γ). The paper reports only their held-out R², no constants.
def _fraction(p, P, gamma="gamma_w", offset="n_w"):
    return np.maximum(1 - np.exp(-P / p[gamma] + p[offset]), _LEAST_FRACTION)


def additive_form(p, x):
    """L = A·N^−α + B·D^−α + E + C_P·e^(−P_w/γ_w)."""
    return (
        p["A"] * x["N"] ** -p["alpha"]
        + p["B"] * x["D"] ** -p["alpha"]
        + p["E"]
        + p["C_P"] * np.exp(-x["P_w"] / p["gamma_w"])
    )


def effective_data_form(p, x):
    """L = A·N^−α + B·(D·f(P_w))^−α + E: precision shrinks the data instead of the parameters."""
    return p["A"] * x["N"] ** -p["alpha"] + p["B"] * (x["D"] * _fraction(p, x["P_w"])) ** -p["alpha"] + p["E"]


def tied_form(p, x):
    """L = A·(N·f)^−α + B·(D·f)^−α + E, one f(P_w) for both."""
    f = _fraction(p, x["P_w"])
    return p["A"] * (x["N"] * f) ** -p["alpha"] + p["B"] * (x["D"] * f) ** -p["alpha"] + p["E"]


def untied_form(p, x):
    """L = A·(N·f)^−α + B·(D·f_D)^−α + E, f and f_D with their own γ, n."""
    f, f_data = _fraction(p, x["P_w"]), _fraction(p, x["P_w"], "gamma_D", "n_D")
    return p["A"] * (x["N"] * f) ** -p["alpha"] + p["B"] * (x["D"] * f_data) ** -p["alpha"] + p["E"]


def multiplicative_form(p, x):
    """L = (A·N^−α + B·D^−α + E)·(1 + C_P·e^(−P_w/γ_w))."""
    chinchilla = p["A"] * x["N"] ** -p["alpha"] + p["B"] * x["D"] ** -p["alpha"] + p["E"]
    return chinchilla * (1 + p["C_P"] * np.exp(-x["P_w"] / p["gamma_w"]))


_W_PARAMS = (Param("gamma_w", 0.1, 20.0, start=(0.5, 5.0), log=True), Param("n_w", -5.0, 5.0, start=(-1.0, 2.5)))
_DECAY_PARAMS = (Param("C_P", 1e-6, 1e3, start=(1e-3, 1.0), log=True), _W_PARAMS[0])
_DATA_PARAMS = (Param("gamma_D", 0.1, 20.0, start=(0.5, 5.0), log=True), Param("n_D", -5.0, 5.0, start=(-1.0, 2.5)))
# Where P_w scales N (tied, untied) or D (D_eff, tied, untied) inside a power term, varying P_w alone pins that
# term's prefactor.
_FORM_IDENTIFIED = {"A": ("N",), "alpha": ("N", "D"), "B": ("D",)}
_SCALES_N = {"A": ("N", "P_w")}
_SCALES_D = {"B": ("D", "P_w")}
_FORMS = {  # name: (function, its precision parameters, formula, which prefactors P_w pins)
    "additive": (additive_form, _DECAY_PARAMS, "L = A*N^-alpha + B*D^-alpha + E + C_P*exp(-P_w/gamma_w)", {}),
    "effective_data": (effective_data_form, _W_PARAMS, "L = A*N^-alpha + B*(D*f(P_w))^-alpha + E", _SCALES_D),
    "tied": (tied_form, _W_PARAMS, "L = A*(N*f(P_w))^-alpha + B*(D*f(P_w))^-alpha + E", _SCALES_N | _SCALES_D),
    "untied": (
        untied_form,
        _W_PARAMS + _DATA_PARAMS,
        "L = A*(N*f(P_w))^-alpha + B*(D*f_D(P_w))^-alpha + E",
        _SCALES_N | _SCALES_D,
    ),
    "multiplicative": (
        multiplicative_form,
        _DECAY_PARAMS,
        "L = (A*N^-alpha + B*D^-alpha + E)*(1 + C_P*exp(-P_w/gamma_w))",
        {},
    ),
}
FORMS = {
    name: Law(
        name=f"kumar2024.form_{name}",
        formula=formula,
        params=_CHINCHILLA_PARAMS + params,
        inputs=("N", "D", "P_w"),
        infinite_allowed=("P_w",),
        target="loss",
        function=function,
        identified_by={**_FORM_IDENTIFIED, **pinned, **{param.name: ("P_w",) for param in params}},
        description=f"Kumar et al. 2024 Table 1: the {name.replace('_', ' ')} form of weight training precision.",
    )
    for name, (function, params, formula, pinned) in _FORMS.items()
}
# Table 1's held-out R² per form; "neff" is NEFF (with activations and KV cache left in high precision).
PAPER_FORM_R2 = {
    "neff": 0.82,
    "additive": 0.71,
    "effective_data": 0.74,
    "tied": 0.79,
    "untied": 0.84,
    "multiplicative": 0.75,
}


def _tied_fraction(params, P):
    return math.prod(float(precision_fraction(params, P, tensor)) for tensor in TENSORS)


def _log_derivative(params, P, offsets=True):
    """P·f'(P)/f(P) for f = Π_x f_x: the elasticity of N_eff in precision."""
    total = 0.0
    for tensor in TENSORS:
        gamma, offset = params[f"gamma_{tensor}"], params[f"n_{tensor}"] if offsets else 0.0
        decay = math.exp(-P / gamma + offset)
        total += P * (decay / gamma) / (1 - decay)
    return total


def _lowest_precision(params, offsets=True):
    """Below max_x γ_x n_x bits some f_x ≤ 0: no effective parameters remain."""
    return max(0.0, *(params[f"gamma_{t}"] * (params[f"n_{t}"] if offsets else 0.0) for t in TENSORS))


SOLVER_CEILING = 64.0  # bits: the top of the range the P* solvers below search


def optimum_or_nan(solve, *args, **kwargs) -> float:
    """`solve(*args, **kwargs)`, one of this module's P* solvers, or NaN where the law has no optimum in the
    solver's range: its bracket holds no root (ValueError), or the root lies at or beyond SOLVER_CEILING (the
    solver then returns its bound)."""
    try:
        value = float(solve(*args, **kwargs))
    except ValueError:
        return math.nan
    return value if math.isfinite(value) and value < SOLVER_CEILING else math.nan


def compute_optimal_precision(params, *, offsets=True) -> float:
    """P* when N, D and P are all chosen under C ∝ N·D·P: solves Σ_x P f_x'(P)/f_x(P) = 1 (Sec. 4.3.1).

    Independent of compute. Table 2's constants give 7.00 bits with the offsets n_x, ≈ 3.5 without.
    """
    low = _lowest_precision(params, offsets) + 1e-9
    return brentq(lambda P: _log_derivative(params, P, offsets) - 1, low, SOLVER_CEILING, xtol=1e-12)


def fixed_size_optimal_precision(params, N, D) -> float:
    """P* for a model of fixed size N trained (compute-optimally in P) to D tokens (Sec. 4.3.2, Fig. 6 right).

    Under C = (6/16) N D P with N fixed, spending on P or on D balances when
    α A (N f(P))^−α · P f'/f = α B D^−α (tied exponents); the left side falls monotonically in P.
    """
    alpha = params["alpha"]
    data_side = params["B"] * D**-alpha

    def imbalance(P):
        return params["A"] * (N * _tied_fraction(params, P)) ** -alpha * _log_derivative(params, P) - data_side

    low, high = _lowest_precision(params) + 1e-6, SOLVER_CEILING
    return high if imbalance(high) > 0 else brentq(imbalance, low, high, xtol=1e-10)


def ptq_critical_data_size(params, N, P_post, *, B=KUMAR2024_CHINCHILLA["B"], beta=KUMAR2024_CHINCHILLA["alpha"]):
    """D beyond which more pretraining data raises post-PTQ loss: d/dD [B D^−β + δ_PTQ] = 0.

    D_crit = (β B N^γ_N e^(P_post/γ_post) / (γ_D C_T))^(1/(γ_D + β)); B and β default to Table 2.
    """
    numerator = beta * B * N ** params["gamma_N"] * np.exp(P_post / params["gamma_post"])
    return (numerator / (params["gamma_D"] * params["C_T"])) ** (1 / (params["gamma_D"] + beta))


def inference_aware_optimum(params, cost, served_tokens, serving_bits=16) -> tuple[float, float, float]:
    """(P*, N*, D*) minimising training-precision loss under a training + serving budget.

    Cost model (an assumption of this project (?), stated in fig9): training (6/16)·N·D·P plus serving
    2·N·(serving_bits/16) FLOP-equivalents per token for `served_tokens` tokens. Serving cost grows with N
    but not with the training precision, so a larger serving load favours smaller models trained longer.
    served_tokens = 0 gives the training-only optimum, where P* is compute_optimal_precision's constant.
    """
    serving = 2 * serving_bits / 16 * served_tokens  # per parameter

    def tokens(N, P):
        return (cost - N * serving) / (COMPUTE_PER_BIT * N * P)

    def best_for_precision(P):
        most_params = cost / (serving + COMPUTE_PER_BIT * P)  # keeps D ≥ 1 token

        def loss(log_N):
            N = math.exp(log_N)
            x = {"N": N, "D": tokens(N, P), "P_w": P, "P_a": P, "P_kv": P}
            return float(training_precision_loss(params, x))

        found = minimize_scalar(
            loss, bounds=(math.log(1e3), math.log(most_params)), method="bounded", options={"xatol": 1e-9}
        )
        return found.fun, math.exp(found.x)

    low, high = _lowest_precision(params) + 0.05, 32.0
    if not low < high:
        raise ValueError(f"no precision to search: some f_x ≤ 0 below {low - 0.05:.3g} bits")
    found = minimize_scalar(
        lambda P: best_for_precision(P)[0], bounds=(low, high), method="bounded", options={"xatol": 1e-7}
    )
    P = float(found.x)
    if min(P - low, high - P) < 1e-3:
        raise ValueError(f"the optimum lies on the search range's end ({P:.3g} bits of [{low:.3g}, {high:g}])")
    N = best_for_precision(P)[1]
    return P, N, tokens(N, P)


def derived_quantities(law_name, params) -> dict[str, float]:
    """What `qscaling laws show` prints for a Kumar law."""
    quantities = {}
    if "gamma_w" in params:
        quantities["P* joint compute-optimal (bits)"] = compute_optimal_precision(params)
        quantities["P* without offsets n_x (bits)"] = compute_optimal_precision(params, offsets=False)
        for bits in (4, 8):
            for tensor in TENSORS:
                quantities[f"N_eff/N at P_{tensor} = {bits}"] = float(precision_fraction(params, bits, tensor))
            quantities[f"N_eff/N all tensors at {bits} bits"] = _tied_fraction(params, bits)
    if "C_T" in params:
        chinchilla = {
            "B": params.get("B", KUMAR2024_CHINCHILLA["B"]),
            "beta": params.get("alpha", KUMAR2024_CHINCHILLA["alpha"]),
        }
        for N in (30e6, 220e6, 1e9):
            for bits in (3, 4):
                quantities[f"PTQ D_crit (tokens), N = {N:.3g}, INT{bits}"] = float(
                    ptq_critical_data_size(params, N, bits, **chinchilla)
                )
    return quantities
