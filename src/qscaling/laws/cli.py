"""`qscaling laws show|list|fit`: a law's parameters and derived quantities, the laws, a law fitted to a table.

`laws fit LAW --table FILE [--derive EXPR ...] [--map COLUMN=INPUT ...] [--where EXPR] [--baseline EXPR [--loss-column C]]
[--variant V] [--bootstrap K] [--starts K] [--seed S] [--plot FILE.png] --out FIT.json` writes the same fit
JSON as the workflow's. A law input that is constant in the table leaves the parameters it identifies
(Law.identified_by) unidentifiable, as does a precision level the table lacks (Law.levels): they are held at the
paper's constants (--variant) and the notes say so.
"""

import math
import os
import sys
from pathlib import Path

import numpy as np

from qscaling.laws import LAWS, derived_quantities, fit, get_law, load_fit, start_sample
from qscaling.laws.synthetic import group_column
from qscaling.laws.table import (
    PAIR_KEYS,
    check_rows,
    constant_inputs,
    derive_column,
    held_params,
    pair_with_baselines,
    parse_map,
    read_table,
    repeated_rows,
    select_rows,
)

PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="laws_command", required=True, metavar="ACTION")
    show = sub.add_parser("show", help="print a law's parameters and derived quantities")
    show.add_argument("name", help=f"law name, one of: {', '.join(LAWS)}")
    show.add_argument("--params", default="paper", help="'paper' (the paper's constants) or a fit JSON path")
    show.add_argument("--variant", help="paper variant (default: every variant)")
    sub.add_parser("list", help="list the laws with their formulas")
    fitter = sub.add_parser(
        "fit",
        help="fit a law to a CSV / parquet / JSON-lines table and compare with the paper's constants",
        description="Expressions and --loss-column name the file's own columns; --map then says which of them "
        "feed the law. Rows are numbered from 0 over the file's data rows.",
    )
    fitter.add_argument("name", metavar="LAW", help=f"law name, one of: {', '.join(LAWS)}")
    fitter.add_argument("--table", required=True, metavar="FILE", help="a .csv, .parquet or .jsonl/.ndjson file")
    fitter.add_argument(
        "--map",
        nargs="+",
        default=[],
        metavar="COLUMN=INPUT",
        help="feed the table's COLUMN to the law's INPUT (or target), e.g. --map params=N tokens=D; "
        "columns already named like an input need no mapping",
    )
    fitter.add_argument(
        "--derive",
        nargs="+",
        default=[],
        metavar="EXPR",
        help='pandas DataFrame.eval assignments adding columns first, e.g. "D = `Training FLOP` / (6 * N)"',
    )
    fitter.add_argument("--where", metavar="EXPR", help="pandas DataFrame.query expression selecting the rows to fit")
    fitter.add_argument(
        "--baseline",
        metavar="EXPR",
        help="query selecting baseline rows (e.g. \"recipe == 'bf16'\"): the target of every other row is its loss "
        f"minus the loss of the baseline with the same {' and '.join(PAIR_KEYS)} (for delta laws)",
    )
    fitter.add_argument("--loss-column", default="loss", metavar="COLUMN", help="loss column for --baseline")
    fitter.add_argument("--variant", help="paper variant that holds unidentifiable parameters (default: the first)")
    fitter.add_argument("--bootstrap", type=int, default=200, metavar="K", help="bootstrap resamples for the CIs")
    fitter.add_argument(
        "--starts",
        type=int,
        metavar="K",
        help="K seeded Sobol starting points, a power of 2 (default: the law's own: a 3-point grid per "
        "parameter up to 5 parameters, 128 Sobol points beyond)",
    )
    fitter.add_argument("--seed", type=int, default=0, help="seed of the starts and the bootstrap")
    fitter.add_argument("--plot", metavar="FILE.png", help="also draw predicted against observed")
    fitter.add_argument("--out", required=True, metavar="FIT.json", help="where the fit is written")


