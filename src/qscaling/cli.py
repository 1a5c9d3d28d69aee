"""The `qscaling` command: one sub-command per stage, each implemented next to the code it drives.

Every sub-command module exposes `add_arguments(parser)` and `run(args) -> int`; this file only routes.
"""

import argparse
import importlib
import os
import re
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
    "plan": ("qscaling.cost", "the runs a config trains, and the training its branches and shared specs save"),
    "run": ("qscaling.runner", "run the workflow (Snakemake arguments), resuming by itself after a crash"),
    "diff": ("qscaling.diff.cli", "compare two result trees (tables, fits, claims, figures) with tolerances"),
}


NEGATIVE = re.compile(r"^-\d")  # a value such as -1B or -3, never an option name


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments in one line on stderr and exit status 2, not a usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser; only `command`'s module is imported (the others cost seconds of torch imports)."""
    parser = OneLineParser(prog="qscaling", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=OneLineParser)
    for name, (module_name, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            module = importlib.import_module(module_name)
            module.add_arguments(command_parser)
            command_parser.set_defaults(run=module.run)
    return parser


def attach_negative_values(argv: list[str]) -> list[str]:
    """`--N -1B` as `--N=-1B`: argparse would read a value that starts with a dash as an option and say only
    that --N lacks its argument; attached, the option's own check says what is wrong with the value."""
    joined = []
    for arg in argv:
        if joined and NEGATIVE.match(arg) and joined[-1].startswith("--") and "=" not in joined[-1]:
            joined[-1] = f"{joined[-1]}={arg}"
        else:
            joined.append(arg)
    return joined


def main(argv: list[str] | None = None) -> int:
    argv = attach_negative_values(sys.argv[1:] if argv is None else argv)
    parser = build_parser(next((a for a in argv if not a.startswith("-")), None))
    args, passed_on = parser.parse_known_args(argv)
    if passed_on and not getattr(args, "pass_on", False):
        parser.error(f"unrecognized arguments: {' '.join(passed_on)}")
    args.passed_on = passed_on
    try:
        return args.run(args) or 0
    except BrokenPipeError:
        # The reader (`| head`) left: stop quietly, and keep Python from reporting the flush at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ValueError, OSError) as error:
        print(f"qscaling {args.command}: {one_line(error)}", file=sys.stderr)
        return 2


def one_line(error: BaseException) -> str:
    """An error as one line: an OS error as 'reason: file', anything else its message's first line."""
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror}: {error.filename}" if error.filename else error.strerror
    return (str(error).strip() or type(error).__name__).splitlines()[0]


if __name__ == "__main__":
    sys.exit(main())
