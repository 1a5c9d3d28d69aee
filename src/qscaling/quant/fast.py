"""The CPU fast path: one fused, compiled loop per format, bit-exact with qscaling.quant.reference.

Eager fake quantization runs 10–30× below memory bandwidth because every step allocates and streams a
full-size temporary. Here the same float32 arithmetic is written so that torch.compile (Inductor's C++
backend) fuses it into one vectorised pass per group: amax, scale, round, clamp, dequantize.

Exactness: INT follows the reference operation by operation. FP replaces the reference's float64 frexp
with float32 arithmetic that is exact by construction: nearest-even rounds by Veltkamp splitting (no bit
casts, which Inductor does not vectorise); the other modes read the binade from the exponent field, where
2^e·2^-M is an exact ulp, a/ulp < 2^(M+1) is exact and floor(r + 0.5) is exact for r < 2^23. This holds
under Inductor's default flags (no FMA contraction, no reassociation), which `_exact_float_arithmetic`
checks before choosing the split.

Compiled loops are specialised per (spec, group size); the number of groups is dynamic, so one
compilation serves all tensors with the same row length. Inductor's CPU backend needs a C++ compiler;
without one on PATH the dispatcher keeps to the reference. Inputs are taken as [n_groups, G] views; ragged
groups and non-contiguous inputs are left to the reference by the dispatcher (`supports`).
"""

import functools
import itertools
import os
import shutil
from pathlib import Path

import torch

from qscaling.quant.formats import FloatFormat
from qscaling.quant.fp_rounding import E4M3, two_level_constants
from qscaling.quant.int_format import code_range, scale_divisor
from qscaling.quant.rounding import mix32, seed_key
from qscaling.quant.spec import QuantSpec

FLOAT32_MAX = torch.finfo(torch.float32).max
FLOAT32_TINY = torch.finfo(torch.float32).tiny
_EXPONENT_MASK = 0x7F800000
_COMPILE_IDS = itertools.count()
CXX_AVAILABLE = any(shutil.which(name) for name in (os.environ.get("CXX", "g++"), "g++", "c++", "clang++"))


def fits_rows(x: torch.Tensor, spec: QuantSpec) -> bool:
    """Whether x is a float32, contiguous CPU tensor of whole groups: what the row arithmetic below takes."""
    if x.device.type != "cpu" or x.dtype != torch.float32 or not x.is_contiguous() or x.numel() == 0:
        return False
    return spec.granularity != "group" or x.shape[-1] % spec.group_size == 0


def supports(x: torch.Tensor, spec: QuantSpec) -> bool:
    """Whether the compiled fast path handles x: `fits_rows`, a C++ compiler exists, and the scale is not absmean
    (whose float64 sum the reference computes; its use, BitNet's per-tensor weights, is small)."""
    return CXX_AVAILABLE and fits_rows(x, spec) and spec.int_scale != "absmean"


