"""The reference rounding of float32 values onto floating-point element formats ExMy, and FP block scales (the
formats themselves, their top-code rules and `fp_format`: `qscaling.quant.formats`).

The reference works in float64, where every float32 value, every power of two used and every quotient by
an ulp is exact, so rounding happens only where the code says ``round``.
"""

import torch

from qscaling.quant.formats import FLOAT32_MAX, OVERFLOW_MODES, ROUNDING_MODES, FloatFormat, fp_format
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


E4M3 = fp_format(4, 3)  # NVFP4's block-scale format (OCP E4M3: max 448, subnormals down to 2^-9)


def two_level_constants(fmt: FloatFormat) -> tuple[float, float]:
    """(FP_max·448, float32(1/FP_max)) of two-level scaling, both exact float32 values: every path multiplies by
    the float32 reciprocal, as TransformerEngine does, not by 1/FP_max rounded once from double."""
    return fmt.max_value * E4M3.max_value, float(torch.reciprocal(torch.tensor(fmt.max_value, dtype=torch.float32)))


def two_level_scales(
    block_amax: torch.Tensor, tensor_amax: torch.Tensor, fmt: FloatFormat
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reference: NVIDIA's two-level scales (NVFP4 for E2M1), as (encode, block_scale, tensor_scale).

    A value x of a block is rounded as x·encode and dequantized as (q·block_scale)·tensor_scale, where
    block_scale ≈ block_amax / FP_max / tensor_scale is rounded to E4M3 and tensor_scale = tensor_amax /
    (FP_max·448) lets the largest block's scale reach E4M3's 448. The float32 operations and their order are those
    of TransformerEngine's NVFP4 reference quantizer (NVIDIA/TransformerEngine,
    transformer_engine/pytorch/custom_recipes/quantization_ref_nvfp4.py, `_quantize_blockwise_reference`): global
    encode G = min((FP_max·448) / tensor_amax, float32 max), its inverse 1/G, block scale E4M3(min(block_amax ·
    (G·(1/FP_max)), 448)) rounded to nearest even with subnormals and no lower clamp (torchao's nvfp4_tensor.py
    clamps it to E4M3's smallest normal instead), encode = min(1/(block_scale·(1/G)), float32 max); the
    dequantizing tensor scale tensor_amax / (FP_max·448) is the factor its GEMM applies. A block (or tensor) whose
    amax is 0 gets block scale 0 and encode float32 max, so its values stay zeros. Amaxes are float32, finite, >= 0;
    `tensor_amax` broadcasts against `block_amax`.
    """
    largest, inverse_max = two_level_constants(fmt)
    global_encode = torch.clamp(torch.full_like(tensor_amax, largest) / tensor_amax, max=FLOAT32_MAX)
    global_decode = torch.reciprocal(global_encode)
    scaled = torch.clamp(block_amax * (global_encode * inverse_max), max=E4M3.max_value)
    block_scale = round_to_format(scaled, E4M3)
    encode = torch.clamp(torch.reciprocal(block_scale * global_decode), max=FLOAT32_MAX)
    return encode, block_scale, tensor_amax / largest
