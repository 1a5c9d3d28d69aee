"""`qscaling bench WHAT [options]`: speed benchmarks printed as ratios against a baseline measured in the same run.

Each benchmark lives in its own module here (`train`, `quant`, `fit`, `dag`, `device`) exposing `add_arguments` and `run`;
only the chosen one is imported. `qscaling bench WHAT --help` lists its options.
"""

import argparse
import importlib
import time

BENCHMARKS = {
    "train": "our training step vs a plain LlamaForCausalLM + AdamW loop",
    "quant": "fake-quantization throughput vs copy_ bandwidth and other implementations",
    "fit": "scaling-law fit with a start grid and bootstrap",
    "dag": "the workflow by plain Snakemake vs by qscaling run and its warm worker",
    "device": "the GPU path: Triton kernels vs copy_, training tokens/s, the smoke DAG (benchmarks/device.sh)",
}


def best_seconds(call, repeats: int) -> float:
    """The fastest of `repeats` timed calls (the least disturbed by whatever else runs on the machine)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def add_arguments(parser) -> None:
    parser.add_argument(
        "benchmark",
        choices=sorted(BENCHMARKS),
        metavar="WHAT",
        help="; ".join(f"{name}: {text}" for name, text in BENCHMARKS.items()),
    )
    parser.add_argument("options", nargs=argparse.REMAINDER, help="options of that benchmark")


def run(args) -> int:
    module = importlib.import_module(f"qscaling.bench.{args.benchmark}")
    parser = argparse.ArgumentParser(prog=f"qscaling bench {args.benchmark}", description=BENCHMARKS[args.benchmark])
    module.add_arguments(parser)
    return module.run(parser.parse_args(args.options))
