"""Precision as an efficiency factor on parameters and data: QuEST (Panferov et al. 2025) and Quartet (Castro et
al. 2025), both from IST Austria.

QuEST, "QuEST: Stable Training of LLMs with 1-Bit Weights and Activations" (arXiv 2502.05003):
    L(N, D, P) = A / (N · eff(P))^α + B / D^β + E
with weights and activations trained at P bits and eff(P) in (0, 1] a parameter-efficiency factor fitted once per
precision (a table of values, not a function of P: the paper fits one free eff per precision its runs used).
Quartet, "Quartet: Native FP4 Training Can Be Optimal for Large Language Models" (arXiv 2505.14669):
    L(N, D, P_fwd, P_bwd) = (A / (N · eff_N)^α + B / (D · eff_D)^β)^γ + E
with eff_N set by the forward pass's precision and eff_D by the backward pass's, again one fitted value each.

Precisions reach both laws as bit counts, as Kumar et al.'s P_w and Ouyang et al.'s P do: QuEST's P in
{1, 2, 3, 4, 8} takes eff_P, and 16 bits or more is the unquantized reference, eff = 1. Quartet's P_fwd, P_bwd = 4
takes eff_N, eff_D; 8 bits or more counts as lossless (the paper's baselines, trained in BF16, stand for FP8 in
its cost comparisons (?): its plotting code labels them "FP8:FP8"). Any other precision is not one these laws
were fitted at, and evaluating one raises ValueError.

Constants: neither paper prints the fitted values in a table that was read for this module; they are the fits in
the notebooks released with each paper, which draw its figures (cited per variant). QuEST's fit also gives
efficiencies this law has no input for: FP4 (E2M1 with Hadamard) 0.6296, 2:4-sparse INT4 0.3812, and weight-only
(activations in 16 bits) 0.1384, 0.4137, 0.6531, 0.8404 at 1-4 bits (8 bits not fitted). Its 8-bit efficiency came
out at 1.016, above 1 within the fit's noise, so the bounds allow efficiencies up to 1.5.
"""

import numpy as np

from qscaling.laws.law import Law, PaperParams, Param

QUEST_BITS = (1, 2, 3, 4, 8)
QUEST_LOSSLESS_BITS = 16  # and above: the BF16/FP32 reference, eff = 1
QUARTET_BITS = 4
QUARTET_LOSSLESS_BITS = 8

_QUEST_NOTEBOOK = "code released with the paper: IST-DASLab/QuEST notebooks/plots.ipynb, fit cell (0-based cell 3)"
_QUEST_SOURCE = (
    f"Panferov et al. 2025 (arXiv 2502.05003); form and constants from the {_QUEST_NOTEBOOK}, commit 970106e "
    "(2025-03-17, unchanged at 513d02c), efficiencies of its runs "
)
_QUEST_BASE = {
    "A": 8.134031011055859, "alpha": 0.062726522, "B": 86.41190623830154, "beta": 0.241288351,
    "E": 0.0014232897805828435,
}  # fmt: skip
# variant -> (eff at 1, 2, 3, 4, 8 bits, which runs); one fit, so every variant shares A, alpha, B, beta, E.
_QUEST_EFFICIENCY = {
    "quest": ((0.0205046859, 0.151870911, 0.433126203, 0.691831718, 1.01619263), "with QuEST's Hadamard transform"),
    "no_hadamard": (
        (0.0155770373, 0.0784119072, 0.322107861, 0.603270679, 0.937628722),
        "without the Hadamard transform ('NOH' in the notebook: clip or trust quantizers alone)",
    ),
}

_QUARTET_NOTEBOOK = "IST-DASLab/Quartet notebooks/plots.ipynb, commit 6ddd368 (2025-05-21, released with v1)"
_QUARTET_BASE = {
    "A": 152374.77876694422, "alpha": 0.5885758845107505, "B": 525458.9311992718, "beta": 0.5440388123931171,
    "gamma": 0.2739285177174224, "E": 1.348140985250255,
}  # fmt: skip
# (eff_N, eff_D, what the runs were, which cell of the notebook fitted them); every variant shares the base fit of
# BF16 runs (0-based cell 3), as the paper's two-stage fit does.
_QUARTET_EFFICIENCY = {
    "quartet": (0.641833714935444, 0.9434595522975127, "Quartet (MXFP4 forward and backward), fitted jointly", 31),
    "separate": (
        0.6478132625216757,
        0.8917645812745398,
        "eff_N from MXFP4-forward runs (QuEST quantizer), eff_D from MXFP4-backward runs (stochastic rounding "
        "after a Hadamard transform), each with the other pass in BF16",
        "5 and 6",
    ),
    "luq_int4": (0.5031631922162144, 0.15376457292014853, "LUQ, INT4", 31),
    "luq_fp4": (0.010750905524302995, 0.08817500092095477, "LUQ, FP4", 31),
    "jetfire_fp4": (0.0005230144198110432, 0.07241096442014011, "Jetfire, FP4", 31),
    "halo_fp4": (0.834553422211704, 0.0001905539868192717, "HALO, FP4", 31),
    "lss_int4": (0.6889072774190219, 0.7468889459355216, "LSS, INT4 (one run)", 31),
}


