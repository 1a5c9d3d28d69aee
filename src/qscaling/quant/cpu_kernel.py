"""The C++ CPU kernel (`qscaling/kernels/fake_quant_cpu.cpp`): fake quantization in one pass per group, the
reference's bits for every spec but stochastic rounding and absmean scales.

It is built by torch's cpp_extension the first time a process needs it (30–60 s, once per machine, CPU path,
checkout, Python and torch) and cached on disk (`TORCH_EXTENSIONS_DIR`, default `~/.cache/torch_extensions`); later
processes load the cached library in well under a second, so every job — a QAT step on tensors of a few thousand
elements as much as a 4096² benchmark — takes it with no start-up to repay. Built without FMA contraction or
fast-math, with AVX2 or AVX-512 where torch's CPU path uses them (`ATEN_CPU_CAPABILITY=default`: scalar code); the
bits are the same either way; large tensors are split over torch's own OpenMP threads (`_openmp_flags`).
Without a C++ compiler or ninja the build fails once, says why in one warning, and `quantize` keeps its other
paths.
"""

import contextlib
import fcntl
import functools
import hashlib
import os
import sys
import warnings
from pathlib import Path

import torch

from qscaling.quant.int_format import code_range, scale_divisor
from qscaling.quant.reference import group_size_along_rows
from qscaling.quant.spec import QuantSpec

SOURCE = Path(__file__).resolve().parents[1] / "kernels" / "fake_quant_cpu.cpp"
# Wider vectors, never FMA (-ffp-contract=off besides): the same IEEE operations, so the same bits on every path.
_AVX512 = ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mprefer-vector-width=512"]
_VECTOR_FLAGS = {"avx2": ["-mavx2"], "avx512": _AVX512}
_ROUNDING = {"nearest-even": 0, "nearest-away": 1}
_FP_SCALES = {"fp32": 0, "pow2": 1, "e8m0": 2, "e4m3": 3}


def supports(x: torch.Tensor, spec: QuantSpec) -> bool:
    """Whether the kernel takes x: a contiguous float32 CPU tensor, a spec rounded to nearest without absmean."""
    return (
        x.device.type == "cpu"
        and x.dtype == torch.float32
        and x.is_contiguous()
        and x.numel() > 0
        and spec.rounding in _ROUNDING
        and spec.int_scale != "absmean"
    )


def _build_name(capability: str) -> str:
    """The build's name, one per CPU path, checkout, Python and torch: torch's build file names the source's path,
    so two checkouts sharing one build would rebuild it in turn, each time a process of the other loads it; a
    library built against one Python or torch does not load in another."""
    key = f"{SOURCE}|{sys.implementation.cache_tag}|{torch.__version__}"
    return f"qscaling_fake_quant_{capability}_{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def build_directory() -> Path:
    """Where this process's build of the kernel lives (made if missing): one folder per `_build_name`."""
    from torch.utils.cpp_extension import get_default_build_root  # the build machinery loads only when needed

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root()
    directory = Path(root) / _build_name(torch.backends.cpu.get_cpu_capability().lower())
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@contextlib.contextmanager
def _exclusive(directory: Path):
    """Held while torch builds or loads the kernel in `directory`: an flock, which the OS releases with its process
    however it ends. torch's own lock (the file `lock`, taken on every load) is not released by a process killed
    while it holds it (SIGKILL, or SIGTERM: Snakemake cancelling its jobs), and every later load would wait on it
    forever. Under the flock no torch lock can be live, so a `lock` found there is left over, and goes."""
    with open(directory / "qscaling.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        (directory / "lock").unlink(missing_ok=True)
        yield


def _openmp_flags() -> list[str]:
    """["-fopenmp"] where torch runs on a libgomp already loaded in this process: the kernel's libgomp.so.1 then
    resolves to that same library, so at::parallel_for shares torch's threads. Elsewhere (another OpenMP runtime,
    or none) a second runtime would fight torch's for the cores, and the kernel runs on one thread."""
    maps = Path("/proc/self/maps")
    loaded = maps.read_text() if maps.exists() else ""
    return ["-fopenmp"] if "libgomp.so.1" in loaded else []


@functools.cache
def _extension():
    """The built kernel module, or None (with one warning) where it cannot be built here."""
    from torch.utils.cpp_extension import load  # the build machinery loads only when the kernel is first needed

    capability = torch.backends.cpu.get_cpu_capability().lower()
    openmp = _openmp_flags()
    try:
        directory = build_directory()
        with _exclusive(directory):
            return load(
                name=directory.name,
                sources=[str(SOURCE)],
                extra_cflags=[
                    "-O3",
                    "-ffp-contract=off",
                    "-fno-fast-math",
                    "-fno-trapping-math",
                    *_VECTOR_FLAGS.get(capability, []),
                    *openmp,
                ],
                extra_ldflags=openmp,
                build_directory=str(directory),
                verbose=False,
            )
    except Exception as error:  # no compiler, no ninja, a read-only cache: the other paths serve
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        warnings.warn(
            f"qscaling: the C++ fake-quant kernel could not be built ({first_line}); using torch ops", stacklevel=2
        )
        return None


def available() -> bool:
    return _extension() is not None


def quantize_cpu(
    x: torch.Tensor, spec: QuantSpec, out: torch.Tensor | None = None, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Fake-quantize x (see `supports`) into `out` (contiguous float32, x's shape) or a new tensor; `mask` (a
    contiguous bool or float32 tensor of x's shape), if given, receives `qat.clamp_mask(x, spec)` from the same
    pass (float32: 1.0 where it is True, 0.0 where False)."""
    if not supports(x, spec) or not available():
        raise ValueError(f"quantize_cpu: needs the built kernel and a contiguous float32 CPU tensor for '{spec}'")
    out = torch.empty_like(x) if out is None else out
    row_length = x.shape[-1] if x.dim() else 1
    group_size = group_size_along_rows(spec, row_length) or 0  # 0: one group for the whole tensor (tensor, unscaled)
    flags = torch.empty(0, dtype=torch.bool) if mask is None else mask
    _extension().fake_quantize(x, out, flags, row_length, group_size, *_spec_arguments(spec))
    return out


@functools.lru_cache(maxsize=256)
def _spec_arguments(spec: QuantSpec) -> tuple:
    """The kernel's arguments after the group size, per spec (worked out once: QAT asks on every layer and step)."""
    if spec.kind == "fp":
        fmt = spec.float_format
        overflow = float("inf") if spec.overflow == "inf" else fmt.max_value
        inside = fmt.max_value + 2.0 ** (fmt.max_exponent - fmt.mantissa_bits) / 2
        fp = (spec.granularity == "unscaled", _FP_SCALES[spec.fp_scale], fmt.exponent_bits, fmt.mantissa_bits,
              fmt.min_normal_exponent, fmt.max_exponent, fmt.max_value, overflow, inside)  # fmt: skip
        integer = (True, False, 1.0, 0.0, 0.0)
    else:
        q_min, q_max = code_range(spec.bits, spec.symmetric, spec.narrow)
        divisor = scale_divisor(spec.bits, spec.symmetric, spec.int_scale)
        integer = (spec.symmetric, spec.division == "mulinv", divisor, float(q_min), float(q_max))
        fp = (False, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0)
    return (spec.kind == "fp", _ROUNDING[spec.rounding], *integer, *fp)
