"""Fused Triton fake quantization: one program per tile of ROWS groups, amax -> scale -> round -> dequant.

Every step is the float32 operation qscaling.quant.reference performs, spelled so the GPU cannot change
it: ``tl.div_rn`` wherever torch divides (Triton's ``/`` is approximate on NVIDIA), rounding from floor()
of magnitudes (exact, and with no multiply-add a compiler could contract into an FMA), signs and binades
moved by bit operations. Stochastic rounding uses the reference's counter-based stream (murmur3 fmix32
of the flat index XOR a seed key) in native uint32 arithmetic.

Groups that fit one tile (G <= MAX_FUSED_GROUP) get their scale computed in the kernel; ``tensor``
granularity and longer rows take the reference's scales (same float32 ops in torch) and the kernel does
the element-wise part.
"""

import torch
import triton
import triton.language as tl

from qscaling.quant.int_format import code_range, scale_divisor
from qscaling.quant.reference import choose_qparams
from qscaling.quant.rounding import seed_key
from qscaling.quant.spec import QuantSpec

MAX_FUSED_GROUP = 4096
_ROUNDING_CODES = {"nearest-even": 0, "nearest-away": 1, "stochastic": 2}
_FP_SCALE_CODES = {"fp32": 0, "pow2": 1, "e8m0": 2}


@triton.jit
def _bits(x):
    return x.to(tl.uint32, bitcast=True)


@triton.jit
def _float(bits):
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _copysign(magnitude, sign_source):
    return _float((_bits(magnitude) & 0x7FFFFFFF) | (_bits(sign_source) & 0x80000000))


@triton.jit
def _uniform(index, key):
    """rounding.uniform_like: fmix32(index ^ key) >> 8, times 2^-24."""
    h = index.to(tl.uint32) ^ key.to(tl.uint32)
    h = h ^ (h >> 16)
    h = h * 0x85EBCA6B
    h = h ^ (h >> 13)
    h = h * 0xC2B2AE35
    h = h ^ (h >> 16)
    return (h >> 8).to(tl.float32) * 5.9604644775390625e-08


@triton.jit
def _round_magnitude(a, index, key, ROUNDING: tl.constexpr):
    """round_magnitude for non-negative float32 a: exact for a < 2^23, and larger a are integers."""
    floor = tl.floor(a)
    fraction = a - floor
    if ROUNDING == 0:
        odd = (floor - 2.0 * tl.floor(0.5 * floor)) == 1.0
        up = (fraction > 0.5) | ((fraction == 0.5) & odd)
    elif ROUNDING == 1:
        up = fraction >= 0.5
    else:
        up = _uniform(index, key) < fraction
    return tl.where(up, floor + 1.0, floor)


@triton.jit
def _fp_scale(finite, FP_MAX: tl.constexpr, MAX_EXPONENT: tl.constexpr, FP_SCALE: tl.constexpr):
    """Each row's FP scale (fp32: FP_MAX / amax; pow2: that truncated to a power of two; e8m0 below); 1 where the
    row is all zero."""
    amax = tl.max(tl.abs(finite), axis=1)
    if FP_SCALE == 2:
        # e8m0: 2^(MAX_EXPONENT - floor(log2 amax)), exponent read from the bits (subnormals widened).
        subnormal = amax < 1.1754943508222875e-38
        widened = tl.where(subnormal, amax * 18446744073709551616.0, amax)
        log2 = ((_bits(widened) >> 23) & 0xFF).to(tl.int32) - 127 - tl.where(subnormal, 64, 0)
        exponent = tl.minimum(tl.maximum(MAX_EXPONENT - log2, -127), 127)
        normal = _float(((tl.maximum(exponent, -126) + 127) << 23).to(tl.uint32))
        scale = tl.where(exponent == -127, 5.877471754111438e-39, normal)
    else:
        scale = tl.div_rn(tl.full(amax.shape, FP_MAX, tl.float32), amax)
        scale = tl.where(scale > 3.4028234663852886e38, 3.4028234663852886e38, scale)
        if FP_SCALE == 1:
            scale = _float(_bits(tl.where(scale < 1.1754943508222875e-38, 1.1754943508222875e-38, scale)) & 0x7F800000)
    return tl.where(amax > 0.0, scale, 1.0)


@triton.jit
def _symmetric_int_scale(finite, DIVISOR: tl.constexpr):
    """Each row's scale amax / DIVISOR, at least the smallest normal float32."""
    amax = tl.max(tl.abs(finite), axis=1)
    scale = tl.div_rn(amax, tl.full(amax.shape, DIVISOR, tl.float32))
    return tl.where(scale < 1.1754943508222875e-38, 1.1754943508222875e-38, scale)