def efficiency_factor(p, precision, levels: dict[float, str], lossless_from: float, law_name: str):
    """p[name] where `precision` equals a level of `levels` (bits -> param name), 1 at `lossless_from` bits or
    more; ValueError naming the first precision that is neither."""
    precision = np.asarray(precision, dtype=float)
    known = np.isin(precision, list(levels)) | (precision >= lossless_from)
    if not np.all(known):
        valid = ", ".join(f"{bits:g}" for bits in levels)
        raise ValueError(
            f"law {law_name}: precision {precision[~known].flat[0]:g} bits was not fitted; valid: {valid}, "
            f"or >= {lossless_from:g} (unquantized)"
        )
    factor = np.ones_like(precision)
    for bits, name in levels.items():
        factor = np.where(precision == bits, p[name], factor)
    return factor


_QUEST_LEVELS = {bits: f"eff_{bits}" for bits in QUEST_BITS}
_QUARTET_FORWARD, _QUARTET_BACKWARD = {QUARTET_BITS: "eff_N"}, {QUARTET_BITS: "eff_D"}


def fitted_at(law: Law, bits: float) -> bool:
    """Whether `law` (QUEST or QUARTET) has an efficiency at `bits`: a fitted level, or lossless."""
    return bits in {level for _, level in law.levels.values()} or bits >= _LOSSLESS_BITS[law.name]


def quest_efficiency(p, P):
    """eff(P): the fitted factor at P bits, 1 at 16 bits or more."""
    return efficiency_factor(p, P, _QUEST_LEVELS, QUEST_LOSSLESS_BITS, QUEST.name)


def quest_loss(p, x):
    """L = A / (N · eff(P))^α + B / D^β + E."""
    n_eff = x["N"] * quest_efficiency(p, x["P"])
    return p["A"] / n_eff ** p["alpha"] + p["B"] / x["D"] ** p["beta"] + p["E"]


def quartet_efficiencies(p, P_fwd, P_bwd):
    """(eff_N, eff_D) for a forward and a backward precision; 1 for a pass at 8 bits or more."""
    forward = efficiency_factor(p, P_fwd, _QUARTET_FORWARD, QUARTET_LOSSLESS_BITS, QUARTET.name)
    backward = efficiency_factor(p, P_bwd, _QUARTET_BACKWARD, QUARTET_LOSSLESS_BITS, QUARTET.name)
    return forward, backward


def quartet_loss(p, x):
    """L = (A / (N · eff_N)^α + B / (D · eff_D)^β)^γ + E."""
    eff_N, eff_D = quartet_efficiencies(p, x["P_fwd"], x["P_bwd"])
    size_term = p["A"] / (x["N"] * eff_N) ** p["alpha"]
    data_term = p["B"] / (x["D"] * eff_D) ** p["beta"]
    return (size_term + data_term) ** p["gamma"] + p["E"]


def _efficiency_param(name: str) -> Param:
    return Param(name, 1e-5, 1.5, start=(0.01, 1.0), log=True)


QUEST = Law(
    name="panferov2025.quest",
    formula="L = A/(N*eff(P))^alpha + B/D^beta + E,  eff(P) fitted per P in {1,2,3,4,8} bits, eff(>=16) = 1",
    params=(
        Param("A", 1e-3, 1e12, start=(1.0, 1e5), log=True),
        Param("alpha", 1e-3, 2.0, start=(0.02, 1.0)),
        Param("B", 1e-3, 1e12, start=(10.0, 1e6), log=True),
        Param("beta", 1e-3, 2.0, start=(0.05, 1.0)),
        # Linear, not log: the released fit puts E at 0.0014, where a log scale leaves it unidentifiable (a unit
        # step in log E moves the loss by 0.05 %); on a linear scale E = 0 is a bound the fit may report.
        Param("E", 0.0, 20.0, start=(0.0, 3.0)),
        *(_efficiency_param(name) for name in _QUEST_LEVELS.values()),
    ),
    inputs=("N", "D", "P"),
    target="loss",
    function=quest_loss,
    # As Chinchilla's: at one N, A/N^alpha is a constant E supplies; at one P, eff(P)^-alpha a factor A supplies.
    identified_by={
        "A": ("N",),
        "alpha": ("N",),
        "B": ("D",),
        "beta": ("D",),
        **{name: ("P",) for name in _QUEST_LEVELS.values()},
    },
    levels={name: ("P", float(bits)) for bits, name in _QUEST_LEVELS.items()},
    paper_params={
        variant: PaperParams({**_QUEST_BASE, **dict(zip(_QUEST_LEVELS.values(), efficiencies))}, _QUEST_SOURCE + runs)
        for variant, (efficiencies, runs) in _QUEST_EFFICIENCY.items()
    },
    description="Loss of a model trained with weights and activations at P bits, through its effective size.",
)