def _grouped_view(x: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """x as [n_groups, G]: one row per scale (tensor/unscaled: a single row)."""
    if spec.granularity == "group":
        return x.view(-1, spec.group_size)
    if spec.granularity in ("channel", "token"):
        return x.view(-1, x.shape[-1])
    return x.view(1, -1)


def _uniform(groups: torch.Tensor, seed: int) -> torch.Tensor:
    """rounding.uniform_like for a contiguous [n, G] view: the row-major index is the flat index."""
    index = torch.arange(groups.numel(), dtype=torch.int64).view(groups.shape) & 0xFFFFFFFF
    return (mix32(index ^ seed_key(seed)) >> 8).to(torch.float32) * 2.0**-24


def _round_signed(y: torch.Tensor, rounding: str, seed: int) -> torch.Tensor:
    """rounding.round_signed in float32: exact for |y| < 2^23, and larger |y| only meet the clamp."""
    if rounding == "nearest-even":
        return torch.round(y)
    magnitude = y.abs()
    if rounding == "nearest-away":
        return torch.copysign(torch.floor(magnitude + 0.5), y)
    floor = torch.floor(magnitude)
    return torch.copysign(floor + (_uniform(y, seed) < magnitude - floor).to(torch.float32), y)


def _int_rows(groups: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    if spec.symmetric:
        q_min, q_max = code_range(spec.bits, symmetric=True, narrow=spec.narrow)
        divisor = scale_divisor(spec.bits, True, spec.int_scale)
        magnitude = groups.abs()
        amax = torch.where(magnitude <= FLOAT32_MAX, magnitude, 0.0).amax(dim=-1, keepdim=True)
        scale = torch.clamp(amax / divisor, min=FLOAT32_TINY)
        zero_point = torch.zeros_like(scale)
    else:
        q_min, q_max = 0, 2**spec.bits - 1
        finite = torch.where(groups.abs() <= FLOAT32_MAX, groups, 0.0)
        low = torch.clamp(finite.amin(dim=-1, keepdim=True), max=0.0)
        high = torch.clamp(finite.amax(dim=-1, keepdim=True), min=0.0)
        scale = torch.clamp((high - low) / q_max, min=FLOAT32_TINY)
        zero_point = torch.clamp(torch.round(-low / scale), 0, q_max)
    scaled = groups / scale if spec.division == "div" else groups * torch.reciprocal(scale)
    codes = torch.clamp(_round_signed(scaled, spec.rounding, spec.seed) + zero_point, q_min, q_max)
    # The reference's "+ zero_point" turns -0 into +0; Inductor folds "+ 0", so do it explicitly.
    codes = torch.where(codes == 0, 0.0, codes)
    return (codes - zero_point) * scale


def _power_of_two(exponent: torch.Tensor) -> torch.Tensor:
    """2^exponent as float32 for integer exponents in -127..127 (2^-127 is a float32 subnormal)."""
    normal = ((torch.clamp(exponent, min=-126) + 127) << 23).view(torch.float32)
    return torch.where(exponent == -127, 2.0**-127, normal)


def _floor_log2(amax: torch.Tensor) -> torch.Tensor:
    """floor(log2 amax) as int32 for positive float32 amax, subnormals included."""
    subnormal = amax < FLOAT32_TINY
    widened = torch.where(subnormal, amax * 2.0**64, amax)
    exponent = ((widened.view(torch.int32) >> 23) & 0xFF) - 127
    return exponent - torch.where(subnormal, 64, 0).to(torch.int32)


def _fp_scale(amax: torch.Tensor, spec: QuantSpec, fmt: FloatFormat) -> torch.Tensor:
    """fp_rounding.block_scale in float32 bit arithmetic."""
    if spec.granularity == "unscaled":
        return torch.ones_like(amax)
    if spec.fp_scale == "e8m0":
        exponent = torch.clamp(fmt.max_exponent - _floor_log2(torch.clamp(amax, min=2.0**-149)), -127, 127)
        scale = _power_of_two(exponent)
    else:
        scale = torch.clamp(torch.full_like(amax, fmt.max_value) / amax, max=FLOAT32_MAX)
        if spec.fp_scale == "pow2":
            exponent_bits = torch.clamp(scale, min=FLOAT32_TINY).view(torch.int32) & _EXPONENT_MASK
            scale = exponent_bits.view(torch.float32)
    return torch.where(amax > 0, scale, 1.0)


def _e4m3_nearest_even(value: torch.Tensor) -> torch.Tensor:
    """Non-negative float32 values <= 448 rounded to E4M3, ties to even, subnormals included: value / ulp is exact
    (ulp a power of two from the exponent field), and so are its rounding and the product."""
    binade = (value.view(torch.int32) & _EXPONENT_MASK).view(torch.float32)
    ulp = torch.clamp(binade, min=2.0**E4M3.min_normal_exponent) * 2.0**-E4M3.mantissa_bits
    return torch.round(value / ulp) * ulp


def _two_level_scales(amax: torch.Tensor, fmt: FloatFormat) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """fp_rounding.two_level_scales for the groups' amaxes [n, 1], the tensor's amax their maximum."""
    largest, inverse_max = two_level_constants(fmt)
    tensor_amax = amax.amax()
    global_encode = torch.clamp(torch.full_like(tensor_amax, largest) / tensor_amax, max=FLOAT32_MAX)
    global_decode = torch.reciprocal(global_encode)
    block_scale = _e4m3_nearest_even(torch.clamp(amax * (global_encode * inverse_max), max=E4M3.max_value))
    encode = torch.clamp(torch.reciprocal(block_scale * global_decode), max=FLOAT32_MAX)
    return encode, block_scale, tensor_amax / largest


def _exact_float_arithmetic() -> bool:
    """Inductor's defaults: no FMA contraction, no reassociation — what the Veltkamp split relies on."""
    import torch._inductor.config  # imports triton: only once a compilation is due anyway

    cpp = torch._inductor.config.cpp
    return cpp.enable_floating_point_contract_flag == "off" and not cpp.enable_unsafe_math_opt_flag


def _round_nearest_even_split(magnitude: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """Round non-negative float32 values to the format's grid, ties to even, with no bit casts.

    Veltkamp's split (γ = σ·a, a_hi = γ + (a − γ), σ = 2^(23−M) + 1) rounds a to M+1 significant bits, to
    nearest even (checked exhaustively over whole binades for M = 0..10), as long as σ·a does not
    overflow — a is capped at 2·max <= 2^66 for E <= 7, which still rounds above the max and overflows.
    Below the smallest normal binade the ulp is fixed and (a + C) − C with C = 2^(e_min − M + 23) rounds.
    """
    capped = torch.clamp(magnitude, max=2 * fmt.max_value)
    product = capped * (2.0 ** (23 - fmt.mantissa_bits) + 1)
    normal = product + (capped - product)
    shift = 2.0 ** (fmt.min_normal_exponent - fmt.mantissa_bits + 23)
    subnormal = (capped + shift) - shift
    return torch.where(capped < 2.0**fmt.min_normal_exponent, subnormal, normal)


def _dequantized(quantized, scale, block_scale, tensor_scale) -> torch.Tensor:
    """q / S, or (q·block_scale)·tensor_scale under two-level scales (fp_rounding.two_level_scales)."""
    return quantized / scale if block_scale is None else (quantized * block_scale) * tensor_scale


def _fp_rows(groups: torch.Tensor, spec: QuantSpec, fmt: FloatFormat, exact_arithmetic: bool) -> torch.Tensor:
    amax = torch.where(groups.abs() <= FLOAT32_MAX, groups.abs(), 0.0).amax(dim=-1, keepdim=True)
    if spec.fp_scale == "e4m3":
        scale, block_scale, tensor_scale = _two_level_scales(amax, fmt)
    else:
        scale, block_scale, tensor_scale = _fp_scale(amax, spec, fmt), None, None
    scaled = groups * scale
    overflow_value = float("inf") if spec.overflow == "inf" else fmt.max_value
    if spec.rounding == "nearest-even" and fmt.exponent_bits <= 7 and exact_arithmetic:
        rounded = _round_nearest_even_split(scaled.abs(), fmt)
        rounded = torch.where(rounded > fmt.max_value, overflow_value, rounded)
        return _dequantized(torch.copysign(rounded, scaled), scale, block_scale, tensor_scale)
    # Inf becomes float32's max, which rounds above the format's max and so overflows like Inf; NaN stays.
    magnitude = torch.clamp(scaled.abs(), max=FLOAT32_MAX)
    binade = (magnitude.view(torch.int32) & _EXPONENT_MASK).view(torch.float32)
    ulp = torch.clamp(binade, min=2.0**fmt.min_normal_exponent) * 2.0**-fmt.mantissa_bits
    steps = magnitude / ulp
    if spec.rounding == "nearest-even":
        steps = torch.round(steps)
    elif spec.rounding == "nearest-away":
        steps = torch.floor(steps + 0.5)
    else:
        floor = torch.floor(steps)
        steps = floor + (_uniform(groups, spec.seed) < steps - floor).to(torch.float32)
    rounded = steps * ulp
    rounded = torch.where(rounded > fmt.max_value, overflow_value, rounded)
    return _dequantized(torch.copysign(rounded, scaled), scale, block_scale, tensor_scale)


# The names torch gives its CPU code paths (ATEN_CPU_CAPABILITY): one Inductor cache folder each.
_CAPABILITIES = ("default", "avx2", "avx512", "zvector", "vsx", "sve128", "sve256")


@functools.cache
def _inductor_cache_per_capability() -> None:
    """Inductor's cache keys leave out the vector ISA its C++ was generated for: code cached under one
    ATEN_CPU_CAPABILITY and reused under another fails to compile (`at::vec` undeclared under `default`). So the
    cache directory — the user's, or the one torch set for this process or its parent — gets one sub-folder per
    capability."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir  # private: read only when Inductor is used

    base = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or default_cache_dir())
    if base.name in _CAPABILITIES:
        base = base.parent
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(base / torch.backends.cpu.get_cpu_capability().lower())


@functools.cache
def _compiled_for(spec: QuantSpec):
    """One compiled loop per spec; Dynamo specialises on the group size and keeps the group count dynamic."""
    _inductor_cache_per_capability()
    fmt = spec.float_format if spec.kind == "fp" else None
    exact_arithmetic = _exact_float_arithmetic()

    def fake_quantize_rows(groups: torch.Tensor, out: torch.Tensor) -> None:
        if fmt is None:
            out.copy_(_int_rows(groups, spec))
        else:
            out.copy_(_fp_rows(groups, spec, fmt, exact_arithmetic))

    # Dynamo remembers what changed between calls per code location (file, line, name) and turns changed
    # Python constants into symbolic inputs. Across specs that would make a format's max and exponents
    # symbolic — and inexact — so every spec gets a code object of its own name; only the group count
    # is ever dynamic.
    unique_name = f"fake_quantize_{next(_COMPILE_IDS)}"
    fake_quantize_rows.__code__ = fake_quantize_rows.__code__.replace(co_name=unique_name, co_qualname=unique_name)
    return torch.compile(fake_quantize_rows, fullgraph=True)


def quantize_fp_eager(x: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """An FP spec's float32 row arithmetic run op by op, uncompiled: the reference's bits at 2.5–4.5x its speed
    (its float64 frexp and NaN / Inf handling cost more ops than the exponent-field binade), for the small
    tensors of QAT steps, where a compiled loop would never repay its start. Takes what `fits_rows` accepts.

    Eager ops round one at a time (no contraction), so the module docstring's exactness argument holds as is;
    the exponent-field binade serves every rounding mode and E <= 8.
    """
    if spec.kind != "fp" or not fits_rows(x, spec):
        raise ValueError(f"quantize_fp_eager: needs an fp spec and a contiguous float32 CPU tensor, got '{spec}'")
    return _fp_rows(_grouped_view(x, spec), spec, spec.float_format, exact_arithmetic=False).view(x.shape)


def quantize_fast(x: torch.Tensor, spec: QuantSpec, out: torch.Tensor | None = None) -> torch.Tensor:
    """Fake-quantize a float32, contiguous CPU tensor (see `supports`) into `out` (or a new tensor)."""
    if not supports(x, spec):
        raise ValueError(f"quantize_fast: needs a contiguous float32 CPU tensor with whole groups for '{spec}'")
    out = torch.empty_like(x) if out is None else out
    groups = _grouped_view(x, spec)
    torch._dynamo.maybe_mark_dynamic(groups, 0)
    _compiled_for(spec)(groups, out.view(groups.shape))
    return out
