"""Learnable INT fake-quantizers for quantization-aware training: LSQ, LWC and LAC (Chen et al. 2025, Fig. 14).

Each one is symmetric INT at a spec's granularity (groups of G along the last dim, one scale per row for
``channel``/``token``, one for ``tensor``) and differs from absmax only in where its scale s comes from:

    lsq   weights      s is a learned step per group/row, initialised to the absmax scale of the initial weights
                       (Esser et al. 2020, "Learned Step Size Quantization")
    lwc   weights      s = sigmoid(γ)·absmax scale, with a learned clipping logit γ per group/row, γ₀ = 4
                       (OmniQuant's learnable weight clipping, Shao et al. 2024, symmetric form)
    lac   activations  s = sigmoid(α)·absmax scale of each token or group, with one learned clipping logit α per
                       Linear, α₀ = 4 (learnable activation clipping, PACT-like)

The absmax scale is the spec's (amax/Qp, or GPTQ's convention under ``gptq``), of the detached tensor as for the
absmax quantizer: W gets no gradient through its own amax (OmniQuant's has one, but there W is frozen).
Forward: q = s·clamp(round(x/s), -Qn, Qp), with the spec's rounding and division. Backward
(`LearnedScaleQuantize`): x gets the straight-through estimator, zero where x/s lies outside [-Qn, Qp] (LSQ
eq. 5; 1 everywhere under `ste: identity`); s gets

    lsq, lwc   ∂q/∂s = round(x/s) - x/s inside, the clamped code (-Qn or Qp) outside (LSQ eq. 3; OmniQuant's
               round-STE autograd gives the same except where x/s is within ½ of a range end)
    lac        ∂q/∂s = 0 inside, the clamped code outside (PACT: the rounding passes straight through)

and LSQ scales its step's gradient by 1/sqrt(n·Qp) (LSQ §2.2), n the number of elements each step covers. The
logits reach s through sigmoid by autograd.
"""

import torch
from torch import nn

from qscaling.quant import choose_qparams, code_range, parse_spec
from qscaling.quant.int_format import FLOAT32_TINY
from qscaling.quant.reference import from_groups, group_size_along_rows, to_groups
from qscaling.quant.rounding import round_signed, uniform_like

INITIAL_CLIP_LOGIT = 4.0  # sigmoid(4) ≈ 0.982: start just inside absmax (OmniQuant's init)


def _grouped(x: torch.Tensor, spec) -> torch.Tensor:
    """x [..., K] as [..., n_groups, G], the elements each scale of `choose_qparams(x, spec)` covers."""
    if spec.granularity == "tensor":
        return x.reshape((1,) * x.dim() + (-1,))
    return to_groups(x, group_size_along_rows(spec, x.shape[-1]))


def _ungrouped(grouped: torch.Tensor, like: torch.Tensor, spec) -> torch.Tensor:
    if spec.granularity == "tensor":
        return grouped.reshape(like.shape)
    return from_groups(grouped, like.shape[-1])


def _scaled_codes(x: torch.Tensor, scale: torch.Tensor, spec) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x/s, the clamped integer codes, s), each grouped [..., n_groups, G] (s: [..., n_groups, 1]), float32."""
    x32 = x.detach().to(torch.float32)
    uniform = _grouped(uniform_like(x32, spec.seed), spec) if spec.rounding == "stochastic" else None
    # A step the optimizer pushed to or below zero quantizes as the smallest one; its gradient still reaches it.
    step = scale.detach().to(torch.float32).clamp(min=FLOAT32_TINY).unsqueeze(-1)
    grouped = _grouped(x32, spec)
    scaled = grouped / step if spec.division == "div" else grouped * torch.reciprocal(step)
    low, high = code_range(spec.bits, symmetric=True, narrow=spec.narrow)
    return scaled, torch.clamp(round_signed(scaled, spec.rounding, uniform), low, high), step


class LearnedScaleQuantize(torch.autograd.Function):
    """q = s·clamp(round(x/s), -Qn, Qp) with gradients to x and to s (module docstring)."""

    @staticmethod
    def forward(ctx, x, scale, spec, clipped_ste: bool, rounding_residual: bool, scale_gradient: float):
        scaled, codes, step = _scaled_codes(x, scale, spec)
        low, high = code_range(spec.bits, symmetric=True, narrow=spec.narrow)
        inside = (scaled >= low) & (scaled <= high)
        step_derivative = torch.where(inside, codes - scaled if rounding_residual else 0.0, codes)
        ctx.spec, ctx.scale_gradient = spec, scale_gradient
        ctx.save_for_backward(inside if clipped_ste else None, step_derivative)
        return _ungrouped(codes * step, x, spec).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        inside, step_derivative = ctx.saved_tensors
        grouped_grad = _grouped(grad.to(torch.float32), ctx.spec)
        grad_x = grad_scale = None
        if ctx.needs_input_grad[0]:
            grad_x = grad if inside is None else _ungrouped(grouped_grad * inside, grad, ctx.spec).to(grad.dtype)
        if ctx.needs_input_grad[1]:
            grad_scale = (grouped_grad * step_derivative).sum(-1) * ctx.scale_gradient
        return grad_x, grad_scale, None, None, None, None


def learned_fake_quantize(
    x: torch.Tensor, quantizer: str, parameter: torch.Tensor, spec, clipped_ste: bool = True
) -> torch.Tensor:
    """x fake-quantized at the symmetric INT `spec` by a learned quantizer ("lsq", "lwc" or "lac") whose step or
    clipping logit is `parameter`; differentiable in both when grad is enabled, the same values when it is not."""
    spec = parse_spec(spec)
    if quantizer == "lsq":
        _, positive_codes = code_range(spec.bits, symmetric=True, narrow=spec.narrow)
        scale, rounding_residual = parameter, True
        scale_gradient = (x.numel() / parameter.numel() * positive_codes) ** -0.5
    else:
        scale = choose_qparams(x, spec).scale * torch.sigmoid(parameter)
        rounding_residual, scale_gradient = quantizer == "lwc", 1.0
    if not torch.is_grad_enabled():
        _, codes, step = _scaled_codes(x, scale, spec)
        return _ungrouped(codes * step, x, spec).to(x.dtype)
    return LearnedScaleQuantize.apply(x, scale, spec, clipped_ste, rounding_residual, scale_gradient)


def initial_parameter(quantizer: str, weight: torch.Tensor, spec) -> nn.Parameter:
    """A fresh learned quantizer's parameter for a Linear with `weight` (spec: the tensor's INT spec).

    lsq: the absmax step of `weight`, one per group/row; lwc: logit 4 per group/row; lac: one logit 4.
    """
    if quantizer == "lac":
        return nn.Parameter(torch.tensor(INITIAL_CLIP_LOGIT, device=weight.device))
    absmax_scale = choose_qparams(weight, spec).scale
    if quantizer == "lsq":
        return nn.Parameter(absmax_scale)
    return nn.Parameter(torch.full_like(absmax_scale, INITIAL_CLIP_LOGIT))