def _format(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _print_params(law, params, ci=None) -> None:
    for name in law.param_names:
        interval = f"  [{_format(ci[name][0])}, {_format(ci[name][1])}]" if ci else ""
        print(f"  {name:>12} = {_format(params[name])}{interval}")


def show(name: str, source: str, variant: str | None) -> None:
    law = get_law(name)
    print(f"{law.name}: {law.formula}\n  inputs: {', '.join(law.inputs)} -> {law.target}")
    if source == "paper":
        if variant is not None and variant not in law.paper_params:
            raise ValueError(f"--variant {variant!r} unknown for {law.name}; valid: {', '.join(law.paper_params)}")
        variants = [variant] if variant else list(law.paper_params)
        sets = [(f"paper variant {v} ({law.paper_params[v].source})", law.paper_params[v], None) for v in variants]
    else:
        fit = load_fit(source)
        if fit.law.name != law.name:
            raise ValueError(f"--params {source} holds a fit of {fit.law.name!r}, not {law.name!r}")
        summary = f"R² {fit.r2:.4f}, RMSE {fit.rmse:.4g}, held-out rel. error {fit.heldout_relative_error}"
        sets = [(f"fit {source} ({fit.n_points} points; {summary})", fit.params, fit.ci)]
    for title, params, ci in sets:
        print(f"\n{title}")
        _print_params(law, params, ci)
        for label, value in derived_quantities(law.name, params).items():
            print(f"  {label}: {_format(value)}")


def prepare_table(law, args):
    """The rows to fit, named as the law names them, with their target (a difference from --baseline)."""
    table = read_table(args.table)
    for expression in args.derive:
        table = derive_column(table, expression)
    if args.where:
        table = table[select_rows(table, args.where, "--where")]
        if table.empty:
            raise ValueError(f"--where {args.where!r} selects no rows of {args.table}")
    is_baseline = select_rows(table, args.baseline, "--baseline") if args.baseline else None
    extra_names = PAIR_KEYS if args.baseline else ()
    table = table.rename(columns=parse_map(args.map, law, table, extra_names))
    if is_baseline is not None:
        table = pair_with_baselines(table, is_baseline, args.loss_column, law.target)
    check_rows(law, table)
    return table


def fit_table(args):
    """Fit the law to the prepared table, holding what the table cannot identify at the paper's constants."""
    law = get_law(args.name)
    if args.variant is not None and args.variant not in law.paper_params:
        raise ValueError(f"--variant {args.variant!r} unknown for {law.name}; valid: {', '.join(law.paper_params)}")
    if args.bootstrap < 0:
        raise ValueError(f"--bootstrap must be >= 0, got {args.bootstrap}")
    if args.starts is not None and (args.starts < 1 or args.starts & (args.starts - 1)):
        raise ValueError(f"--starts must be a power of 2 (Sobol points stay balanced), got {args.starts}")
    if args.plot and Path(args.plot).suffix not in PLOT_SUFFIXES:
        raise ValueError(f"--plot {args.plot}: expected a {', '.join(PLOT_SUFFIXES)} file")
    check_output("--out", args.out)
    if args.plot:
        check_output("--plot", args.plot)
    table = prepare_table(law, args)
    repeated = repeated_rows(law, table)
    if repeated:
        shown = ", ".join(str(row) for row in repeated[:5]) + (", …" if len(repeated) > 5 else "")
        print(f"qscaling laws fit: warning: {len(repeated)} row(s) repeat an earlier row exactly (rows {shown}); "
              "each counts as a point of its own and narrows the CIs", file=sys.stderr)  # fmt: skip
    constant = constant_inputs(law, table)
    held = held_params(law, table, constant)
    if held and not law.paper_params:
        names = ", ".join(f"{name} ({cause})" for name, (cause, _) in held.items())
        raise ValueError(f"{law.name} has no paper constants to hold {names} at: give a table where those inputs vary")
    variant = args.variant or next(iter(law.paper_params), None)
    paper = law.paper_params[variant] if held else {}
    n_free = len(law.params) - len(held)
    if len(table) < n_free:
        raise ValueError(f"{law.name} has {n_free} free parameters but the table has {len(table)} rows to fit")
    # Sobol points over every parameter: fit() reads the free ones from each start.
    starts = (
        None
        if args.starts is None
        else [dict(zip(law.param_names, row)) for row in start_sample(law, args.starts, args.seed)]
    )
    group = group_column(law)
    result = fit(
        law,
        table,
        fixed={name: paper[name] for name in held},
        starts=starts,
        bootstrap=args.bootstrap,
        group_col=None if group in constant else group,
        seed=args.seed,
    )
    result.notes[:0] = [
        f"{name} unidentifiable: {cause} in the table{values}; held at paper variant {variant}'s value"
        for name, (cause, values) in held.items()
    ]
    check_result(result)
    return result


def check_result(result) -> None:
    """A fit whose quality or parameters are not finite numbers says nothing: refuse it rather than write it."""
    numbers = {"R²": result.r2, "RMSE": result.rmse, **result.params}
    broken = [f"{name} {value:g}" for name, value in numbers.items() if not math.isfinite(value)]
    if broken:
        largest = float(np.max(np.abs(result.points["observed"])))
        raise ValueError(
            f"the fit of {result.law.name} is not finite ({', '.join(broken)}): the targets (largest {largest:g}) "
            "or inputs overflow the law's arithmetic; rescale them or drop such rows with --where"
        )


def check_output(option: str, path: str) -> None:
    """An output path whose folder can hold a new file: checked before any work, so nothing is half-written."""
    folder = Path(path).resolve().parent
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not existing.is_dir():
        raise ValueError(f"{option} {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK):
        raise ValueError(f"{option} {path}: {existing} is not writable")
    if Path(path).is_dir():
        raise ValueError(f"{option} {path}: is a folder")


def _cell(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"


def print_fit(result, table_path) -> None:
    """The fitted parameters and their CIs beside every paper variant's constants, then the notes."""
    law = result.law
    heldout = _cell(result.heldout_relative_error) if result.heldout_relative_error is not None else "-"
    print(f"{law.name}: {law.formula}")
    print(
        f"  {result.n_points} rows of {table_path}: {result.target} ~ {', '.join(law.inputs)}; "
        f"R² {result.r2:.4f}, RMSE {result.rmse:.4g}, held-out rel. error {heldout}"
    )
    level = f"{100 * result.ci_level:g}% CI"
    header = ["param", "fit", level, *law.paper_params]
    rows = [
        [name, _cell(result.params[name]), f"[{_cell(result.ci[name][0])}, {_cell(result.ci[name][1])}]"]
        + [_cell(values.get(name)) for values in law.paper_params.values()]
        for name in law.param_names
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print(
            "  "
            + "  ".join(
                cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width) in enumerate(zip(row, widths))
            )
        )
    for note in result.notes:
        print(f"  note: {note}")


def plot_fit(result):
    """Predicted against observed, one point per row, coloured by model size; log axes where all are positive."""
    from qscaling.figures import new_figure  # matplotlib only for --plot: a fit answers in a second without it

    observed = np.asarray(result.points["observed"])
    predicted = result.predict(result.points["inputs"])
    colour_by = group_column(result.law)
    fig, axes = new_figure(width=4.4, height=3.6)
    ax = axes[0, 0]
    colour = np.log10(np.asarray(result.points["inputs"][colour_by]))
    drawn = ax.scatter(observed, predicted, c=colour, cmap="viridis", s=14, label="rows")
    fig.colorbar(drawn, ax=ax, label=f"log10 {colour_by}")
    low, high = min(observed.min(), predicted.min()), max(observed.max(), predicted.max())
    ax.plot([low, high], [low, high], color="0.4", linewidth=0.8, label="predicted = observed")
    if low > 0:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set(xlabel=f"observed {result.target}", ylabel=f"predicted {result.target}", title=result.law.name)
    ax.legend(loc="upper left")
    return fig


def run(args) -> int:
    if args.laws_command == "list":
        for law in LAWS.values():
            print(f"{law.name:<28} {law.formula}")
        return 0
    if args.laws_command == "fit":
        result = fit_table(args)
        if args.plot:  # first: the fit JSON is written only once everything else has been
            from qscaling.figures import save_figure  # as above: only for --plot

            save_figure(plot_fit(result), args.plot)
        result.to_json(args.out)
        print_fit(result, args.table)
        return 0
    show(args.name, args.params, args.variant)
    return 0