@triton.jit
def _asymmetric_int_scale(finite, mask, index, key, DIVISOR: tl.constexpr, Q_MAX: tl.constexpr):
    """Each row's (scale, zero point) over the range [min(x, 0), max(x, 0)]; the zero point rounded half to even and
    clamped to [0, Q_MAX]."""
    low = tl.minimum(tl.min(tl.where(mask, finite, 0.0), axis=1), 0.0)
    high = tl.maximum(tl.max(tl.where(mask, finite, 0.0), axis=1), 0.0)
    scale = tl.div_rn(high - low, tl.full(high.shape, DIVISOR, tl.float32))
    scale = tl.where(scale < 1.1754943508222875e-38, 1.1754943508222875e-38, scale)
    zero_float = tl.div_rn(-low, scale)
    zero = _copysign(_round_magnitude(tl.abs(zero_float), index, key, 0), zero_float)
    zero = tl.minimum(tl.maximum(zero, 0.0), Q_MAX * 1.0)
    return scale, zero


@triton.jit
def _fake_quant_fp(
    x,
    scale,
    index,
    key,
    ROUNDING: tl.constexpr,
    FP_MAX: tl.constexpr,
    MIN_NORMAL: tl.constexpr,
    ULP_FACTOR: tl.constexpr,
    OVERFLOW_INF: tl.constexpr,
):
    """x scaled, rounded to the FP format's grid (its ulp in each binade), saturated or overflowed, unscaled."""
    scaled = x * scale
    magnitude = tl.abs(scaled)
    magnitude = tl.where(magnitude > 3.4028234663852886e38, 3.4028234663852886e38, magnitude)
    binade = _float(_bits(magnitude) & 0x7F800000)
    ulp = tl.where(binade < MIN_NORMAL, MIN_NORMAL, binade) * ULP_FACTOR
    rounded = _round_magnitude(tl.div_rn(magnitude, ulp), index, key, ROUNDING) * ulp
    if OVERFLOW_INF:
        rounded = tl.where(rounded > FP_MAX, float("inf"), rounded)
    else:
        rounded = tl.where(rounded > FP_MAX, FP_MAX, rounded)
    rounded = tl.where(magnitude != magnitude, magnitude, rounded)
    return tl.div_rn(_copysign(rounded, scaled), scale)


@triton.jit
def _fake_quant_int(
    x,
    scale,
    zero,
    index,
    key,
    ROUNDING: tl.constexpr,
    Q_MIN: tl.constexpr,
    Q_MAX: tl.constexpr,
    MULINV: tl.constexpr,
):
    """x divided by its scale (or times its reciprocal), rounded to a code, clamped to [Q_MIN, Q_MAX], dequantized."""
    if MULINV:
        scaled = x * tl.div_rn(tl.full(scale.shape, 1.0, tl.float32), scale)
    else:
        scaled = tl.div_rn(x, scale)
    codes = _copysign(_round_magnitude(tl.abs(scaled), index, key, ROUNDING), scaled) + zero
    codes = tl.where(codes != codes, codes, tl.minimum(tl.maximum(codes, Q_MIN * 1.0), Q_MAX * 1.0))
    return (codes - zero) * scale


