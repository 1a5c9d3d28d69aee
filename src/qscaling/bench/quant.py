"""`qscaling bench quant`: fake-quantization throughput against copy_ bandwidth and other libraries.

GB/s = bytes of float32 input processed per second (best of --repeats after a warm-up call, so one-off
compilation is excluded and printed separately). `quantize` runs the C++ kernel (qscaling.quant.cpu_kernel); the
Inductor-compiled path it replaced where the kernel builds is timed beside it. Every figure is also given as a
ratio to the same tensor's ``copy_`` into a preallocated buffer: each timed call is paired with a timed copy_, so
that the two see the same load on a shared machine, and the ratio is the median over the --repeats pairs. `quantize(x, spec)` returns a fresh
tensor, which costs the allocation of its pages on every call; `quantize(x, spec, out=buf)` writes into a
preallocated one. Set THP_MEM_ALLOC_ENABLE=1 in the environment (read by torch's allocator at start-up) to
back large tensors with huge pages, which makes fresh allocations several times cheaper on Linux.
GPTQ seconds per layer (qscaling.bench.gptq_timing) follow the table.
"""

import os
import statistics
import time

import torch

from qscaling.bench import best_seconds
from qscaling.bench.gptq_timing import bench_gptq, format_rows
from qscaling.quant import fast, parse_spec, quantize, quantize_reference

SPECS = ("int4:g32", "int4:g128", "int8:g128", "fp:e4m3:b32", "fp:e2m1:b32")  # also the device bench's kernels
NVFP4 = "fp:e2m1:b16:e4m3"
# MXFP4 (E2M1, an E8M0 scale per 32) beside NVFP4 (E2M1, an E4M3 scale per 16 times one float32 per tensor), on the
# CPU paths only: the Triton kernel leaves two-level scales to the reference.
FP4_BLOCK_SPECS = ("fp:e2m1:b32:e8m0", NVFP4)


def add_arguments(parser) -> None:
    parser.add_argument("--rows", type=int, default=4096, help="tensor rows (default 4096)")
    parser.add_argument("--cols", type=int, default=4096, help="tensor columns (default 4096)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="timed calls per implementation, each paired with a timed copy_ (default 5)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--skip-gptq", action="store_true", help="leave out GPTQ seconds per layer (512², 2048²)")


def timed_against_copy(calls: dict, copy, repeats: int) -> dict:
    """name -> (best seconds, median of copy_'s time / the call's time) over `repeats` pairs of a timed copy_ and a
    timed call, after one warm-up call each. The pair's order alternates: whichever runs second is slower (caches,
    the allocator), and alternating cancels that out of the median."""
    for call in calls.values():
        call()
    seconds, ratios = {name: [] for name in calls}, {name: [] for name in calls}
    for round_index in range(repeats):
        for name, call in calls.items():
            if round_index % 2:
                call_seconds, copy_seconds = best_seconds(call, 1), best_seconds(copy, 1)
            else:
                copy_seconds, call_seconds = best_seconds(copy, 1), best_seconds(call, 1)
            seconds[name].append(call_seconds)
            ratios[name].append(copy_seconds / call_seconds)
    return {name: (min(seconds[name]), statistics.median(ratios[name])) for name in calls}


def _torchao_implementations(x: torch.Tensor, text: str) -> dict:
    """torchao's fake quantizers closest to each spec, or a reason they are unavailable."""
    try:  # optional implementations (the bench extra): absent ones are reported, not required
        from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx
        from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale
        from torchao.quantization.qat import IntxFakeQuantizeConfig
        from torchao.quantization.qat.fake_quantizer import IntxFakeQuantizer
    except ImportError as error:
        return {"torchao": f"not installable/importable: {error}"}
    spec = parse_spec(text)
    if text == NVFP4:

        def nvfp4_round_trip():
            scale = per_tensor_amax_to_scale(x.abs().amax())
            return NVFP4Tensor.to_nvfp4(x, block_size=16, per_tensor_scale=scale).to_dtype(torch.float32)

        return {"torchao NVFP4Tensor to_nvfp4/to_dtype (two-level)": nvfp4_round_trip}
    if spec.kind == "int":
        config = IntxFakeQuantizeConfig(
            getattr(torch, f"int{spec.bits}"), group_size=spec.group_size, is_symmetric=True
        )
        quantizer = IntxFakeQuantizer(config)
        return {f"torchao IntxFakeQuantizer int{spec.bits} g{spec.group_size}": lambda: quantizer(x)}
    elem = torch.float8_e4m3fn if spec.float_format.name == "e4m3" else torch.float4_e2m1fn_x2

    def mx_round_trip():
        scale, data = to_mx(x, elem, 32)
        return to_dtype(data, scale, elem, 32, torch.float32)

    return {"torchao MX to_mx/to_dtype b32 (E8M0 scales)": mx_round_trip}


def _qtorch_implementations(x: torch.Tensor, text: str) -> dict:
    """qtorch's float_quantize (element cast, nearest) behind the same eager block scaling."""
    if not text.startswith("fp:") or text == NVFP4:  # no two-level scaling to put behind it
        return {}
    try:  # optional, as torchao above
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
    print(
        f"tensor {args.rows}x{args.cols} float32, {torch.get_num_threads()} threads, "
        f"THP_MEM_ALLOC_ENABLE={os.environ.get('THP_MEM_ALLOC_ENABLE', 'unset')}"
    )
    print(f"{'spec':<17} {'implementation':<48} {'GB/s':>7} {'x copy_':>8}")

    def copy():
        out.copy_(x)

    baselines = {"copy_ into a preallocated tensor": copy, "clone (fresh tensor)": lambda: x.clone()}
    for name, (seconds, ratio) in timed_against_copy(baselines, copy, args.repeats).items():
        print(f"{'-':<17} {name:<48} {gigabytes / seconds:7.2f} {ratio:8.2f}")
    for text in SPECS + FP4_BLOCK_SPECS:
        spec = parse_spec(text)
        for name, first_call in (
            ("quantize (first call: the C++ kernel's load or build)", lambda: quantize(x, spec, out=out)),
            ("Inductor path (first call: its compilation)", lambda: fast.quantize_fast(x, spec, out=out)),
        ):
            start = time.perf_counter()
            first_call()
            print(f"{text:<17} {name:<48} {time.perf_counter() - start:6.1f}s")
        implementations = {
            "qscaling quantize(x, spec)  (fresh tensor)": lambda: quantize(x, spec),
            "qscaling quantize(x, spec, out=buf)": lambda: quantize(x, spec, out=out),
            "qscaling Inductor-compiled path (out=buf)": lambda: fast.quantize_fast(x, spec, out=out),
            "qscaling reference (torch eager)": lambda: quantize_reference(x, spec),
            **_torchao_implementations(x, text),
            **_qtorch_implementations(x, text),
        }
        for name, reason in implementations.items():
            if isinstance(reason, str):
                print(f"{text:<17} {name:<48} {reason}")
        calls = {name: call for name, call in implementations.items() if not isinstance(call, str)}
        for name, (seconds, ratio) in timed_against_copy(calls, copy, args.repeats).items():
            print(f"{text:<17} {name:<48} {gigabytes / seconds:7.2f} {ratio:8.2f}")
    if not args.skip_gptq:
        print()
        print(format_rows(bench_gptq()))
    return 0
