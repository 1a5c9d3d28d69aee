"""Synthetic tables on grids shaped like each paper's experiments, drawn from a law with known parameters.

Used to check that the fitter recovers known constants and that its bootstrap CIs cover them.
"""

import itertools

import numpy as np
import pandas as pd

from qscaling.laws.law import Law
from qscaling.laws.sun2025 import CHANNELWISE_LOG2_BLOCK

_CHANNEL = 2.0**CHANNELWISE_LOG2_BLOCK
_PYTHIA_SIZES = (160e6, 410e6, 1.0e9, 2.8e9, 6.9e9, 12e9)
_PYTHIA_TOKENS = tuple(step * 2.097152e6 for step in (4000, 8000, 16000, 36000, 72000, 143000))
_KUMAR_SIZES, _KUMAR_TOKENS = (30e6, 60e6, 110e6, 220e6), (1.5e9, 3e9, 6e9, 13e9, 26e9)
_CHEN_SIZES, _CHEN_TOKENS = (74e6, 145e6, 297e6, 595e6), (10e9, 20e9, 50e9, 100e9)
_SUN_SIZES, _SUN_TOKENS = (41e6, 85e6, 154e6, 679e6), (10e9, 20e9, 50e9, 100e9)
# QuEST's and Quartet's non-embedding sizes (their released run tables); tokens as multiples of N.
_IST_SIZES = (30482560, 49556736, 102777856, 203188480)
_QUEST_TOKENS_PER_PARAM, _QUEST_BITS = (25, 50, 100), (1, 2, 3, 4, 8, 16)
_QUARTET_TOKENS_PER_PARAM = (25, 50, 100, 200, 400, 800, 1600)  # its 30M baseline reaches 1575
_QUARTET_PASSES = ((16, 16), (4, 16), (16, 4), (4, 4))  # (P_fwd, P_bwd): BF16, forward, backward, both in FP4
# Sun et al.'s configurations per (N, D) (Sec. 3): block sweep in E1M1, mantissa and exponent sweeps, and
# the common FP formats; formats outside the block sweep use channel-wise scaling.
_SUN_FORMATS = (
    [(1, 1, block) for block in (32, 64, 128, 256, 512)]
    + [(0, 7, _CHANNEL)]
    + [(1, mantissa, _CHANNEL) for mantissa in range(1, 7)]
    + [(e, m, _CHANNEL) for e, m in ((2, 1), (2, 3), (3, 1), (3, 2), (4, 1), (4, 3), (4, 5), (5, 1), (5, 2), (6, 1))]
)
_INF = np.inf


def _product(**axes) -> pd.DataFrame:
    return pd.DataFrame(list(itertools.product(*axes.values())), columns=list(axes))


def _chinchilla_grid() -> pd.DataFrame:
    """IsoFLOP profiles like Hoffmann et al.'s Fig. 3: sizes × FLOP budgets, D = C / 6N, 2–500 tokens/param."""
    grid = _product(N=np.logspace(7.8, 10.3, 20), C=np.logspace(18.8, 22, 14))
    grid["D"] = grid["C"] / (6 * grid["N"])
    return grid[(grid.D / grid.N >= 2) & (grid.D / grid.N <= 500)][["N", "D"]].reset_index(drop=True)


def _kumar_training_grid() -> pd.DataFrame:
    """Marginal sweeps of P_w, P_a, P_kv (others left in BF16) plus a BF16 baseline (Kumar et al. Sec. 4)."""
    configs = [(_INF, _INF, _INF)]
    configs += [(bits, _INF, _INF) for bits in (3, 4, 5, 6, 8, 10, 12)]
    configs += [(_INF, bits, _INF) for bits in (4, 5, 6, 8, 10, 12)]
    configs += [(_INF, _INF, bits) for bits in (4, 5, 6, 8, 10, 12)]
    configs += [(bits, bits, bits) for bits in (5, 6, 8)]
    rows = [(N, D, *config) for N in _KUMAR_SIZES for D in _KUMAR_TOKENS for config in configs]
    return pd.DataFrame(rows, columns=["N", "D", "P_w", "P_a", "P_kv"])


