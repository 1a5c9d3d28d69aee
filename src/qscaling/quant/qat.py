"""Quantization-aware / low-precision training: fake-quantized Linears driven by a training-precision spec.

A training precision is a dict (the run spec's `training_precision`); every field is optional:

    weights, activations       forward GEMM inputs W and X (Sun et al. 2025 "P2", "P1"; Chen et al. W4A4)
    kv                         k/v projection outputs (Kumar et al. 2024's KV cache P_kv)
    backward_weight            W in dX = dY·W   (Sun et al. "P4")
    backward_activation        X in dW = dYᵀ·X  (Sun et al. "P6")
    backward_grad_output       dY in both backward GEMMs (Sun et al. "P3"/"P5")
    grad_output_gemms          which backward GEMMs `backward_grad_output` quantizes dY for: "both" (default),
                               "dx" (dX = dY·W only, Sun et al.'s P3) or "dw" (dW = dYᵀ·X only, P5)
    ste                        "clipped" (default): zero gradient where the forward quantizer clamped the
                               value; "identity": pass every gradient through
    exclude                    roles left in full precision (default ["lm_head"])
    overrides                  {role: {field: spec or null}}, e.g. Chen et al.'s FC2 input at 8 bits:
                               {"fc2": {"activations": "int8:g128"}}
    quantizer                  {weights: absmax|lsq|lwc, activations: absmax|lac}, both "absmax" by default:
                               how the scale of a symmetric INT weight / activation spec is found — its absmax,
                               or learned (`qscaling.quant.learnable`; Chen et al. 2025's Fig. 14 ablation)

Each tensor field is a quantization spec string (`int4:g128`, `fp:e4m3:b32`, ...) or null. Without backward
fields this is forward-only QAT with a straight-through estimator: the backward GEMMs use the tensors the
forward used (dX = dY·Q(W), dW = dYᵀ·Q(X)), exactly as autograd through fake-quant would. A backward field
instead re-quantizes the full-precision tensor with its own spec for that GEMM, as Sun et al. do.
KV: the k and v output channels of the projections are fake-quantized (with the same STE) before RoPE and
attention; for GPT-NeoX's fused QKV only its k and v channels are.
A learned quantizer's parameters (`weight_step`, `weight_clip_logit`, `input_clip_logit`) are registered on each
Linear it quantizes, so the optimizer trains them and the model's state dict carries them.

Checkpoints keep the latent (full-precision) weights and the learned quantizers' parameters;
`qscaling.quant.as_trained.load_as_trained` re-applies the run's precision, so a model is evaluated as it trained.
Post-training quantization (`qscaling.quant.ptq`) replaces a Linear's weight quantizer (`drop_weight_quantizers`)
and keeps its activation and KV quantizers.
"""

from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.nn import functional as F

from qscaling.quant import choose_qparams, code_range, cpu_kernel, parse_spec, quantize
from qscaling.quant.learnable import initial_parameter, learned_fake_quantize
from qscaling.quant.precision import (
    QUANTIZER_ATTRIBUTES,
    QUANTIZER_PARAMETER_NAMES,
    TENSOR_FIELDS,
    canonical_training_precision,
)
from qscaling.quant.roles import linear_sharing_parameters, linear_sites, model_layout
from qscaling.quant.rounding import round_signed, uniform_like
from qscaling.quant.w8a8 import fake_quantize_inputs


@dataclass(frozen=True)
class LinearPrecision:
    """The parsed specs one Linear trains with (None: full precision for that tensor)."""

    weights: object = None
    activations: object = None
    kv: object = None
    backward_weight: object = None
    backward_activation: object = None
    backward_grad_output: object = None
    clipped_ste: bool = True
    grad_output_gemms: str = "both"  # one of GRAD_OUTPUT_GEMMS
    weight_quantizer: str = "absmax"  # one of precision.WEIGHT_QUANTIZERS
    activation_quantizer: str = "absmax"  # one of precision.ACTIVATION_QUANTIZERS

    @property
    def is_full_precision(self) -> bool:
        return all(getattr(self, field) is None for field in TENSOR_FIELDS)

    @property
    def has_learned_quantizer(self) -> bool:
        return self.weight_quantizer != "absmax" or self.activation_quantizer != "absmax"

    @property
    def without_learned_quantizers(self) -> "LinearPrecision":
        """What `QuantizedLinearFunction` still applies around the learned quantizers' outputs."""
        return replace(
            self,
            weights=self.weights if self.weight_quantizer == "absmax" else None,
            activations=self.activations if self.activation_quantizer == "absmax" else None,
            weight_quantizer="absmax",
            activation_quantizer="absmax",
        )


