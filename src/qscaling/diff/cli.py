"""`qscaling diff`: compare two result trees and print what differs beyond tolerance.

    qscaling diff RUN_A RUN_B [--tolerances YAML] [--rtol R] [--atol A] [--column-tol loss=1e-3:0]
                              [--ignore-column NAME] [--noise-column delta=delta_se] [--noise-max Z]
                              [--noise-rms Z] [--prediction-tol R] [--figure-tol RMS] [--json|--markdown]

Exit status: 0 when every artifact matches within tolerance, 1 otherwise, 2 on bad input.
"""

import argparse
import json
from dataclasses import asdict

from qscaling.diff.artifacts import MAX_DETAILS, ArtifactDiff
from qscaling.diff.tolerances import tolerances_from_args
from qscaling.diff.trees import diff_trees, summary_counts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", metavar="RUN_A", help="result tree (working directory or reference/<scale>)")
    parser.add_argument("run_b", metavar="RUN_B", help="result tree compared against RUN_A")
    parser.add_argument(
        "--tolerances",
        metavar="YAML",
        help="a tolerance profile (e.g. reference/tolerances.yaml); options given here override it",
    )
    _add_number_tolerances(parser)
    _add_fit_and_figure_tolerances(parser)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="machine-readable output")
    output.add_argument("--markdown", action="store_true", help="a Markdown table (e.g. for a CI comment)")


def _add_number_tolerances(parser: argparse.ArgumentParser) -> None:
    """Options for the numbers of tables and JSON documents, overriding the profile's."""
    parser.add_argument("--rtol", type=float, help="relative tolerance for numbers (default 0)")
    parser.add_argument("--atol", type=float, help="absolute tolerance for numbers (default 0)")
    parser.add_argument(
        "--column-tol",
        action="append",
        default=[],
        metavar="NAME=RTOL[:ATOL]",
        help="tolerance for one table column or fit parameter (repeatable)",
    )
    parser.add_argument(
        "--ignore-column",
        action="append",
        default=[],
        metavar="NAME",
        help="leave a table column out of the comparison (repeatable), e.g. a wall-clock timing",
    )
    parser.add_argument(
        "--noise-column",
        action="append",
        default=[],
        metavar="NAME[=SE_NAME]",
        help="compare a table column in units of its standard-error column (default NAME_se), "
        "bounded by --noise-max per row and --noise-rms over the rows (repeatable)",
    )
    parser.add_argument(
        "--noise-max",
        type=float,
        help="largest change of one row of a noise column, in SEs "
        "(default 3); also bounds a moved fit parameter in bootstrap SEs",
    )
    parser.add_argument(
        "--noise-rms", type=float, help="largest root-mean-square change over a noise column, in SEs (default 0.5)"
    )


def _add_fit_and_figure_tolerances(parser: argparse.ArgumentParser) -> None:
    """Options for fits whose parameters moved and for figures whose bytes differ, overriding the profile's."""
    parser.add_argument(
        "--prediction-tol",
        type=float,
        help="for a fit whose parameters moved beyond tolerance: the largest relative change of its "
        "predictions, at the points either fit saw, still accepted (default 0)",
    )
    parser.add_argument(
        "--figure-structure",
        action="store_true",
        help="accept a figure beyond --figure-tol whose drawn data (its .data.json) kept their "
        "structure: its inputs moved, and are compared on their own",
    )
    parser.add_argument(
        "--figure-tol",
        type=float,
        help="largest RMS pixel difference (0–255 scale) accepted for figures whose bytes differ",
    )


def run(args) -> int:
    tol = tolerances_from_args(args)
    diffs = diff_trees(args.run_a, args.run_b, tol)
    if args.json:
        print(
            json.dumps(
                {
                    "run_a": str(args.run_a),
                    "run_b": str(args.run_b),
                    "tolerances": asdict(tol),
                    "counts": summary_counts(diffs),
                    "artifacts": [asdict(d) for d in diffs],
                },
                indent=2,
            )
        )
    elif args.markdown:
        print(format_markdown(diffs, args.run_a, args.run_b), end="")
    else:
        print(format_text(diffs, args.run_a, args.run_b))
    return 1 if any(d.differs for d in diffs) else 0


def format_text(diffs: list[ArtifactDiff], run_a, run_b) -> str:
    counts = summary_counts(diffs)
    lines = [
        f"A: {run_a}",
        f"B: {run_b}",
        "  ".join(f"{status.replace('_', ' ')}: {count}" for status, count in counts.items()),
    ]
    for diff in diffs:
        if diff.status == "identical":
            continue
        lines.append(f"{diff.status.upper():>16}  {diff.kind:<6}  {diff.path}")
        lines.extend(f"{'':>26}{detail}" for detail in diff.details[:MAX_DETAILS])
        if len(diff.details) > MAX_DETAILS:
            lines.append(f"{'':>26}… {len(diff.details) - MAX_DETAILS} more")
    differing = sum(d.differs for d in diffs)
    lines.append(f"{differing} artifact(s) differ beyond tolerance" if differing else "no difference beyond tolerance")
    return "\n".join(lines)


def format_markdown(diffs: list[ArtifactDiff], run_a, run_b) -> str:
    counts = summary_counts(diffs)
    lines = [
        f"### qscaling diff: `{run_a}` vs `{run_b}`",
        "",
        " · ".join(f"{status.replace('_', ' ')}: **{count}**" for status, count in counts.items()),
        "",
    ]
    shown = [d for d in diffs if d.status != "identical"]
    if shown:
        lines += ["| status | kind | artifact | details |", "|---|---|---|---|"]
        for diff in shown:
            detail = "<br>".join(d.replace("|", "\\|") for d in diff.details[:MAX_DETAILS])
            lines.append(f"| {diff.status.replace('_', ' ')} | {diff.kind} | `{diff.path}` | {detail} |")
    else:
        lines.append("All artifacts are byte-identical.")
    return "\n".join(lines) + "\n"
