"""`qscaling laws show NAME [--params paper|FIT.json]`: a law's parameters and derived quantities."""

from qscaling.laws import LAWS, derived_quantities, get_law, load_fit


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="laws_command", required=True, metavar="ACTION")
    show = sub.add_parser("show", help="print a law's parameters and derived quantities")
    show.add_argument("name", help=f"law name, one of: {', '.join(LAWS)}")
    show.add_argument("--params", default="paper", help="'paper' (the paper's constants) or a fit JSON path")
    show.add_argument("--variant", help="paper variant (default: every variant)")
    sub.add_parser("list", help="list the laws with their formulas")


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


def run(args) -> int:
    if args.laws_command == "list":
        for law in LAWS.values():
            print(f"{law.name:<28} {law.formula}")
        return 0
    show(args.name, args.params, args.variant)
    return 0