def _per_element(params: torch.Tensor, x: torch.Tensor, spec) -> torch.Tensor:
    """A QuantParams field ([..., n_groups]) expanded to broadcast against x [..., K]."""
    if spec.granularity != "group":
        return params
    return params.repeat_interleave(spec.group_size, dim=-1)[..., : x.shape[-1]]


def clamp_mask(x: torch.Tensor, spec) -> torch.Tensor:
    """True where quantizing `x` at `spec` did not clamp it: where the clipped STE lets the gradient through.

    INT: the rounded code round(x/s) + z lies in the code range (torch.fake_quantize_*'s backward mask).
    FP: |x·S| rounds onto the format rather than past its maximum (it is below max + ½ ulp of the top binade).
    NaN elements pass nothing.
    """
    spec = parse_spec(spec)
    if never_clamps_finite(spec):
        return torch.isfinite(x)
    return clamp_mask_by_codes(x, spec)


def never_clamps_finite(spec) -> bool:
    """Whether `spec` maps every finite value inside its code range, so only non-finite elements are clamped:
    symmetric absmax INT rounded to nearest. Its scale s = amax/(2^(b-1)−1), with amax over the group's finite
    values and s at least the smallest normal float, keeps |x/s| within 2^(b-1)−1 plus a rounding error far
    below ½, so round(x/s) never leaves [−2^(b-1), 2^(b-1)−1]; a NaN or ±inf element gives a NaN or ±inf code."""
    return spec.kind == "int" and spec.symmetric and spec.int_scale == "absmax" and spec.rounding != "stochastic"


def _needed_clamp_mask(x: torch.Tensor, spec) -> torch.Tensor | None:
    """`clamp_mask`, or None where it would be all True — a spec that never clamps a finite value, on a tensor
    whose sum is finite, so that every element is — and multiplying the gradient by it would change nothing."""
    if never_clamps_finite(spec) and torch.isfinite(x.sum()):
        return None
    return clamp_mask(x, spec)


