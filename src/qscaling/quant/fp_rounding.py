"""The reference rounding of float32 values onto floating-point element formats ExMy, and FP block scales (the
formats themselves, their top-code rules and `fp_format`: `qscaling.quant.formats`).

The reference works in float64, where every float32 value, every power of two used and every quotient by
an ulp is exact, so rounding happens only where the code says ``round``.
"""

import torch

from qscaling.quant.formats import FLOAT32_MAX, OVERFLOW_MODES, ROUNDING_MODES, FloatFormat
from qscaling.quant.rounding import round_magnitude


def _power_of_two(exponent: torch.Tensor) -> torch.Tensor:
    """2^exponent as float64, built from its bit pattern so it is exact (|exponent| <= 1022)."""
    return ((exponent.to(torch.int64) + 1023) << 52).view(torch.float64)


def round_to_format(
    x: torch.Tensor,
    fmt: FloatFormat,
    rounding: str = "nearest-even",
    overflow: str = "saturate",
    uniform: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reference: the float32 tensor ``x`` rounded element-wise onto ``fmt``, returned as float32.

    Finite values round on the grid of their binade (ulp = 2^(max(e, e_min) - M)); a result above the
    format's maximum overflows to ±max (``saturate``) or ±Inf (``inf``, IEEE formats only). ±Inf inputs
    overflow the same way; NaN stays NaN; the sign of zero is kept. ``uniform`` (same shape as x, values in
    [0, 1)) drives stochastic rounding (see qscaling.quant.rounding).
    """
    if x.dtype != torch.float32:
        raise TypeError(f"round_to_format: x must be float32, got {x.dtype}")
    if rounding not in ROUNDING_MODES:
        raise ValueError(f"round_to_format: rounding must be one of {', '.join(ROUNDING_MODES)}, got {rounding!r}")
    if overflow not in OVERFLOW_MODES:
        raise ValueError(f"round_to_format: overflow must be one of {', '.join(OVERFLOW_MODES)}, got {overflow!r}")
    if overflow == "inf" and not fmt.has_inf:
        raise ValueError(f"round_to_format: overflow 'inf' needs a format with Inf codes; {fmt.name} has none")
    magnitude = x.to(torch.float64).abs()
    finite = torch.isfinite(magnitude)
    _, frexp_exponent = torch.frexp(torch.where(finite, magnitude, 0.0))
    # frexp gives magnitude = f·2^k with f in [0.5, 1): the binade exponent is k - 1.
    binade = torch.clamp(frexp_exponent.to(torch.int64) - 1, min=fmt.min_normal_exponent)
    ulp = _power_of_two(binade - fmt.mantissa_bits)
    steps = round_magnitude(torch.where(finite, magnitude, 0.0) / ulp, rounding, uniform)
    rounded = steps * ulp
    overflow_value = float("inf") if overflow == "inf" else fmt.max_value
    rounded = torch.where((rounded > fmt.max_value) | torch.isinf(magnitude), overflow_value, rounded)
    rounded = torch.where(torch.isnan(magnitude), float("nan"), rounded)
    return torch.copysign(rounded, x.to(torch.float64)).to(torch.float32)


FP_SCALES = ("fp32", "pow2", "e8m0")


def block_scale(amax: torch.Tensor, fmt: FloatFormat, kind: str = "fp32") -> torch.Tensor:
    """Reference: the multiplier S applied before rounding (x·S), one per block, from the block's amax.

    ``fp32``: S = FP_max / amax in float32 (Sun et al. 2025 §2), clamped to float32's finite range.
    ``pow2``: the largest power of two <= that quotient (exact scaling both ways).
    ``e8m0``: the OCP MX shared scale, x / 2^(floor(log2 amax) - e_max), i.e. S = 2^(e_max - floor(log2
    amax)) with e_max the exponent of the format's largest binade, clamped to E8M0's 2^-127..2^127. Block
    maxima then land in [2^e_max, 2^(e_max+1)) and may saturate, as in the MX specification.
    Blocks whose amax is 0 get S = 1, so they stay exactly zero. ``amax`` is float32, non-negative, finite.
    """
    if kind not in FP_SCALES:
        raise ValueError(f"block_scale: kind must be one of {', '.join(FP_SCALES)}, got {kind!r}")
    if kind == "e8m0":
        _, frexp_exponent = torch.frexp(amax.to(torch.float64))
        scale_exponent = torch.clamp(fmt.max_exponent - (frexp_exponent.to(torch.int64) - 1), -127, 127)
        scale = _power_of_two(scale_exponent).to(torch.float32)
    else:
        # A float32 division (not Tensor.__rtruediv__, which multiplies by a rounded reciprocal).
        quotient = torch.clamp(amax.new_full((), fmt.max_value) / amax, max=FLOAT32_MAX)
        if kind == "pow2":
            _, frexp_exponent = torch.frexp(quotient.to(torch.float64))
            scale_exponent = torch.clamp(frexp_exponent.to(torch.int64) - 1, -126, 127)
            quotient = _power_of_two(scale_exponent).to(torch.float32)
        scale = quotient
    return torch.where(amax > 0, scale, torch.ones_like(scale))
