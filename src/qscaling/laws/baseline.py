"""Precision-free laws the papers build on: Chinchilla (Hoffmann et al. 2022) and Kaplan et al. (2020)."""

import numpy as np

from qscaling.laws.law import Law, PaperParams, Param

# Start ranges follow Besiroglu et al. (2024): a, b = log A, log B in [0, 25], e = log E in [-1, 1],
# exponents in [0, 2] (we start just above 0: an exponent of exactly 0 makes a term flat in its input).
_A = Param("A", 1e-6, 1e15, start=(1.0, float(np.exp(25))), log=True)
_B = Param("B", 1e-6, 1e15, start=(1.0, float(np.exp(25))), log=True)
_E = Param("E", 1e-3, 1e2, start=(float(np.exp(-1)), float(np.exp(1))), log=True)
_ALPHA = Param("alpha", 1e-3, 3.0, start=(0.05, 2.0))
_BETA = Param("beta", 1e-3, 3.0, start=(0.05, 2.0))


def chinchilla_loss(p, x):
    """L = A/N^α + B/D^β + E  (Hoffmann et al. 2022, Eq. 2)."""
    return p["A"] / x["N"] ** p["alpha"] + p["B"] / x["D"] ** p["beta"] + p["E"]


def chinchilla_tied_loss(p, x):
    """L = A/N^α + B/D^α + E: the α = β form Kumar et al. and Chen et al. fit."""
    return p["A"] / x["N"] ** p["alpha"] + p["B"] / x["D"] ** p["alpha"] + p["E"]


def kaplan_loss(p, x):
    """L = [(N_c/N)^(α_N/α_D) + D_c/D]^α_D  (Kaplan et al. 2020, Eq. 1.5; Ouyang et al.'s 16-bit law)."""
    return ((p["N_c"] / x["N"]) ** (p["alpha_N"] / p["alpha_D"]) + p["D_c"] / x["D"]) ** p["alpha_D"]


KUMAR2024_CHINCHILLA = PaperParams(
    {"A": 4.299e3, "alpha": 0.4965, "B": 1.806e4, "E": 2.7648},
    "Kumar et al. 2024, Table 2 (alpha = beta tied)",
)
CHEN2025_CHINCHILLA = PaperParams(
    {"A": 237.7042, "alpha": 0.3022, "B": 596.2490, "E": 1.9279},
    "Chen et al. 2025, Table 1 (alpha = beta tied)",
)

CHINCHILLA = Law(
    name="chinchilla",
    formula="L = A/N^alpha + B/D^beta + E",
    params=(_A, _ALPHA, _B, _BETA, _E),
    inputs=("N", "D"),
    target="loss",
    function=chinchilla_loss,
    # At one N, A/N^alpha is a constant that E already supplies (likewise B, beta at one D).
    identified_by={"A": ("N",), "alpha": ("N",), "B": ("D",), "beta": ("D",)},
    paper_params={
        "hoffmann2022": PaperParams(
            {"A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28, "E": 1.69},
            "Hoffmann et al. 2022, Eq. 10 (approach 3)",
        ),
        "epoch2024": PaperParams(
            {"A": 482.0, "alpha": 0.348, "B": 2085.0, "beta": 0.366, "E": 1.817},
            "Besiroglu et al. 2024 (Epoch AI replication), refit of Hoffmann et al.'s Fig. 4 data",
        ),
        "kumar2024": PaperParams(
            {**KUMAR2024_CHINCHILLA, "beta": KUMAR2024_CHINCHILLA["alpha"]},
            KUMAR2024_CHINCHILLA.source,
        ),
        "chen2025": PaperParams(
            {**CHEN2025_CHINCHILLA, "beta": CHEN2025_CHINCHILLA["alpha"]},
            CHEN2025_CHINCHILLA.source,
        ),
    },
    description="Hoffmann et al.'s parametric loss with separate exponents for parameters and data.",
)

CHINCHILLA_TIED = Law(
    name="chinchilla_tied",
    formula="L = A/N^alpha + B/D^alpha + E",
    params=(_A, _ALPHA, _B, _E),
    inputs=("N", "D"),
    target="loss",
    function=chinchilla_tied_loss,
    # The shared exponent is pinned by either input; each coefficient only by its own.
    identified_by={"A": ("N",), "alpha": ("N", "D"), "B": ("D",)},
    paper_params={"kumar2024": KUMAR2024_CHINCHILLA, "chen2025": CHEN2025_CHINCHILLA},
    description="Chinchilla with one exponent for parameters and data, as Kumar et al. and Chen et al. fit it.",
)

KAPLAN = Law(
    name="kaplan",
    formula="L = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D",
    params=(
        Param("N_c", 1.0, 1e30, start=(1e8, 1e22), log=True),
        Param("alpha_N", 1e-3, 2.0, start=(0.02, 0.5)),
        Param("D_c", 1.0, 1e20, start=(1e6, 1e14), log=True),
        Param("alpha_D", 1e-3, 2.0, start=(0.05, 0.8)),
    ),
    inputs=("N", "D"),
    target="loss",
    function=kaplan_loss,
    # At one N, (N_c/N)^(alpha_N/alpha_D) is a single number that N_c alone can supply. At one D, D_c/D only
    # shifts the N curve inside the outer power: identifiable in principle, but on a Pythia-like grid the
    # Jacobian's condition number is ~1e7, beyond ILL_CONDITIONED, so D_c counts as pinned by D alone.
    identified_by={"alpha_N": ("N",), "D_c": ("D",), "alpha_D": ("N", "D")},
    paper_params={
        "ouyang2024": PaperParams(
            {"N_c": 4.74e19, "alpha_N": 0.045, "D_c": 7.63e10, "alpha_D": 0.399},
            "Ouyang et al. 2024, 16-bit loss of the Pythia suite (Sec. 5)",
        ),
        "kaplan2020": PaperParams(
            {"N_c": 8.8e13, "alpha_N": 0.076, "D_c": 5.4e13, "alpha_D": 0.095},
            "Kaplan et al. 2020, Eq. 1.5 and Table 1 (tokens of WebText2, non-embedding N)",
        ),
    },
    description="Kaplan et al.'s joint N, D law; Ouyang et al. use it for the unquantized Pythia loss.",
)
