"""`quantize(x, spec)`: route a tensor to the fastest path that is bit-exact with the reference.

CUDA tensors go to the Triton kernels (qscaling.kernels) when triton is importable; large CPU tensors go
to the compiled CPU path (qscaling.quant.fast) once this process has quantized enough to repay starting it;
other CPU tensors of whole groups under an FP spec run that path's float32 arithmetic eagerly (faster than the
reference's float64); everything else — INT specs on small tensors, where a compilation would cost more than it
saves, ragged last groups, and specs a kernel does not cover — runs the reference. All paths compute in float32 and give the same bits, so
the choice never changes a result.
"""

import importlib.util

import torch

from qscaling.quant import fast
from qscaling.quant.reference import quantize_reference
from qscaling.quant.spec import QuantSpec, parse_spec

# Below this many elements the reference's eager ops beat a first-call compilation (~1-5 s per spec).
MIN_ELEMENTS_FOR_FAST_PATH = 1 << 16
# Starting the compiled path costs a process ~5-6 s (Dynamo and Inductor, even from a warm cache); it saves
# ~4 ns per element over the reference. So a process first quantizes this many elements of fast-path-sized
# tensors on the reference (about that long): a short job (one checkpoint scored, a small run trained) never
# pays for a compiler it would not repay.
FAST_PATH_AFTER_ELEMENTS = 1 << 30
TRITON_AVAILABLE = importlib.util.find_spec("triton") is not None
_reference_elements = 0  # fast-path-sized elements this process has quantized on the reference so far


def start_fast_path() -> None:
    """Send fast-path-sized tensors to the compiled path from now on in this process (benchmarks, long jobs)."""
    global _reference_elements
    _reference_elements = max(_reference_elements, FAST_PATH_AFTER_ELEMENTS)


def quantize(x: torch.Tensor, spec: QuantSpec | str) -> torch.Tensor:
    """Fake-quantize (quantize, then dequantize) x under spec; same dtype and shape out.

    The result carries no gradient (rounding has none); training goes through qscaling.quant.qat's
    straight-through estimator, which calls this in its forward pass.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"quantize: x must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"quantize: x must be a floating-point tensor, got {x.dtype}")
    spec = parse_spec(spec)
    if x.numel() == 0 or x.dim() == 0:
        return quantize_reference(x.detach(), spec)
    x32 = x.detach().to(torch.float32).contiguous()
    if x.is_cuda and TRITON_AVAILABLE:
        from qscaling.kernels import fake_quant

        if fake_quant.supports(x32, spec):
            return fake_quant.quantize_triton(x32, spec).to(x.dtype)
    if x.device.type == "cpu" and x.numel() >= MIN_ELEMENTS_FOR_FAST_PATH and fast.supports(x32, spec):
        global _reference_elements
        if _reference_elements >= FAST_PATH_AFTER_ELEMENTS:
            return fast.quantize_fast(x32, spec).to(x.dtype)
        _reference_elements += x.numel()
    if spec.kind == "fp" and fast.fits_rows(x32, spec):
        return fast.quantize_fp_eager(x32, spec).to(x.dtype)
    return quantize_reference(x.detach(), spec)
