"""The pure-torch reference for every QuantSpec: granularity, scale choice and fake quantization.

This is the source of truth the fast CPU path and the Triton kernels are tested against bit for bit.
Granularity runs along the last dim of x [..., K]: ``tensor`` one scale; ``channel``/``token`` one per row;
``group`` G consecutive elements of a row (the last group of a row may be shorter, as if zero-padded —
zeros change neither an absmax nor a min/max range that already includes 0).

The two steps are exposed separately for methods that fix scales first and quantize later (GPTQ quantizes
column by column with each group's scale chosen at the group's first column; AWQ searches clipped scales):

    params = choose_qparams(w[:, j:j + G], spec)                   # scale: [out, 1]
    w_q[:, j:j + 1] = fake_quantize_with(w[:, j:j + 1], params, spec)

Non-finite inputs: scales come from the finite values of a group; NaN stays NaN; ±Inf saturates (or stays
Inf with an fp spec's ``inf`` overflow). All arithmetic is float32 (fp rounding itself is exact, in
float64); the result is cast back to x's dtype.
"""

from dataclasses import dataclass

import torch

from qscaling.quant import fp_rounding, int_format
from qscaling.quant.rounding import uniform_like
from qscaling.quant.spec import QuantSpec, parse_spec


@dataclass(frozen=True)
class QuantParams:
    """Per-group quantization parameters, float32, shaped ``x.shape[:-1] + (n_groups,)``.

    n_groups = ceil(K / G) for ``group``, 1 for ``channel``/``token``; for ``tensor`` and ``unscaled`` every
    dim is 1. INT: ``scale`` is the step (x ≈ (q - zero_point)·scale) and ``zero_point`` an integer-valued
    float32 (0 when symmetric). FP: ``scale`` is the multiplier S applied before rounding (x ≈ q / S) and
    ``zero_point`` is None. FP with ``e4m3`` scales (NVFP4's two levels, fp_rounding.two_level_scales): ``scale``
    is the encoding multiplier, and x ≈ (q·block_scale)·tensor_scale with ``block_scale`` (E4M3 values, shaped as
    ``scale``) and ``tensor_scale`` (every dim 1).
    """

    scale: torch.Tensor
    zero_point: torch.Tensor | None
    block_scale: torch.Tensor | None = None
    tensor_scale: torch.Tensor | None = None


def group_size_along_rows(spec: QuantSpec, last_dim: int) -> int | None:
    """Elements per group along the last dim; None when one scale covers the whole tensor."""
    if spec.granularity == "group":
        return spec.group_size
    if spec.granularity in ("channel", "token"):
        return last_dim
    return None