@triton.jit
def _fake_quant_kernel(
    x_ptr,
    out_ptr,
    scale_ptr,
    zero_ptr,
    n_rows,
    row_length,
    key,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
    GIVEN_SCALE: tl.constexpr,
    IS_FP: tl.constexpr,
    ROUNDING: tl.constexpr,
    SYMMETRIC: tl.constexpr,
    Q_MIN: tl.constexpr,
    Q_MAX: tl.constexpr,
    DIVISOR: tl.constexpr,
    MULINV: tl.constexpr,
    FP_MAX: tl.constexpr,
    MIN_NORMAL: tl.constexpr,
    ULP_FACTOR: tl.constexpr,
    MAX_EXPONENT: tl.constexpr,
    FP_SCALE: tl.constexpr,
    OVERFLOW_INF: tl.constexpr,
):
    """One tile of ROWS groups by BLOCK columns: each group's scale (given, or computed here), then its values."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < row_length)
    index = rows[:, None].to(tl.int64) * row_length + cols[None, :]
    x = tl.load(x_ptr + index, mask=mask, other=0.0)
    finite = tl.where(tl.abs(x) <= 3.4028234663852886e38, x, 0.0)
    if GIVEN_SCALE:
        scale = tl.load(scale_ptr + rows, mask=rows < n_rows, other=1.0)
        zero = tl.load(zero_ptr + rows, mask=rows < n_rows, other=0.0)
    elif IS_FP:
        scale = _fp_scale(finite, FP_MAX, MAX_EXPONENT, FP_SCALE)
        zero = tl.zeros_like(scale)
    elif SYMMETRIC:
        scale = _symmetric_int_scale(finite, DIVISOR)
        zero = tl.zeros_like(scale)
    else:
        scale, zero = _asymmetric_int_scale(finite, mask, index, key, DIVISOR, Q_MAX)
    scale = scale[:, None]
    zero = zero[:, None]
    if IS_FP:
        out = _fake_quant_fp(x, scale, index, key, ROUNDING, FP_MAX, MIN_NORMAL, ULP_FACTOR, OVERFLOW_INF)
    else:
        out = _fake_quant_int(x, scale, zero, index, key, ROUNDING, Q_MIN, Q_MAX, MULINV)
    tl.store(out_ptr + index, out, mask=mask)


def supports(x: torch.Tensor, spec: QuantSpec) -> bool:
    """The kernel covers every spec but absmean scales (the reference's float64 sum) and two-level e4m3 scales (a
    tensor-wide amax before any tile: the reference serves them, on the GPU too) on contiguous float32 tensors whose
    groups are whole."""
    unsupported_scale = spec.int_scale == "absmean" or spec.fp_scale == "e4m3"
    if x.dtype != torch.float32 or not x.is_contiguous() or x.numel() == 0 or unsupported_scale:
        return False
    return spec.granularity != "group" or x.shape[-1] % spec.group_size == 0


def quantize_triton(x: torch.Tensor, spec: QuantSpec, out: torch.Tensor | None = None) -> torch.Tensor:
    """Fake-quantize a contiguous float32 tensor (on the GPU, or on CPU under TRITON_INTERPRET=1) into `out`
    (contiguous, x's shape and dtype) or a new tensor."""
    if not supports(x, spec):
        raise ValueError(f"quantize_triton: needs a contiguous float32 tensor with whole groups for '{spec}'")
    row_length = spec.group_size if spec.granularity == "group" else x.shape[-1]
    n_rows = x.numel() // row_length
    given_scale = spec.granularity in ("tensor", "unscaled") or row_length > MAX_FUSED_GROUP
    out = torch.empty_like(x) if out is None else out
    if given_scale:
        params = choose_qparams(x, spec)
        zero_point = params.zero_point if params.zero_point is not None else torch.zeros_like(params.scale)
        scale = params.scale.reshape(-1).expand(n_rows).contiguous()
        zero = zero_point.reshape(-1).expand(n_rows).contiguous()
        block = min(triton.next_power_of_2(row_length), MAX_FUSED_GROUP)
        rows_per_program = 1
    else:
        scale = zero = x  # not read: the kernel computes its own
        block = triton.next_power_of_2(row_length)
        rows_per_program = max(1, min(16, MAX_FUSED_GROUP // block))
    grid = (triton.cdiv(n_rows, rows_per_program), triton.cdiv(row_length, block))
    fp = spec.kind == "fp"
    fmt = spec.float_format if fp else None
    bits = spec.bits or 8
    q_min, q_max = code_range(bits, spec.symmetric, spec.narrow)
    divisor = scale_divisor(bits, spec.symmetric, spec.int_scale)
    _fake_quant_kernel[grid](
        x,
        out,
        scale,
        zero,
        n_rows,
        row_length,
        seed_key(spec.seed),
        ROWS=rows_per_program,
        BLOCK=block,
        GIVEN_SCALE=given_scale,
        IS_FP=fp,
        ROUNDING=_ROUNDING_CODES[spec.rounding],
        SYMMETRIC=spec.symmetric,
        Q_MIN=q_min,
        Q_MAX=q_max,
        DIVISOR=divisor,
        MULINV=spec.division == "mulinv",
        FP_MAX=fmt.max_value if fp else 0.0,
        MIN_NORMAL=2.0**fmt.min_normal_exponent if fp else 0.0,
        ULP_FACTOR=2.0**-fmt.mantissa_bits if fp else 0.0,
        MAX_EXPONENT=fmt.max_exponent if fp else 0,
        FP_SCALE=_FP_SCALE_CODES[spec.fp_scale],
        OVERFLOW_INF=spec.overflow == "inf",
    )
    return out
