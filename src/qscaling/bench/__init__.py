"""`qscaling bench WHAT`: speed benchmarks printed as ratios against a baseline measured in the same run.

Each benchmark lives in its own module here (`train`, `quant`, `fit`) exposing `add_arguments` and `run`.
"""

import importlib

BENCHMARKS = {
    "train": "our training step vs a plain LlamaForCausalLM + AdamW loop",
    "quant": "fake-quantization throughput vs copy_ bandwidth and other implementations",
    "fit": "scaling-law fit with a start grid and bootstrap",
}


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="benchmark", required=True, metavar="WHAT")
    for name, help_text in BENCHMARKS.items():
        bench_parser = sub.add_parser(name, help=help_text, description=help_text)
        module = importlib.import_module(f"qscaling.bench.{name}")
        module.add_arguments(bench_parser)
        bench_parser.set_defaults(bench_run=module.run)


def run(args) -> int:
    return args.bench_run(args)
