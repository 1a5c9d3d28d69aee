"""`qscaling bench quant`: fake-quantization throughput against copy_ bandwidth and other libraries.

GB/s = bytes of float32 input processed per second (best of --repeats after a warm-up call, so one-off
compilation is excluded and printed separately). Every figure is also given as a ratio to the same
tensor's ``copy_`` into a preallocated buffer, timed in alternation with it so that both see the same
load on a shared machine. Returning a fresh tensor costs
the allocation of its pages on every call; the "into out" rows show the loop alone. Set
THP_MEM_ALLOC_ENABLE=1 in the environment (read by torch's allocator at start-up) to back large tensors
with huge pages, which makes fresh allocations several times cheaper on Linux.
GPTQ seconds per layer (qscaling.bench.gptq_timing) follow the table.
"""

import os
import time

import torch

from qscaling.bench import best_seconds
from qscaling.quant import parse_spec, quantize, quantize_reference
from qscaling.quant.dispatch import start_fast_path
from qscaling.quant.fast import quantize_fast

SPECS = ("int4:g128", "fp:e4m3:b32", "fp:e2m1:b32")


def add_arguments(parser) -> None:
    parser.add_argument("--rows", type=int, default=4096, help="tensor rows (default 4096)")
    parser.add_argument("--cols", type=int, default=4096, help="tensor columns (default 4096)")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per implementation (best is kept)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--skip-gptq", action="store_true", help="leave out GPTQ seconds per layer (512², 2048²)")


def _best_seconds_against(call, baseline, repeats: int) -> tuple[float, float]:
    """Best times of `call` and `baseline`, alternated so both see the same load on a shared machine."""
    best_call = best_baseline = float("inf")
    for _ in range(repeats):
        best_call = min(best_call, best_seconds(call, 1))
        best_baseline = min(best_baseline, best_seconds(baseline, 1))
    return best_call, best_baseline


def _torchao_implementations(x: torch.Tensor, text: str) -> dict:
    """torchao's fake quantizers closest to each spec, or a reason they are unavailable."""
    try:
        from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx
        from torchao.quantization.qat import IntxFakeQuantizeConfig
        from torchao.quantization.qat.fake_quantizer import IntxFakeQuantizer
    except ImportError as error:
        return {"torchao": f"not installable/importable: {error}"}
    if text == "int4:g128":
        quantizer = IntxFakeQuantizer(IntxFakeQuantizeConfig(torch.int4, group_size=128, is_symmetric=True))
        return {"torchao IntxFakeQuantizer int4 g128": lambda: quantizer(x)}
    elem = {"fp:e4m3:b32": torch.float8_e4m3fn, "fp:e2m1:b32": torch.float4_e2m1fn_x2}[text]

    def mx_round_trip():
        scale, data = to_mx(x, elem, 32)
        return to_dtype(data, scale, elem, 32, torch.float32)

    return {"torchao MX to_mx/to_dtype b32 (E8M0 scales)": mx_round_trip}


def _qtorch_implementations(x: torch.Tensor, text: str) -> dict:
    """qtorch's float_quantize (element cast, nearest) behind the same eager block scaling."""
    if not text.startswith("fp:"):
        return {}
    try:
        from qtorch.quant import float_quantize
    except ImportError as error:
        return {"qtorch": f"not installable/importable: {error}"}
    fmt = parse_spec(text).float_format

    def block_scaled_cast():
        blocks = x.view(-1, 32)
        scale = fmt.max_value / blocks.abs().amax(dim=1, keepdim=True)
        return (float_quantize(blocks * scale, fmt.exponent_bits, fmt.mantissa_bits, rounding="nearest") / scale).view(
            x.shape
        )

    return {"qtorch float_quantize + eager b32 scale": block_scaled_cast}


def run(args) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(args.rows, args.cols, generator=generator)
    out = torch.empty_like(x)
    gigabytes = x.numel() * x.element_size() / 1e9
    copy_rate = gigabytes / best_seconds(lambda: out.copy_(x), args.repeats)
    clone_rate = gigabytes / best_seconds(lambda: x.clone(), args.repeats)
    print(
        f"tensor {args.rows}x{args.cols} float32, {torch.get_num_threads()} threads, "
        f"THP_MEM_ALLOC_ENABLE={os.environ.get('THP_MEM_ALLOC_ENABLE', 'unset')}"
    )
    print(f"{'spec':<13} {'implementation':<48} {'GB/s':>7} {'x copy_':>8}")
    print(f"{'-':<13} {'copy_ into a preallocated tensor':<48} {copy_rate:7.2f} {1.0:8.2f}")
    print(f"{'-':<13} {'clone (fresh tensor)':<48} {clone_rate:7.2f} {clone_rate / copy_rate:8.2f}")
    start_fast_path()  # quantize() as in a process that has repaid the compiler's start-up
    for text in SPECS:
        spec = parse_spec(text)
        start = time.perf_counter()
        quantize_fast(x, spec, out=out)
        print(f"{text:<13} {'(first fast-path call, compilation included)':<48} {time.perf_counter() - start:6.1f}s")
        implementations = {
            "qscaling fast path, into out": lambda: quantize_fast(x, spec, out=out),
            "qscaling quantize() (fresh tensor)": lambda: quantize(x, spec),
            "qscaling reference (torch eager)": lambda: quantize_reference(x, spec),
            **_torchao_implementations(x, text),
            **_qtorch_implementations(x, text),
        }
        for name, call in implementations.items():
            if isinstance(call, str):
                print(f"{text:<13} {name:<48} {call}")
                continue
            call()
            seconds, copy_seconds = _best_seconds_against(call, lambda: out.copy_(x), args.repeats)
            print(f"{text:<13} {name:<48} {gigabytes / seconds:7.2f} {copy_seconds / seconds:8.2f}")
    if not args.skip_gptq:
        from qscaling.bench.gptq_timing import bench_gptq, format_rows

        print()
        print(format_rows(bench_gptq()))
    return 0
