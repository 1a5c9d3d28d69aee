"""Floating-point element formats ExMy, described without torch: `qscaling.quant.spec` validates specs with them
when a config is checked, before any job runs, and that check must not pay for importing torch.

A format has a sign bit, E exponent bits and M mantissa bits, IEEE-like: bias 2^(E-1) - 1, subnormals at
the lowest exponent code (Sun et al. 2025 §2 "IEEE-like with subnormals"). E = 0 has no exponent field at
all: every value is a "subnormal" m·2^-M, i.e. sign-magnitude fixed point below 1.

What the top exponent code means is an explicit choice (papers.md, cross-paper notes):
- ``ieee``: reserved for Inf/NaN (torch.float16, bfloat16, float8_e5m2). Needs E >= 2.
- ``unreserved``: an ordinary binade, no Inf/NaN codes (qtorch; OCP MX FP6/FP4).
- ``ocp``: what the OCP 8-bit and MX specifications choose per format — E5M2 and every E >= 5 as ``ieee``;
  E4Mx keeps the top binade but S.1111.1…1 is NaN (torch.float8_e4m3fn: max 448); E <= 3 as ``unreserved``
  (E3M2 max 28, E2M3 max 7.5, E2M1 max 6). Formats OCP does not define follow the same rule by E.

The rounding onto a format is `qscaling.quant.fp_rounding.round_to_format`.
"""

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

ROUNDING_MODES = ("nearest-even", "nearest-away", "stochastic")
TOP_CODES = ("ocp", "ieee", "unreserved")
OVERFLOW_MODES = ("saturate", "inf")
FLOAT32_MAX = 3.4028234663852886e38  # torch.finfo(torch.float32).max


@dataclass(frozen=True)
class FloatFormat:
    """An ExMy element format with its top-code rule resolved; all magnitudes are exact float32 values."""

    exponent_bits: int
    mantissa_bits: int
    top_code: str  # as requested: "ocp", "ieee" or "unreserved"
    has_inf: bool  # the top exponent code encodes Inf/NaN (IEEE)
    bias: int
    min_normal_exponent: int  # exponent of the smallest normal binade (1 - bias); subnormals share its ulp
    max_exponent: int  # exponent of the binade holding the largest finite value
    max_value: float  # largest finite magnitude
    min_subnormal: float  # smallest positive magnitude, 2^(1 - bias - M)

    @property
    def name(self) -> str:
        return f"e{self.exponent_bits}m{self.mantissa_bits}"

    def values(self) -> "torch.Tensor":
        """Every finite non-negative representable value, ascending (float64), by enumerating the codes."""
        import torch  # the one use of torch here (module docstring)

        M = self.mantissa_bits
        magnitudes = set()
        exponent_codes = range(2**self.exponent_bits) if self.exponent_bits else [0]
        for code in exponent_codes:
            for mantissa in range(2**M):
                if code == 0:
                    value = 2.0 ** (self.min_normal_exponent - M) * mantissa
                else:
                    value = 2.0 ** (code - self.bias) * (1 + mantissa / 2**M)
                if value <= self.max_value:
                    magnitudes.add(value)
        return torch.tensor(sorted(magnitudes), dtype=torch.float64)


def _resolved_top_code(exponent_bits: int, top_code: str) -> str:
    """The concrete rule behind ``ocp`` (module docstring): 'ieee', 'nan-only' or 'unreserved'."""
    if top_code != "ocp":
        return top_code
    if exponent_bits >= 5:
        return "ieee"
    if exponent_bits == 4:
        return "nan-only"
    return "unreserved"


@functools.cache
def fp_format(exponent_bits: int, mantissa_bits: int, top_code: str = "ocp") -> FloatFormat:
    """The format ExMy under a top-code rule; ValueError naming the field for anything out of range."""
    E, M = exponent_bits, mantissa_bits
    name = f"fp format e{E}m{M}"
    if not (isinstance(E, int) and 0 <= E <= 8):
        raise ValueError(f"{name}: exponent bits must be 0..8, got {E!r}")
    if not (isinstance(M, int) and 0 <= M <= 10):
        raise ValueError(f"{name}: mantissa bits must be 0..10, got {M!r}")
    if E + M == 0:
        raise ValueError(f"{name}: needs at least one exponent or mantissa bit")
    if top_code not in TOP_CODES:
        raise ValueError(f"{name}: top_code must be one of {', '.join(TOP_CODES)}, got {top_code!r}")
    rule = _resolved_top_code(E, top_code)
    if rule == "ieee" and E < 2:
        raise ValueError(f"{name}: top_code 'ieee' reserves the top exponent code, which needs E >= 2")
    # E = 0: one "subnormal" binade with values m·2^-M (bias 1 makes 1 - bias = 0).
    bias = 2 ** (E - 1) - 1 if E else 1
    min_normal_exponent = 1 - bias
    if E == 0:
        max_exponent, max_value = -1, 1.0 - 2.0**-M
    else:
        top_exponent = 2**E - 1 - bias
        if rule == "ieee" or (rule == "nan-only" and M == 0):
            max_exponent, max_significand = top_exponent - 1, 2.0 - 2.0**-M
        elif rule == "nan-only":
            # The all-ones mantissa of the top binade is NaN (float8_e4m3fn): 1.110 · 2^8 = 448.
            max_exponent, max_significand = top_exponent, 2.0 - 2.0 ** (1 - M)
        else:
            max_exponent, max_significand = top_exponent, 2.0 - 2.0**-M
        max_value = 2.0**max_exponent * max_significand
    if max_value > FLOAT32_MAX:
        raise ValueError(f"{name}: top_code {top_code!r} gives a maximum {max_value:g} beyond float32; use 'ieee'")
    return FloatFormat(
        exponent_bits=E,
        mantissa_bits=M,
        top_code=top_code,
        has_inf=rule == "ieee",
        bias=bias,
        min_normal_exponent=min_normal_exponent,
        max_exponent=max_exponent,
        max_value=max_value,
        min_subnormal=2.0 ** (min_normal_exponent - M),
    )
