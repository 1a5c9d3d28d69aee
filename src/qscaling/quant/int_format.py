"""Integer formats INT2..INT8: reference scales, zero points and fake quantization, all in float32.

The float32 arithmetic is the convention, not an approximation of it: scale, x/s (or x·(1/s)), rounding,
clamp, (q - z)·s — the same operations, in the same order, as ``torch.fake_quantize_per_channel_affine``
(which uses x·(1/s)) and GPTQ's quantizer (which uses x/s).

Symmetric (``sym``): zero point 0, codes -2^(b-1)..2^(b-1)-1, scale amax/(2^(b-1)-1) (``absmax``, Kumar et
al. and Chen et al. "absmax") or 2·amax/(2^b-1) (``gptq``: GPTQ's symmetric quantizer, which puts the zero
point at 2^(b-1) of the unsigned codes 0..2^b-1 — the same grid). Asymmetric (``asym``): codes 0..2^b-1,
range [min(x_min, 0), max(x_max, 0)], scale = range/(2^b-1), zero point round(-min/scale) (GPTQ, torch).
``absmean`` (BitNet b1.58): scale = mean|x| over the group, summed in float64 so that the order of the sum (which
differs between CPUs, vector widths and GPU reductions) cannot change the float32 scale. ``narrow`` drops the code
-2^(b-1), so the codes are symmetric about 0: int2 narrow is ternary.
Scales are clamped to float32's smallest normal, so an all-zero group quantizes to exact zeros.
"""

import torch

from qscaling.quant.rounding import round_signed

FLOAT32_TINY = torch.finfo(torch.float32).tiny


def code_range(bits: int, symmetric: bool, narrow: bool = False) -> tuple[int, int]:
    """Smallest and largest integer code."""
    if symmetric:
        return -(2 ** (bits - 1)) + int(narrow), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


def scale_divisor(bits: int, symmetric: bool, convention: str = "absmax") -> float:
    """What a group's amax (symmetric) or range (asymmetric) is divided by for its scale: 2^(b-1)-1 (``absmax``),
    (2^b-1)/2 (``gptq``), 2^b-1 (asymmetric). Every path divides by this one float32-exact value."""
    if not symmetric:
        return float(2**bits - 1)
    return float(2 ** (bits - 1) - 1) if convention == "absmax" else (2**bits - 1) / 2


def symmetric_scale(amax: torch.Tensor, bits: int, convention: str = "absmax") -> torch.Tensor:
    """Scale from a float32 amax: amax/(2^(b-1)-1) (``absmax``) or amax/((2^b-1)/2) (``gptq``).

    amax/((2^b-1)/2) equals GPTQ's (amax - (-amax))/(2^b-1) bit for bit (doubling is exact) and cannot
    overflow.
    """
    return torch.clamp(amax / scale_divisor(bits, True, convention), min=FLOAT32_TINY)


def absmean_scale(magnitude_sum: torch.Tensor, count) -> torch.Tensor:
    """Scale from the float64 sum of a group's finite |x| and its element count: mean|x| rounded once to float32."""
    return torch.clamp((magnitude_sum / count).to(torch.float32), min=FLOAT32_TINY)


def asymmetric_qparams(x_min: torch.Tensor, x_max: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, zero_point) from float32 minima and maxima; the zero point is a float32 integer."""
    low = torch.clamp(x_min, max=0.0)
    high = torch.clamp(x_max, min=0.0)
    scale = torch.clamp((high - low) / (2**bits - 1), min=FLOAT32_TINY)
    zero_point = torch.clamp(torch.round(-low / scale), 0, 2**bits - 1)
    return scale, zero_point


def fake_quantize_int(
    x: torch.Tensor,
    scale: torch.Tensor,
    zero_point: torch.Tensor,
    bits: int,
    symmetric: bool,
    division: str = "div",
    rounding: str = "nearest-even",
    uniform: torch.Tensor | None = None,
    narrow: bool = False,
) -> torch.Tensor:
    """Reference: (clamp(round(x/s) + z, q_min, q_max) - z)·s for float32 x, scale and zero point broadcast.

    NaN stays NaN; ±Inf saturates to the end codes; adding z (also when 0) turns -0 into +0, as torch's
    integer codes do.
    """
    q_min, q_max = code_range(bits, symmetric, narrow)
    scaled = x / scale if division == "div" else x * torch.reciprocal(scale)
    codes = torch.clamp(round_signed(scaled, rounding, uniform) + zero_point, q_min, q_max)
    return (codes - zero_point) * scale
