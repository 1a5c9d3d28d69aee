"""The `qscaling` command: one sub-command per stage, each implemented next to the code it drives.

Every sub-command module exposes `add_arguments(parser)` and `run(args) -> int`; this file only routes.
"""

import argparse
import importlib
import sys

# name -> (module, one-line help). Modules are imported only when their command runs.
COMMANDS = {
    "train": ("qscaling.train", "train a run from a spec YAML (resumable)"),
    "evaluate": ("qscaling.evaluate", "validation loss of a checkpoint on a token shard"),
    "quantize": ("qscaling.quant.cli", "post-training quantization of a checkpoint"),
    "laws": ("qscaling.laws.cli", "list the scaling laws, show one's constants, fit one to a table"),
    "predict": ("qscaling.predict", "every applicable law's prediction for a planned run"),
    "bench": ("qscaling.bench", "speed benchmarks, printed as ratios against a baseline"),
    "trace": ("qscaling.trace", "the chain from an output back to config values, corpus files and checkpoints"),
    "plan": ("qscaling.pipeline", "the runs a config trains, and the training its branches and shared specs save"),
    "run": ("qscaling.runner", "run the workflow (Snakemake arguments), resuming by itself after a crash"),
    "diff": ("qscaling.diff.cli", "compare two result trees (tables, fits, claims, figures) with tolerances"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser; only `command`'s module is imported (the others cost seconds of torch imports)."""
    parser = argparse.ArgumentParser(prog="qscaling", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            module = importlib.import_module(module_name)
            module.add_arguments(command_parser)
            command_parser.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(next((a for a in argv if not a.startswith("-")), None))
    args, passed_on = parser.parse_known_args(argv)
    if passed_on and not getattr(args, "pass_on", False):
        parser.error(f"unrecognized arguments: {' '.join(passed_on)}")
    args.passed_on = passed_on
    try:
        return args.run(args) or 0
    except (ValueError, FileNotFoundError) as error:
        print(f"qscaling {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
