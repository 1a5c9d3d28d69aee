"""Ouyang et al. 2024, "Low-Bit Quantization Favors Undertrained LLMs": quantization-induced degradation (QiD).

QiD = Δ_qLoss = loss(quantized) − loss(16-bit) of GPTQ weight-only quantized Pythia checkpoints.
"""

import math

import numpy as np
import pandas as pd

from qscaling.laws.law import DEGRADATION_HUBER_DELTA, Law, PaperParams, Param

UNIFIED_CONSTANTS = {"k": 0.017, "alpha": 0.2261, "beta": 0.5251, "gamma": 5.4967}  # Sec. 4.4, Eq. 4
# One-factor exponents (Sec. 4.1–4.3); their scale factors are not reported.
TOKENS_EXPONENT, SIZE_EXPONENT, BITS_EXPONENT = 0.5316, 0.2276, 5.4812
# Reference point where the one-factor laws are pinned to the unified law (our choice, stated in `source`):
# a 1B model, 4 bits, and the ~300B tokens Pythia is trained on.
REFERENCE = {"N": 1e9, "D": 3e11, "P": 4}

MODELS = {"1B": 1e9, "7B": 7e9, "70B": 70e9, "405B": 405e9}  # nominal sizes of Table 1
TABLE1_DELTAS = (0.2, 0.3, 0.4, 0.5)
# Table 1 entries we hold (trillions of tokens to reach the QiD): the Δ = 0.2 row of the 2- and 4-bit blocks.
TABLE1_PAPER = {
    (2, 0.2): {"1B": 0.0011, "7B": 0.0026, "70B": 0.0071, "405B": 0.0151},
    (4, 0.2): {"1B": 1.4424, "7B": 4.5066, "70B": 17.3499, "405B": 48.4861},
}
# Table 1 matches separate per-bit-width laws Δ = k D^β / N^α better than the unified law (papers.md):
# 3- and 4-bit exponents as the paper reports them; 2-bit ones recovered by inverting the table.
PER_BITS_EXPONENTS = {2: {"alpha": 0.224, "beta": 0.520}, 3: {"alpha": 0.3547, "beta": 0.6728},
                      4: {"alpha": 0.3835, "beta": 0.6551}}  # fmt: skip
TABLE1_NOTE = (
    "The unified law (one set of exponents for every bit width) reproduces Table 1's 2-bit column but not the "
    "3/4-bit ones; the paper's table follows separate per-bit-width laws k*D^beta/N^alpha (3-bit k not reported)."
)


def qid(p, x):
    """Δ_qLoss = k · D^β / (N^α · P^γ)  (Eq. 4)."""
    return p["k"] * x["D"] ** p["beta"] / (x["N"] ** p["alpha"] * x["P"] ** p["gamma"])


def qid_tokens(p, x):
    """Δ = b · D^β at fixed size and bit width (Sec. 4.1, Fig. 3)."""
    return p["b"] * x["D"] ** p["beta"]


def qid_size(p, x):
    """Δ = a / N^α at fixed tokens and bit width (Sec. 4.2, Fig. 4)."""
    return p["a"] / x["N"] ** p["alpha"]


def qid_bits(p, x):
    """Δ = c / P^γ at fixed size and tokens (Sec. 4.3, Fig. 5)."""
    return p["c"] / x["P"] ** p["gamma"]


def qid_fixed_bits(p, x):
    """Δ = k · D^β / N^α for one bit width (the form behind Table 1)."""
    return p["k"] * x["D"] ** p["beta"] / x["N"] ** p["alpha"]


_SCALE = dict(low=1e-12, high=1e8, log=True)
_K = Param("k", start=(1e-5, 1.0), **_SCALE)
_ALPHA = Param("alpha", 0.0, 2.0, start=(0.05, 0.8))
_BETA = Param("beta", 0.0, 2.0, start=(0.1, 1.0))
_GAMMA = Param("gamma", 0.0, 20.0, start=(1.0, 10.0))


def _unified_at_reference(keep):
    """Scale of a one-factor law: the unified law at REFERENCE with the kept factor's power left out."""
    c = UNIFIED_CONSTANTS
    factors = {"D": REFERENCE["D"] ** c["beta"], "N": REFERENCE["N"] ** -c["alpha"], "P": REFERENCE["P"] ** -c["gamma"]}
    return c["k"] * math.prod(value for name, value in factors.items() if name != keep)


def _per_bits_scale(bits):
    """k of a per-bit-width law fitted (log space, least squares) to the Table 1 entries at those bits."""
    exponents = PER_BITS_EXPONENTS[bits]
    logs = [
        np.log(delta) + exponents["alpha"] * np.log(MODELS[model]) - exponents["beta"] * np.log(tokens * 1e12)
        for (table_bits, delta), row in TABLE1_PAPER.items() if table_bits == bits
        for model, tokens in row.items()
    ]  # fmt: skip
    return float(np.exp(np.mean(logs)))


_ONE_FACTOR_NOTE = "Ouyang et al. 2024 exponent (Sec. 4); scale not reported, pinned to the unified law at {}"

