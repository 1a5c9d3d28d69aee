"""`qscaling bench device`: the GPU path measured in one run (what benchmarks/device.sh runs on a lent GPU).

- **Kernels.** Each Triton fake-quant kernel (qscaling.kernels.fake_quant) is compiled for the device, checked bit
  for bit against the reference on edge cases (NaN, ±Inf, subnormals, ±0, an all-zero group, 60 binades) and on the
  timed tensor, then timed in GB/s moved (bytes read + written) against a device-to-device ``copy_`` of the same
  tensor in the same run: the bandwidth of the card's memory that torch itself reaches.
- **Training.** Tokens/s of our training step in full precision and with W and A fake-quantized (W4A4 `int4:g32`),
  beside a plain transformers loop: `qscaling bench train --device`'s measurement.
- **The smoke DAG.** Wall time of `qscaling run --config scale=smoke device=DEVICE` from an empty directory.

Each part's numbers, or the error that stopped it, go to one JSON file (--out) and a printed summary; a part that
fails does not stop the others, and the exit status is 1 if any failed or any kernel was not bit-exact. `--tiny`
runs every part but the DAG at toy sizes: how the suite tests this benchmark on a CPU (TRITON_INTERPRET=1).
"""

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from qscaling.bench import best_seconds
from qscaling.bench import train as bench_train
from qscaling.bench.quant import SPECS
from qscaling.device import resolve_device, synchronize
from qscaling.quant import parse_spec, quantize_reference

QAT_PRECISION = "int4:g32"  # Chen et al.'s W4A4 at group size 32
# Toy sizes for --tiny: seconds in Triton's interpreter on a CPU.
TINY_ELEMENTS = 1 << 12
TINY_TRAIN_OPTIONS = ["--d-model", "16", "--n-layers", "1", "--vocab-size", "64", "--seq-len", "16"]
TINY_TRAIN_OPTIONS += ["--batch-size", "2", "--steps", "2", "--repeats", "1"]