def to_groups(x: torch.Tensor, group_size: int) -> torch.Tensor:
    """x [..., K] -> [..., ceil(K/G), G], zero-padding the last group of each row."""
    n_groups = -(-x.shape[-1] // group_size)
    padding = n_groups * group_size - x.shape[-1]
    if padding:
        x = torch.nn.functional.pad(x, (0, padding))
    return x.reshape(*x.shape[:-1], n_groups, group_size)


def from_groups(grouped: torch.Tensor, last_dim: int) -> torch.Tensor:
    """Inverse of to_groups: [..., n, G] -> [..., K]."""
    return grouped.reshape(*grouped.shape[:-2], -1)[..., :last_dim]


def _finite_or_zero(x: torch.Tensor) -> torch.Tensor:
    if torch.isfinite(x.sum()):  # then every element is: one reduction instead of a full-size mask and copy
        return x
    return torch.where(torch.isfinite(x), x, torch.zeros_like(x))


def choose_qparams(x: torch.Tensor, spec: QuantSpec | str, whole: torch.Tensor | None = None) -> QuantParams:
    """Scales (and zero points) for x [..., K] under spec; shapes in QuantParams. For e4m3 scales, the per-tensor
    scale comes from `whole` where given, the tensor x is a slice of (GPTQ chooses each group's scale on its slice of
    the weight), else from x."""
    spec = parse_spec(spec)
    x = x.detach().to(torch.float32)
    group_size = group_size_along_rows(spec, x.shape[-1])
    if spec.granularity == "unscaled":
        return QuantParams(scale=torch.ones((1,) * x.dim(), device=x.device), zero_point=None)
    if group_size is None:
        grouped = x.reshape((1,) * x.dim() + (-1,))  # [1, ..., 1, numel]: one group
    else:
        grouped = to_groups(x, group_size)
    finite = _finite_or_zero(grouped)
    if spec.kind == "fp":
        amax = finite.abs().amax(dim=-1)
        if spec.fp_scale == "e4m3":
            tensor_amax = finite if whole is None else _finite_or_zero(whole.detach().to(torch.float32))
            tensor_amax = tensor_amax.abs().amax().reshape((1,) * amax.dim())
            encode, block, tensor = fp_rounding.two_level_scales(amax, tensor_amax, spec.float_format)
            return QuantParams(scale=encode, zero_point=None, block_scale=block, tensor_scale=tensor)
        return QuantParams(scale=fp_rounding.block_scale(amax, spec.float_format, spec.fp_scale), zero_point=None)
    if spec.int_scale == "absmean":
        counts = torch.full(grouped.shape[:-1], grouped.shape[-1], dtype=torch.float64, device=x.device)
        if group_size is not None and x.shape[-1] % group_size:
            counts[..., -1] = x.shape[-1] % group_size  # the zero-padded last group of each row
        scale = int_format.absmean_scale(finite.abs().sum(dim=-1, dtype=torch.float64), counts)
        return QuantParams(scale=scale, zero_point=torch.zeros_like(scale))
    if spec.symmetric:
        scale = int_format.symmetric_scale(finite.abs().amax(dim=-1), spec.bits, spec.int_scale)
        return QuantParams(scale=scale, zero_point=torch.zeros_like(scale))
    scale, zero_point = int_format.asymmetric_qparams(finite.amin(dim=-1), finite.amax(dim=-1), spec.bits)
    return QuantParams(scale=scale, zero_point=zero_point)


def fake_quantize_with(x: torch.Tensor, params: QuantParams, spec: QuantSpec | str) -> torch.Tensor:
    """Quantize-dequantize x [..., K] with given params (scale [..., n], n = ceil(K/G) or 1), same dtype.

    Works on a slice as well as on the whole tensor: a column block w[:, j:j+k] inside one group takes
    that group's params[:, g:g+1]. Stochastic rounding draws from (spec.seed, element index within x).
    """
    spec = parse_spec(spec)
    x32 = x.to(torch.float32)
    uniform = uniform_like(x32, spec.seed) if spec.rounding == "stochastic" else None
    group_size = group_size_along_rows(spec, x.shape[-1])
    scale, zero_point, block_scale = params.scale, params.zero_point, params.block_scale
    if group_size is not None and spec.granularity == "group":
        x32 = to_groups(x32, group_size)
        uniform = to_groups(uniform, group_size) if uniform is not None else None
        scale = scale.unsqueeze(-1)
        zero_point = zero_point.unsqueeze(-1) if zero_point is not None else None
        block_scale = block_scale.unsqueeze(-1) if block_scale is not None else None
    if spec.kind == "fp":
        rounded = fp_rounding.round_to_format(x32 * scale, spec.float_format, spec.rounding, spec.overflow, uniform)
        # q·block_scale is exact (a few significant bits each): the one rounding is the tensor scale's.
        out = rounded / scale if block_scale is None else (rounded * block_scale) * params.tensor_scale
    else:
        out = int_format.fake_quantize_int(
            x32, scale, zero_point, spec.bits, spec.symmetric, spec.division, spec.rounding, uniform, spec.narrow
        )
    if spec.granularity == "group":
        out = from_groups(out, x.shape[-1])
    return out.to(x.dtype)


def quantize_reference(x: torch.Tensor, spec: QuantSpec | str) -> torch.Tensor:
    """Fake-quantize x under spec with the reference arithmetic: same dtype and shape as x."""
    spec = parse_spec(spec)
    if x.numel() == 0:
        return x.clone()
    if x.dim() == 0:  # a scalar is a one-element row
        return quantize_reference(x.reshape(1), spec).reshape(())
    return fake_quantize_with(x, choose_qparams(x, spec), spec)
