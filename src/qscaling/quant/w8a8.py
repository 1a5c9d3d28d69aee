"""W8A8 vector-wise quantization (Ahmadian et al. 2023, Sec. 2; LLM.int8() without outlier decomposition):
per-token symmetric INT8 activations × per-output-channel symmetric INT8 weights, no calibration.

Weights are fake-quantized once (RTN, `ptq`); activations are fake-quantized at run time by putting an
`InputQuantizedLinear` in each Linear's place — same parameters and state-dict keys, so the model stays a plain
transformers model that saves with `save_pretrained`; `as_trained.load_quantized_model` re-applies the
input side.
The optional outlier threshold follows LLM.int8() (Dettmers et al. 2022, Sec. 3.2): input columns where
any token has |x| > t stay in full precision and the per-token scales come from the remaining columns.
(LLM.int8() also keeps those weight columns in 16 bit, but bitsandbytes dequantizes them from the same
row-wise INT8 weight, which is what the fake-quantized weight already holds.)
"""

import torch
from torch import nn
from torch.nn import functional as F

from qscaling.quant import parse_spec, quantize
from qscaling.quant.roles import linear_sharing_parameters

DEFAULT_ACTIVATION_SPEC = "int8:token"
LLM_INT8_THRESHOLD = 6.0  # LLM.int8()'s outlier magnitude


def fake_quantize_inputs(x: torch.Tensor, spec, outlier_threshold: float | None) -> torch.Tensor:
    """`x` (…, in_features) fake-quantized at `spec`, outlier columns (|x| > threshold anywhere) exact."""
    if outlier_threshold is None:
        return quantize(x, spec)
    outlier_columns = (x.abs() > outlier_threshold).reshape(-1, x.shape[-1]).any(dim=0)
    if not outlier_columns.any():
        return quantize(x, spec)
    regular = quantize(x.masked_fill(outlier_columns, 0.0), spec)
    return torch.where(outlier_columns, x, regular)


def check_outlier_threshold(outlier_threshold: float | None) -> None:
    """A ValueError unless the threshold is None (no outlier columns) or a positive magnitude."""
    if outlier_threshold is not None and not outlier_threshold > 0:
        raise ValueError(f"outlier_threshold: got {outlier_threshold}, must be a positive magnitude or None")


class InputQuantizedLinear(nn.Linear):
    """An nn.Linear whose input is fake-quantized before the matmul (weights are quantized separately)."""

    activation_spec: object  # a QuantSpec
    outlier_threshold: float | None

    @classmethod
    def from_linear(cls, linear: nn.Linear, activation_spec, outlier_threshold: float | None) -> "InputQuantizedLinear":
        """`linear` (its own weight and bias Parameters) with its input fake-quantized at the parsed
        `activation_spec`."""
        module = linear_sharing_parameters(cls, linear)
        module.activation_spec = activation_spec
        module.outlier_threshold = outlier_threshold
        return module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(fake_quantize_inputs(x, self.activation_spec, self.outlier_threshold), self.weight, self.bias)


def quantize_linear_inputs(
    model: nn.Module, names, activation_spec=DEFAULT_ACTIVATION_SPEC, outlier_threshold=None
) -> None:
    """Make every Linear of `model` named in `names` fake-quantize its input at run time (in place: an
    `InputQuantizedLinear` takes its place)."""
    spec = parse_spec(activation_spec)
    check_outlier_threshold(outlier_threshold)
    for name in names:
        module = model.get_submodule(name)
        if not isinstance(module, nn.Linear):
            raise TypeError(f"modules: expected nn.Linear, got {type(module).__name__}")
        model.set_submodule(name, InputQuantizedLinear.from_linear(module, spec, outlier_threshold), strict=True)
