"""`quantize(x, spec)`: route a tensor to the fastest path that is bit-exact with the reference.

CUDA tensors go to the Triton kernels (qscaling.kernels) when triton is importable; CPU tensors to the C++ kernel
(qscaling.quant.cpu_kernel, built once per machine and cached on disk) for every spec it covers — all but
stochastic rounding and absmean scales. Where it cannot be built (no C++ compiler or ninja), or for the specs it
leaves out: large CPU tensors go to the Inductor-compiled path (qscaling.quant.fast) once this process has
quantized enough to repay starting it; other CPU tensors of whole groups under an FP spec run that path's float32
arithmetic eagerly (faster than the reference's float64); everything else runs the reference. All paths compute
in float32 and give the same bits, so the choice never changes a result.
"""

import importlib.util

import torch

from qscaling.quant import cpu_kernel, fast
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


def quantize(x: torch.Tensor, spec: QuantSpec | str, out: torch.Tensor | None = None) -> torch.Tensor:
    """Fake-quantize (quantize, then dequantize) x under spec; same dtype and shape out.

    `out`, a tensor of x's shape, dtype and device that shares no memory with x, receives the result and is
    returned. A fresh result costs the allocation and first touch of its pages on every call, which for a large
    tensor takes half to all as long again as the compiled quantization itself (`qscaling bench quant`).

    The result carries no gradient (rounding has none); training goes through qscaling.quant.qat's
    straight-through estimator, which calls this in its forward pass.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"quantize: x must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"quantize: x must be a floating-point tensor, got {x.dtype}")
    spec = parse_spec(spec)
    if out is None:
        return _quantize_on_fastest_path(x.detach(), spec, None)
    _check_out(out, x)
    # The compiled paths write float32 into a contiguous buffer: such an `out` is written in place.
    kernel_out = out if out.dtype == torch.float32 and out.is_contiguous() else None
    result = _quantize_on_fastest_path(x.detach(), spec, kernel_out)
    if result is not out:
        out.copy_(result)
    return out


def _check_out(out, x: torch.Tensor) -> None:
    """`out` must be a tensor quantize(x) could have returned, in memory apart from x's."""
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"quantize: out must be a torch.Tensor, got {type(out).__name__}")
    if out.shape != x.shape:
        raise ValueError(f"quantize: out has shape {tuple(out.shape)}, x has {tuple(x.shape)}; they must match")
    if out.dtype != x.dtype:
        raise ValueError(f"quantize: out is {out.dtype}, x is {x.dtype}; they must match")
    if out.device != x.device:
        raise ValueError(f"quantize: out is on {out.device}, x on {x.device}; they must match")
    if out.requires_grad:
        raise ValueError("quantize: out requires grad, but the result carries none; pass a tensor that does not")
    if _memory_overlaps(out, x):
        raise ValueError("quantize: out shares memory with x; in-place quantization is not supported")


def _memory_overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the byte ranges the two tensors span intersect (interleaved views count as overlapping)."""
    if a.numel() == 0 or b.numel() == 0:
        return False

    def span(t: torch.Tensor) -> tuple[int, int]:
        last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
        return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()

    (a_start, a_end), (b_start, b_end) = span(a), span(b)
    return a_start < b_end and b_start < a_end


def _quantize_on_fastest_path(x: torch.Tensor, spec: QuantSpec, out: torch.Tensor | None) -> torch.Tensor:
    """x fake-quantized on the fastest bit-exact path; a compiled path writes into `out` (float32, contiguous)."""
    if x.numel() == 0 or x.dim() == 0:
        return quantize_reference(x, spec)
    x32 = x.to(torch.float32).contiguous()
    if x.is_cuda and TRITON_AVAILABLE:
        from qscaling.kernels import fake_quant  # triton: only on a GPU, and seconds to import

        if fake_quant.supports(x32, spec):
            return fake_quant.quantize_triton(x32, spec, out=out).to(x.dtype)
    if cpu_kernel.supports(x32, spec) and cpu_kernel.available():
        return cpu_kernel.quantize_cpu(x32, spec, out=out).to(x.dtype)
    if x.device.type == "cpu" and x.numel() >= MIN_ELEMENTS_FOR_FAST_PATH and fast.supports(x32, spec):
        global _reference_elements
        if _reference_elements >= FAST_PATH_AFTER_ELEMENTS:
            return fast.quantize_fast(x32, spec, out=out).to(x.dtype)
        _reference_elements += x.numel()
    if spec.kind == "fp" and fast.fits_rows(x32, spec):
        return fast.quantize_fp_eager(x32, spec).to(x.dtype)
    return quantize_reference(x, spec)