QUARTET = Law(
    name="castro2025.quartet",
    formula="L = (A/(N*eff_N)^alpha + B/(D*eff_D)^beta)^gamma + E,  eff_N (forward), eff_D (backward) at 4 bits",
    params=(
        Param("A", 1e-3, 1e12, start=(10.0, 1e7), log=True),
        Param("alpha", 1e-2, 2.0, start=(0.1, 1.0)),
        Param("B", 1e-3, 1e12, start=(10.0, 1e7), log=True),
        Param("beta", 1e-2, 2.0, start=(0.1, 1.0)),
        Param("gamma", 1e-2, 2.0, start=(0.1, 1.0)),
        Param("E", 1e-2, 20.0, start=(0.5, 3.0), log=True),
        _efficiency_param("eff_N"),
        _efficiency_param("eff_D"),
    ),
    inputs=("N", "D", "P_fwd", "P_bwd"),
    target="loss",
    function=quartet_loss,
    # At one P_fwd, eff_N^-alpha is a factor A supplies (likewise eff_D and B at one P_bwd).
    identified_by={"eff_N": ("P_fwd",), "eff_D": ("P_bwd",), "alpha": ("N",), "beta": ("D",)},
    levels={"eff_N": ("P_fwd", float(QUARTET_BITS)), "eff_D": ("P_bwd", float(QUARTET_BITS))},
    paper_params={
        variant: PaperParams(
            {**_QUARTET_BASE, "eff_N": eff_N, "eff_D": eff_D},
            f"Castro et al. 2025 (arXiv 2505.14669); form and constants from the code released with the paper: "
            f"{_QUARTET_NOTEBOOK}, base fit to BF16 runs (0-based cell 3), efficiencies of {runs} (cell {cell})",
        )
        for variant, (eff_N, eff_D, runs, cell) in _QUARTET_EFFICIENCY.items()
    },
    description="Loss of a model trained with its forward and backward GEMMs at P_fwd and P_bwd bits.",
)


_LOSSLESS_BITS = {QUEST.name: QUEST_LOSSLESS_BITS, QUARTET.name: QUARTET_LOSSLESS_BITS}
TRAINING_KIND = {QUEST.name: "int", QUARTET.name: "fp"}  # the formats each paper's efficiencies were fitted for


def loss_and_size(law: Law, params, N: float, D: float, bits: float | None) -> tuple[float, float] | None:
    """(loss, N_eff) of a run trained at `bits` throughout — QuEST's weights and activations at P, Quartet's forward
    and backward passes (as each paper trains) — or None where the law has no efficiency at `bits`."""
    if bits is None or not fitted_at(law, bits):
        return None
    precisions = {name: bits for name in law.inputs if name.startswith("P")}
    loss = float(law(params, {"N": N, "D": D, **precisions})[0])
    if law.name == QUEST.name:
        return loss, N * float(quest_efficiency(params, bits))
    return loss, N * float(quartet_efficiencies(params, bits, bits)[0])


def precision_note(law: Law, bits: float | None, train) -> str | None:
    """Why `law` predicts nothing for a run trained in `train` (its total `bits`, None for the other kind)."""
    if bits is None:
        return f"{law.name}: its efficiencies are for {TRAINING_KIND[law.name]} training, not {train}"
    if not fitted_at(law, bits):
        return f"{law.name}: no efficiency fitted at {bits} bits ({law.formula.split(',  ')[1]})"
    return None


def most_bit_efficient_precision(params) -> int:
    """The P of {1, 2, 3, 4, 8, 16} with the largest eff(P)/P: at a fixed memory budget in bits, the precision
    whose effective parameters cost least (QuEST's Pareto claim: 4 bits, where Kumar et al. found 8)."""
    candidates = (*QUEST_BITS, QUEST_LOSSLESS_BITS)
    return max(candidates, key=lambda bits: float(quest_efficiency(params, bits)) / bits)


def derived_quantities(law_name, params) -> dict[str, float]:
    """What `qscaling laws show` prints for QuEST and Quartet."""
    if law_name == QUEST.name:
        quantities = {
            f"eff(P) * 16/P at P = {bits} (effective parameters per bit, relative to 16 bits)": float(
                quest_efficiency(params, bits) * QUEST_LOSSLESS_BITS / bits
            )
            for bits in QUEST_BITS
        }
        quantities["most bit-efficient precision (bits)"] = most_bit_efficient_precision(params)
        return quantities
    if law_name != QUARTET.name:
        return {}
    quantities = {}
    for N, D in ((1e8, 1e10), (1e9, 1e11), (7e9, 1e12)):
        bf16 = float(quartet_loss(params, {"N": N, "D": D, "P_fwd": 16.0, "P_bwd": 16.0}))
        fp4 = float(quartet_loss(params, {"N": N, "D": D, "P_fwd": 4.0, "P_bwd": 4.0}))
        quantities[f"loss FP4:FP4 - BF16:BF16 at N = {N:.3g}, D = {D:.3g}"] = fp4 - bf16
    return quantities