def quantize_with_clamp_mask(x: torch.Tensor, spec, clipped: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`quantize(x, spec)` and, for the clipped STE, `_needed_clamp_mask(x, spec)` — both from one pass of the C++
    kernel where it takes x; x itself and no mask when spec is None."""
    if spec is None:
        return x, None
    if clipped:
        spec = parse_spec(spec)
        x32 = x.detach().to(torch.float32).contiguous()
        if not never_clamps_finite(spec) and cpu_kernel.supports(x32, spec) and cpu_kernel.available():
            # A float32 gradient times a 0/1 float32 mask gives the bits of it times the bool mask, ~6x faster.
            mask = torch.empty(x.shape, dtype=torch.float32 if x.dtype == torch.float32 else torch.bool)
            return cpu_kernel.quantize_cpu(x32, spec, mask=mask).to(x.dtype), mask
    return quantize(x, spec), _needed_clamp_mask(x, spec) if clipped else None


def clamp_mask_by_codes(x: torch.Tensor, spec) -> torch.Tensor:
    """`clamp_mask` computed from the codes themselves, for every spec."""
    spec = parse_spec(spec)
    params = choose_qparams(x, spec)
    x32 = x.detach().float()
    scale = _per_element(params.scale, x32, spec)
    if spec.kind == "fp":
        fmt = spec.float_format
        half_top_ulp = 2.0 ** (fmt.max_exponent - fmt.mantissa_bits) / 2
        return (x32 * scale).abs() < fmt.max_value + half_top_ulp
    uniform = uniform_like(x32, spec.seed) if spec.rounding == "stochastic" else None
    scaled = x32 / scale if spec.division == "div" else x32 * torch.reciprocal(scale)
    codes = round_signed(scaled, spec.rounding, uniform) + _per_element(params.zero_point, x32, spec)
    low, high = code_range(spec.bits, spec.symmetric, spec.narrow)
    return (codes >= low) & (codes <= high)


class QuantizeSTE(torch.autograd.Function):
    """Fake quantization whose backward is the straight-through estimator, clipped or not."""

    @staticmethod
    def forward(ctx, x, spec, clipped):
        quantized, mask = quantize_with_clamp_mask(x, spec, clipped)
        ctx.clipped = mask is not None
        if ctx.clipped:
            ctx.save_for_backward(mask)
        return quantized

    @staticmethod
    def backward(ctx, grad):
        if not ctx.clipped:
            return grad, None, None
        (inside,) = ctx.saved_tensors
        return grad * inside, None, None


def fake_quantize_ste(x: torch.Tensor, spec, clipped: bool = True) -> torch.Tensor:
    """`quantize(x, spec)` in the forward pass; gradient 1 (0 where clamped, if `clipped`) in the backward."""
    return x if spec is None else QuantizeSTE.apply(x, spec, clipped)


def _quantize_or_keep(x: torch.Tensor, spec) -> torch.Tensor:
    return x if spec is None else quantize(x, spec)


def _backward_input(latent: torch.Tensor, forward: torch.Tensor, forward_spec, backward_spec) -> torch.Tensor:
    """What a backward GEMM multiplies for a latent tensor: its forward GEMM's input where no backward spec is set or
    the backward spec is the forward's (quantizing again would give the same bits), else Q_backward(latent)."""
    if backward_spec is None or backward_spec == forward_spec:
        return forward
    return quantize(latent, backward_spec)


class QuantizedLinearFunction(torch.autograd.Function):
    """y = Q_a(X)·Q_w(W)ᵀ + b whose backward GEMMs take their own quantized inputs (Sun et al. 2025, Fig. 2).

    dX = Q_g(dY)·W_b and dW = Q_g(dY)ᵀ·X_b, where W_b = Q_bw(W) if a backward-weight spec is set, else the
    forward's Q_w(W) (and likewise X_b); then the clipped STE zeroes dX / dW where the forward clamped X / W.
    With every spec None, the GEMMs are exactly those autograd records for F.linear (mm / addmm), so the
    gradients are bit-identical to torch's.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, precision: LinearPrecision):
        x_forward, x_mask = quantize_with_clamp_mask(x, precision.activations, precision.clipped_ste)
        w_forward, w_mask = quantize_with_clamp_mask(weight, precision.weights, precision.clipped_ste)
        x_backward = _backward_input(x, x_forward, precision.activations, precision.backward_activation)
        w_backward = _backward_input(weight, w_forward, precision.weights, precision.backward_weight)
        masks = [x_mask, w_mask]
        ctx.precision = precision
        ctx.has_bias = bias is not None
        ctx.mask_present = [mask is not None for mask in masks]
        ctx.save_for_backward(x_backward, w_backward, *[m for m in masks if m is not None])
        return torch.nn.functional.linear(x_forward, w_forward, bias)

    @staticmethod
    def backward(ctx, grad_output):
        x_backward, w_backward, *saved_masks = ctx.saved_tensors
        masks = [saved_masks.pop(0) if present else None for present in ctx.mask_present]
        quantized = _quantize_or_keep(grad_output, ctx.precision.backward_grad_output)
        gemms = ctx.precision.grad_output_gemms
        grad_for_x = quantized if gemms in ("both", "dx") else grad_output
        grad_for_w = quantized if gemms in ("both", "dw") else grad_output
        grad_shape = grad_output.shape
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = (
                grad_for_x.reshape(-1, grad_shape[-1]).mm(w_backward).reshape(*grad_shape[:-1], w_backward.shape[1])
            )
            grad_x = grad_x if masks[0] is None else grad_x * masks[0]
        if ctx.needs_input_grad[1]:
            # (Xᵀ·dY)ᵀ, the order addmm's backward uses for the transposed weight.
            grad_w = x_backward.reshape(-1, x_backward.shape[-1]).t().mm(grad_for_w.reshape(-1, grad_shape[-1])).t()
            grad_w = grad_w if masks[1] is None else grad_w * masks[1]
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad_output.reshape(-1, grad_output.shape[-1]).sum(0)
        return grad_x, grad_w, grad_b, None


class QuantizedTrainingLinear(nn.Linear):
    """An nn.Linear that trains through `QuantizedLinearFunction`: the same parameters and state-dict keys, plus
    those of its learned quantizers (`qscaling.quant.precision.QUANTIZER_PARAMETER_NAMES`).

    `kv_channels` lists the output channels fake-quantized at `precision.kv` (None entry: all outputs).
    """

    precision: LinearPrecision
    kv_channels: tuple

    @classmethod
    def from_linear(
        cls, linear: nn.Linear, precision: LinearPrecision, kv_channels: tuple = ()
    ) -> "QuantizedTrainingLinear":
        """`linear` training at `precision`: its own weight and bias Parameters (so the same optimizer state and
        state-dict keys), then a freshly initialised parameter for each learned quantizer."""
        module = linear_sharing_parameters(cls, linear)
        module.precision = precision
        module.kv_channels = kv_channels
        for field, attribute in QUANTIZER_ATTRIBUTES.items():
            quantizer = getattr(precision, attribute)
            if quantizer != "absmax":
                parameter = initial_parameter(quantizer, module.weight, getattr(precision, field))
                module.register_parameter(QUANTIZER_PARAMETER_NAMES[quantizer], parameter)
        return module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.is_grad_enabled():
            # Evaluation: the same forward without the clamp masks the backward would need.
            y = F.linear(self.quantized_input(x), self.quantized_weight(), self.bias)
        elif self.precision.has_learned_quantizer:
            # A learned quantizer has its own backward (to its input and to its parameter), so it runs ahead of
            # the GEMM, which applies the rest of the precision.
            if self.precision.activation_quantizer != "absmax":
                x = self.quantized_input(x)
            weight = self.weight if self.precision.weight_quantizer == "absmax" else self.quantized_weight()
            y = QuantizedLinearFunction.apply(x, weight, self.bias, self.precision.without_learned_quantizers)
        else:
            y = QuantizedLinearFunction.apply(x, self.weight, self.bias, self.precision)
        return self.quantize_kv(y)

    def quantized_input(self, x: torch.Tensor) -> torch.Tensor:
        """What the forward GEMM multiplies for input `x`: Q_a(x), or x where no activation spec is set."""
        quantizer = self.precision.activation_quantizer
        if quantizer == "absmax":
            return _quantize_or_keep(x, self.precision.activations)
        parameter = getattr(self, QUANTIZER_PARAMETER_NAMES[quantizer])
        return learned_fake_quantize(x, quantizer, parameter, self.precision.activations, self.precision.clipped_ste)

    def quantized_weight(self) -> torch.Tensor:
        """The weight the forward GEMM multiplies: Q_w(W), or the latent W where no weight spec is set."""
        quantizer = self.precision.weight_quantizer
        if quantizer == "absmax":
            return _quantize_or_keep(self.weight, self.precision.weights)
        parameter = getattr(self, QUANTIZER_PARAMETER_NAMES[quantizer])
        return learned_fake_quantize(
            self.weight, quantizer, parameter, self.precision.weights, self.precision.clipped_ste
        )

    def quantize_kv(self, y: torch.Tensor) -> torch.Tensor:
        """The projection's output with its k/v channels fake-quantized at `precision.kv`."""
        if self.precision.kv is None:
            return y
        for channels in self.kv_channels:
            if channels is None:
                y = fake_quantize_ste(y, self.precision.kv, self.precision.clipped_ste)
            else:
                channels = channels.to(y.device)
                part = fake_quantize_ste(y.index_select(-1, channels), self.precision.kv, self.precision.clipped_ste)
                y = y.index_copy(-1, channels, part)
        return y


def linear_precision(canonical: dict, role: str) -> LinearPrecision:
    """The precision of one role's Linears under a canonical training precision."""
    if role in canonical["exclude"]:
        return LinearPrecision(clipped_ste=canonical["ste"] == "clipped")
    specs = {field: canonical[field] for field in TENSOR_FIELDS}
    specs.update(canonical["overrides"].get(role, {}))
    parsed = {field: None if value is None else parse_spec(value) for field, value in specs.items()}
    # A role whose override leaves a tensor in full precision has no scale to learn for it.
    learned = {
        QUANTIZER_ATTRIBUTES[field]: name
        for field, name in canonical.get("quantizer", {}).items()
        if parsed[field] is not None
    }
    gemms = canonical.get("grad_output_gemms", "both")
    return LinearPrecision(**parsed, clipped_ste=canonical["ste"] == "clipped", grad_output_gemms=gemms, **learned)


def restart_learned_quantizers(model: nn.Module) -> None:
    """Each learned quantizer's parameter initialised afresh from its Linear's current weight, as `from_linear` does
    at step 0: for a run that takes another run's weights (`RunSpec.start_from`)."""
    with torch.no_grad():
        for module in model.modules():
            if not isinstance(module, QuantizedTrainingLinear):
                continue
            for field, attribute in QUANTIZER_ATTRIBUTES.items():
                quantizer = getattr(module.precision, attribute)
                if quantizer != "absmax":
                    fresh = initial_parameter(quantizer, module.weight, getattr(module.precision, field))
                    getattr(module, QUANTIZER_PARAMETER_NAMES[quantizer]).copy_(fresh)


def apply_training_precision(model: nn.Module, precision: dict | None) -> dict:
    """Put a quantized-training Linear in place of each of the model's Linears per `precision` (in place).

    Returns the canonical precision. Linears whose precision is all full-precision are left untouched, so a
    null precision leaves the model exactly as built.
    """
    canonical = canonical_training_precision(precision)
    blocks_path = model_layout(model).blocks
    kv_outputs = model_layout(model).kv_outputs
    for site in linear_sites(model):
        site_precision = linear_precision(canonical, site.role)
        if site_precision.is_full_precision:
            continue
        within_block = site.name.removeprefix(f"{blocks_path}.{site.block}.") if site.block is not None else None
        if site_precision.kv is not None and within_block not in kv_outputs:
            site_precision = replace(site_precision, kv=None)  # kv applies to k/v projections only
            if site_precision.is_full_precision:
                continue
        trained = QuantizedTrainingLinear.from_linear(site.module, site_precision, kv_outputs.get(within_block, ()))
        model.set_submodule(site.name, trained, strict=True)
    return canonical


def forward_quantizers(module: nn.Module) -> tuple[str, ...]:
    """The forward tensors ("weights", "activations", "kv") a Linear fake-quantizes as it trained; () for others."""
    if not isinstance(module, QuantizedTrainingLinear):
        return ()
    return tuple(field for field in ("weights", "activations", "kv") if getattr(module.precision, field) is not None)


def gemm_input(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """What a Linear's forward GEMM multiplies for input `x`: Q_a(x) for a quantized-training Linear, else x."""
    if not isinstance(module, QuantizedTrainingLinear):
        return x
    return module.quantized_input(x)


def drop_weight_quantizers(model: nn.Module, names) -> None:
    """Stop fake-quantizing the weights of the Linears of `model` named in `names` (in place): a post-training
    quantization of the weights replaces the training-time weight quantizer, while activation and KV quantizers stay
    as the model trained with them.

    A learned weight quantizer goes with its parameter; a Linear left with no quantizer at all is replaced by a plain
    nn.Linear on its parameters.
    """
    for name in names:
        module = model.get_submodule(name)
        if not isinstance(module, QuantizedTrainingLinear):
            continue
        if module.precision.weight_quantizer != "absmax":
            delattr(module, QUANTIZER_PARAMETER_NAMES[module.precision.weight_quantizer])
        module.precision = replace(module.precision, weights=None, backward_weight=None, weight_quantizer="absmax")
        if module.precision.is_full_precision:
            model.set_submodule(name, linear_sharing_parameters(nn.Linear, module), strict=True)


class InputQuantizedTrainingLinear(QuantizedTrainingLinear):
    """A quantized-training Linear under W8A8 (inference only): its input passes the run's quantizer, then W8A8's.

    W8A8 quantizes what the trained model computes with, so its quantizer comes after the training-time one; the
    k/v outputs keep theirs.
    """

    activation_spec: object  # a QuantSpec
    outlier_threshold: float | None

    @classmethod
    def from_trained_linear(
        cls, trained: QuantizedTrainingLinear, activation_spec, outlier_threshold: float | None
    ) -> "InputQuantizedTrainingLinear":
        """`trained` (its own parameters, learned quantizers' included, and precision) with W8A8's input quantizer at
        the parsed `activation_spec` after its own."""
        module = linear_sharing_parameters(cls, trained)
        module.precision = trained.precision
        module.kv_channels = trained.kv_channels
        module.activation_spec = activation_spec
        module.outlier_threshold = outlier_threshold
        return module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        trained_input = self.quantized_input(x)
        x = fake_quantize_inputs(trained_input, self.activation_spec, self.outlier_threshold)
        return self.quantize_kv(F.linear(x, self.quantized_weight(), self.bias))


def quantize_trained_linear_inputs(
    model: nn.Module, names, activation_spec, outlier_threshold: float | None = None
) -> None:
    """W8A8's run-time input quantization for the quantized-training Linears of `model` named in `names`, behind
    their own quantizers (in place: an `InputQuantizedTrainingLinear` takes each one's place)."""
    spec = parse_spec(activation_spec)
    for name in names:
        module = model.get_submodule(name)
        if not isinstance(module, QuantizedTrainingLinear):
            raise TypeError(f"modules: expected QuantizedTrainingLinear, got {type(module).__name__}")
        quantized = InputQuantizedTrainingLinear.from_trained_linear(module, spec, outlier_threshold)
        model.set_submodule(name, quantized, strict=True)
