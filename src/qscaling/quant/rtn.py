"""Round-to-nearest (RTN) weight quantization: each Linear's weight fake-quantized on its own grid, no data.

The baseline that GPTQ and AWQ are measured against (Kumar et al. 2024, Fig. 11; Ouyang et al. 2024).
"""

import torch
from torch import nn

from qscaling.quant import quantize


def rtn_quantize_linear(module: nn.Linear, spec) -> None:
    """Replace `module.weight` in place by its fake-quantized value at `spec` (QuantSpec or string)."""
    with torch.no_grad():
        module.weight.copy_(quantize(module.weight, spec))