def add_arguments(parser) -> None:
    parser.add_argument("--device", default="auto", help="cuda, cpu (kernels need TRITON_INTERPRET=1), or auto")
    parser.add_argument("--elements", type=int, default=1 << 28, help="float32 elements of the timed tensor (1 GiB)")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per kernel and for the copy (best kept)")
    parser.add_argument("--cores", type=int, default=os.cpu_count(), help="cores given to the smoke DAG")
    parser.add_argument("--dag-timeout", type=int, default=300, help="seconds the smoke DAG may take (default 300)")
    parser.add_argument("--no-dag", action="store_true", help="leave out the smoke DAG")
    parser.add_argument("--tiny", action="store_true", help="toy sizes, no DAG: checks that the benchmark runs")
    parser.add_argument("--out", type=Path, help="JSON file for the results (default: only the summary)")


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality of two float32 tensors, NaN payloads aside."""
    same = (a.view(torch.int32) == b.view(torch.int32)) | (torch.isnan(a) & torch.isnan(b))
    return bool(same.all())


def _edge_cases(device: str) -> torch.Tensor:
    """[16, 256] float32: rows 2^-30..2^30 apart, NaN / ±Inf / subnormals / ±0 in row 0, an all-zero row."""
    generator = torch.Generator().manual_seed(18)
    x = torch.randn(16, 256, generator=generator) * torch.exp2(torch.arange(-30.0, 34.0, 4.0)).view(16, 1)
    x[0, :7] = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e-45, -1e-45, 0.0, -0.0])
    x[1] = 0.0
    return x.to(device)


def _copy_bandwidth(x: torch.Tensor, repeats: int) -> dict:
    out = torch.empty_like(x)
    seconds = _device_seconds(lambda: out.copy_(x), x.device, repeats)
    return {"bytes": x.nbytes, "seconds": seconds, "gb_per_s_moved": 2 * x.nbytes / seconds / 1e9}


def _device_seconds(call, device: torch.device, repeats: int) -> float:
    """Best wall time of `call` until the device has finished its work, after one warm-up call."""

    def drained():
        call()
        synchronize(device)

    drained()
    return best_seconds(drained, repeats)


def _kernels(x: torch.Tensor, repeats: int, copy_seconds: float) -> list[dict]:
    from qscaling.kernels import fake_quant  # triton: optional, and seconds to import

    edge_cases, out = _edge_cases(str(x.device)), torch.empty_like(x)
    rows = []
    for text in SPECS:
        spec = parse_spec(text)
        started = time.perf_counter()
        edge_result = fake_quant.quantize_triton(edge_cases, spec)
        synchronize(x.device)
        first_call = time.perf_counter() - started  # Triton compiles the kernel for this spec on its first call
        edge_bits = _same_bits(edge_result, quantize_reference(edge_cases, spec))
        timed_bits = _same_bits(fake_quant.quantize_triton(x, spec, out=out), quantize_reference(x, spec))
        seconds = _device_seconds(lambda: fake_quant.quantize_triton(x, spec, out=out), x.device, repeats)
        rows.append(
            {
                "spec": text,
                "bit_exact": edge_bits and timed_bits,
                "first_call_s": first_call,
                "gb_per_s_moved": 2 * x.nbytes / seconds / 1e9,
                "x_copy": copy_seconds / seconds,
            }
        )
    return rows


def _train(device: str, tiny: bool) -> dict:
    parser = argparse.ArgumentParser()
    bench_train.add_arguments(parser)
    options = ["--device", device, "--precision", QAT_PRECISION, *(TINY_TRAIN_OPTIONS if tiny else [])]
    return bench_train.measure(parser.parse_args(options))


def _smoke_dag(device: str, cores: int, timeout: int) -> dict:
    if importlib.util.find_spec("snakemake") is None:
        return {"skipped": "snakemake is not importable here (docs/operations.md, Measuring the GPU path)"}
    workdir = Path(tempfile.mkdtemp(prefix="qscaling-bench-device-"))
    command = [sys.executable, "-m", "qscaling.cli", "run", "--cores", str(cores), "--directory", str(workdir)]
    command += ["--config", "scale=smoke", f"device={device}"]
    started = time.perf_counter()
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"the smoke DAG did not finish within {timeout} s", "command": " ".join(command)}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        return {"error": f"qscaling run exited {result.returncode}: {result.stderr[-2000:]}", "wall_s": wall}
    return {"wall_s": wall, "cores": cores, "command": " ".join(command)}


def _measured(part):
    """A part's results, or the error that stopped it: one broken part must not cost the others' numbers."""
    try:
        return part()
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"}


def _environment(device: str) -> dict:
    found = {"device": device, "torch": torch.__version__, "python": platform.python_version()}
    found["triton"] = importlib.import_module("triton").__version__ if importlib.util.find_spec("triton") else None
    found["name"] = torch.cuda.get_device_name(device) if device == "cuda" else platform.processor() or "cpu"
    found["triton_interpret"] = os.environ.get("TRITON_INTERPRET")
    return found


def _kernels_skipped_because(device: str) -> str | None:
    if importlib.util.find_spec("triton") is None:
        return "triton is not importable"
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        return "no GPU (TRITON_INTERPRET=1 runs the kernels in Triton's interpreter)"
    return None


def _part_lines(label: str, part, describe) -> list[str]:
    """The summary lines of one part: `describe(part)`, or why it has no numbers."""
    if isinstance(part, dict) and "error" in part:
        return [f"{label}: failed: {part['error']}"]
    if isinstance(part, dict) and "skipped" in part:
        return [f"{label}: {part['skipped']}"]
    return describe(part)


def _kernel_line(row: dict) -> str:
    exact = "bit-exact" if row["bit_exact"] else "NOT bit-exact"
    return (
        f"kernel {row['spec']:<12} {exact}, {row['gb_per_s_moved']:,.1f} GB/s moved, "
        f"{row['x_copy']:.2f}x copy_ (first call {row['first_call_s']:.1f} s)"
    )


def _training_lines(training: dict) -> list[str]:
    ours, qat = training["ours_tokens_per_s"], training["qat_tokens_per_s"]
    return [
        f"training ({training['model']}):",
        f"  full precision {ours:,.0f} tokens/s, W4A4 {training['qat_precision']} {qat:,.0f} tokens/s "
        f"(QAT step {ours / qat:.2f}x the full-precision step), plain transformers loop "
        f"{training['plain_tokens_per_s']:,.0f} tokens/s",
    ]


def _summary(results: dict) -> list[str]:
    environment = results["environment"]
    lines = [
        f"device: {environment['name']} ({environment['device']}; torch {environment['torch']}, "
        f"triton {environment['triton']})"
    ]
    lines += _part_lines(
        "copy_",
        results["copy"],
        lambda copy: [
            f"copy_ device to device, {copy['bytes'] / 2**20:g} MiB: {copy['gb_per_s_moved']:,.1f} GB/s moved"
        ],
    )
    lines += _part_lines("kernels", results["kernels"], lambda rows: [_kernel_line(row) for row in rows])
    lines += _part_lines("training", results["train"], _training_lines)
    lines += _part_lines(
        "smoke DAG", results["dag"], lambda dag: [f"smoke DAG: {dag['wall_s']:.1f} s wall on {dag['cores']} cores"]
    )
    return lines


def _failed(results: dict) -> bool:
    kernels = results["kernels"]
    rows = kernels if isinstance(kernels, list) else []
    parts = [results["copy"], results["train"], results["dag"], *([] if rows else [kernels])]
    return any("error" in part for part in parts) or not all(row["bit_exact"] for row in rows)


def run(args) -> int:
    device = resolve_device(args.device)
    elements = TINY_ELEMENTS if args.tiny else args.elements
    repeats = 2 if args.tiny else args.repeats
    generator = torch.Generator(device).manual_seed(0)
    x = torch.randn(elements // 256, 256, generator=generator, device=device)
    results = {"environment": _environment(device), "copy": _measured(lambda: _copy_bandwidth(x, repeats))}
    skipped = _kernels_skipped_because(device)
    if skipped:
        results["kernels"] = {"skipped": skipped}
    else:
        copy_seconds = results["copy"].get("seconds", float("nan"))
        results["kernels"] = _measured(lambda: _kernels(x, repeats, copy_seconds))
    results["train"] = _measured(lambda: _train(device, args.tiny))
    if args.tiny or args.no_dag:
        results["dag"] = {"skipped": "--tiny" if args.tiny else "--no-dag"}
    else:
        results["dag"] = _measured(lambda: _smoke_dag(device, args.cores, args.dag_timeout))
    print("\n".join(_summary(results)))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"results: {args.out}")
    return 1 if _failed(results) else 0