QID = Law(
    name="ouyang2024.qid",
    formula="delta = k * D^beta / (N^alpha * P^gamma)",
    params=(_K, _ALPHA, _BETA, _GAMMA),
    inputs=("N", "D", "P"),
    target="delta",
    huber_delta=DEGRADATION_HUBER_DELTA,
    function=qid,
    identified_by={"alpha": ("N",), "beta": ("D",), "gamma": ("P",)},
    paper_params={"eq4": PaperParams(UNIFIED_CONSTANTS, "Ouyang et al. 2024, unified law (Sec. 4.4)")},
    description="Unified QiD law over training tokens, model size and bit width.",
)
QID_TOKENS = Law(
    name="ouyang2024.qid_tokens",
    formula="delta = b * D^beta",
    params=(Param("b", start=(1e-8, 1e-2), **_SCALE), _BETA),
    inputs=("D",),
    target="delta",
    huber_delta=DEGRADATION_HUBER_DELTA,
    function=qid_tokens,
    identified_by={"beta": ("D",)},
    paper_params={
        "sec4.1": PaperParams(
            {"b": _unified_at_reference("D"), "beta": TOKENS_EXPONENT}, _ONE_FACTOR_NOTE.format("N = 1B, P = 4")
        )
    },
    description="QiD against training tokens for one model size and bit width.",
)
QID_SIZE = Law(
    name="ouyang2024.qid_size",
    formula="delta = a / N^alpha",
    params=(Param("a", start=(1e-2, 1e4), **_SCALE), _ALPHA),
    inputs=("N",),
    target="delta",
    huber_delta=DEGRADATION_HUBER_DELTA,
    function=qid_size,
    identified_by={"alpha": ("N",)},
    paper_params={
        "sec4.2": PaperParams(
            {"a": _unified_at_reference("N"), "alpha": SIZE_EXPONENT}, _ONE_FACTOR_NOTE.format("D = 300B, P = 4")
        )
    },
    description="QiD against model size for one token count and bit width.",
)
QID_BITS = Law(
    name="ouyang2024.qid_bits",
    formula="delta = c / P^gamma",
    params=(Param("c", start=(1e-2, 1e4), **_SCALE), _GAMMA),
    inputs=("P",),
    target="delta",
    huber_delta=DEGRADATION_HUBER_DELTA,
    function=qid_bits,
    identified_by={"gamma": ("P",)},
    paper_params={
        "sec4.3": PaperParams(
            {"c": _unified_at_reference("P"), "gamma": BITS_EXPONENT}, _ONE_FACTOR_NOTE.format("N = 1B, D = 300B")
        )
    },
    description="QiD against bit width for one model size and token count.",
)
QID_FIXED_BITS = Law(
    name="ouyang2024.qid_fixed_bits",
    formula="delta = k * D^beta / N^alpha",
    params=(_K, _ALPHA, _BETA),
    inputs=("N", "D"),
    target="delta",
    huber_delta=DEGRADATION_HUBER_DELTA,
    function=qid_fixed_bits,
    identified_by={"alpha": ("N",), "beta": ("D",)},
    paper_params={
        f"{bits}bit": PaperParams(
            {"k": _per_bits_scale(bits), **PER_BITS_EXPONENTS[bits]},
            f"exponents: papers.md ({bits}-bit); k fitted here to Table 1's {bits}-bit Δ = 0.2 entries",
        )
        for bits in (2, 4)
    },
    description="QiD for one bit width; Table 1 is computed from such per-bit-width laws.",
)


def tokens_to_reach(params, delta, N, P=None):
    """Training tokens after which the QiD reaches `delta`: the law inverted in D (Sec. 5, Table 1).

    With P: the unified law, D = (Δ N^α P^γ / k)^(1/β). Without: a per-bit-width law, D = (Δ N^α / k)^(1/β).
    A law with β = 0 (QiD flat in D) reaches no Δ by training longer: NaN.
    """
    bits_factor = 1.0 if P is None else np.asarray(P, dtype=float) ** params["gamma"]
    scaled = delta * np.asarray(N, dtype=float) ** params["alpha"] * bits_factor / params["k"]
    if params["beta"] <= 0:
        return np.full(np.shape(scaled), np.nan)
    return scaled ** (1 / params["beta"])


def table1(unified=None, per_bits=None) -> pd.DataFrame:
    """Table 1, long form: trillions of tokens to reach each QiD, per model and bit width, per source.

    Sources: the unified law (`unified`, default Eq. 4's constants), per-bit-width laws (`per_bits`: bits ->
    params, default those of QID_FIXED_BITS) and the paper's printed values where we hold them.
    """
    unified = unified or QID.default_paper_params()
    per_bits = per_bits or {int(name[0]): params for name, params in QID_FIXED_BITS.paper_params.items()}
    rows = []
    for bits in (2, 3, 4):
        for model, N in MODELS.items():
            for delta in TABLE1_DELTAS:

                def add(source, tokens, note=""):
                    rows.append(
                        {
                            "bits": bits,
                            "model": model,
                            "N": N,
                            "delta": delta,
                            "source": source,
                            "tokens_T": float(tokens),
                            "note": note,
                        }
                    )

                add("unified law", tokens_to_reach(unified, delta, N, bits) / 1e12, "" if bits == 2 else TABLE1_NOTE)
                if bits in per_bits:
                    add("per-bit-width law", tokens_to_reach(per_bits[bits], delta, N) / 1e12)
                if (bits, delta) in TABLE1_PAPER:
                    add("paper Table 1", TABLE1_PAPER[(bits, delta)][model])
    return pd.DataFrame(rows)


def derived_quantities(law_name, params) -> dict[str, float]:
    """What `qscaling laws show` prints for an Ouyang law: tokens to reach a QiD (Table 1)."""
    quantities = {}
    if law_name == QID.name:
        for bits in (2, 3, 4):
            for model in ("7B", "70B"):
                tokens = tokens_to_reach(params, 0.2, MODELS[model], bits)
                quantities[f"tokens to QiD 0.2, {model}, {bits}-bit (T)"] = float(tokens) / 1e12
    if law_name == QID_FIXED_BITS.name:
        for model in ("7B", "70B"):
            quantities[f"tokens to QiD 0.2, {model} (T)"] = float(tokens_to_reach(params, 0.2, MODELS[model])) / 1e12
    return quantities
