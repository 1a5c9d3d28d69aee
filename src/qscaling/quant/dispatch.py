"""`quantize(x, spec)`: route a tensor to the fastest path that is bit-exact with the reference."""

import torch

from qscaling.quant.reference import quantize_reference
from qscaling.quant.spec import QuantSpec, parse_spec


def quantize(x: torch.Tensor, spec: QuantSpec | str) -> torch.Tensor:
    """Fake-quantize (quantize, then dequantize) x under spec; same dtype and shape out."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"quantize: x must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"quantize: x must be a floating-point tensor, got {x.dtype}")
    return quantize_reference(x, parse_spec(spec))