def _kumar_unified_grid() -> pd.DataFrame:
    """Quantized-training sweeps, each also quantized post-training to 3–6 bits below its training precision."""
    training = _kumar_training_grid()
    post = pd.DataFrame({"P_post": (3, 4, 5, 6, _INF)})
    grid = training.merge(post, how="cross")
    keep = np.isinf(grid.P_post) | (grid[["P_w", "P_a", "P_kv"]].min(axis=1) > grid.P_post)
    return grid[keep & ((grid.D == 1.5e9) | (grid.D == 6e9) | (grid.D == 26e9))].reset_index(drop=True)


def paper_grid(law: Law) -> pd.DataFrame:
    """Input columns for `law` on a grid like the one its paper measured."""
    name = law.name
    if name in ("chinchilla", "chinchilla_tied"):
        return _chinchilla_grid()
    if name == "kaplan" or name == "ouyang2024.qid_fixed_bits":
        return _product(N=_PYTHIA_SIZES, D=_PYTHIA_TOKENS)
    if name == "ouyang2024.qid":
        return _product(N=_PYTHIA_SIZES, D=_PYTHIA_TOKENS, P=(2, 3, 4))
    if name == "ouyang2024.qid_tokens":
        return pd.DataFrame({"D": _PYTHIA_TOKENS + tuple(step * 2.097152e6 for step in (2000, 24000, 110000))})
    if name == "ouyang2024.qid_size":
        return pd.DataFrame({"N": (70e6,) + _PYTHIA_SIZES})
    if name == "ouyang2024.qid_bits":
        return pd.DataFrame({"P": (2, 3, 4, 8)})
    if name == "kumar2024.ptq":
        return _product(N=_KUMAR_SIZES, D=_KUMAR_TOKENS, P_post=(3, 4, 5, 6))
    if name == "kumar2024.neff":
        return _kumar_training_grid()
    if name == "kumar2024.unified":
        return _kumar_unified_grid()
    if name.startswith("kumar2024.form_"):  # Table 1's forms: the weight sweep, its bf16 partners at P_w = 16
        return _product(N=_KUMAR_SIZES, D=_KUMAR_TOKENS, P_w=(3, 4, 5, 6, 8, 10, 12, 16))
    if name == "chen2025.qat":
        return _product(N=_CHEN_SIZES, D=_CHEN_TOKENS, G=(32, 64, 128, 256))
    if name == "sun2025.capybara":
        formats = pd.DataFrame(_SUN_FORMATS, columns=["E", "M", "B"])
        return _product(N=_SUN_SIZES, D=_SUN_TOKENS).merge(formats, how="cross")
    if name == "sun2025.exponent":
        return _product(N=_SUN_SIZES, D=_SUN_TOKENS, E=range(1, 7))
    if name == "sun2025.mantissa":
        return _product(N=_SUN_SIZES, D=_SUN_TOKENS, M=range(1, 7))
    if name == "sun2025.block":
        return _product(N=_SUN_SIZES, D=_SUN_TOKENS, B=(32, 64, 128, 256, 512))
    if name == "panferov2025.quest":
        grid = _product(N=_IST_SIZES, ratio=_QUEST_TOKENS_PER_PARAM, P=_QUEST_BITS)
        return grid.assign(D=grid.N * grid.ratio)[["N", "D", "P"]]
    if name == "castro2025.quartet":
        passes = pd.DataFrame(_QUARTET_PASSES, columns=["P_fwd", "P_bwd"])
        grid = _product(N=_IST_SIZES, ratio=_QUARTET_TOKENS_PER_PARAM).merge(passes, how="cross")
        return grid.assign(D=grid.N * grid.ratio)[["N", "D", "P_fwd", "P_bwd"]]
    raise ValueError(f"no paper grid for law {name!r}")


def synthetic_table(law: Law, params, grid: pd.DataFrame, noise: float, seed: int) -> pd.DataFrame:
    """grid + the law's target drawn as truth × (1 + noise · N(0, 1)), seeded."""
    if not 0 <= noise < 0.2:
        raise ValueError(f"noise must be a relative standard deviation in [0, 0.2), got {noise}")
    truth = law(params, grid)
    rng = np.random.default_rng(seed)
    table = grid.copy()
    table[law.target] = truth * (1 + noise * rng.standard_normal(len(truth)))
    return table


def group_column(law: Law) -> str:
    """The column the held-out error leaves out one value at a time: model size where the law has one."""
    return "N" if "N" in law.inputs else law.inputs[0]
