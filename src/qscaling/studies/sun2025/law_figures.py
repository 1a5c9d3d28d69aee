"""Sun et al. 2025's law-only figures (figures/sun2025/…): Table 2's constants and, given `fits["capybara"]`, this
run's fit — the optimal layout per total bits, the critical data size, and the cost-optimal precision against
compute and against data."""

import numpy as np
import pandas as pd
import seaborn as sns

from qscaling.figures import add_footer, compact_number, figure, new_figure, series_palette
from qscaling.figures.caveats import extrapolation_note, flag_bounds, mark_extrapolation
from qscaling.laws import LAWS, compare_sources
from qscaling.laws import sun2025 as law
from qscaling.studies.sun2025.grid import FULL_M

PAPER = "sun2025"
_STYLE = {"paper": "-", "this run": "--"}


def _sources(fits, drawn=None, names=None):
    """[(label, params)] of the paper's constants and this run's fit (`names`: only the parameters a figure
    draws), and the footer's note: where the fit is drawn beyond the inputs it saw (`drawn`: {input: (low, high)}),
    its note says so."""
    fit = fits.get("capybara")
    note = "Constants: Sun et al. 2025, Table 2"
    if fit is not None:
        beyond = extrapolation_note(fit, drawn or {})
        note += "; dashed: this run's fit" + (f" ({beyond})" if beyond else "")
    capybara = LAWS["sun2025.capybara"]
    sources = compare_sources(capybara, None)
    if fit is not None:
        if fit.law.name != capybara.name:
            raise ValueError(f"fit for {fit.law.name!r} passed where a fit of {capybara.name!r} was expected")
        sources.append(("this run", {name: fit.params[name] for name in names or fit.params}))
    return sources, note


# Total bits drawn in Fig. 5: few enough that each keeps a colour of its own.
FIG5_BITS = (3, 4, 6, 8, 12, 16)
FORMAT_PARAMS = ("delta", "nu")  # the exponents of (E+0.5)^δ (M+0.5)^ν: all of a fit Fig. 5 draws


@figure(fits="sun2025/capybara", law_only=True)
def fig5(tables, fits, bit_widths=FIG5_BITS):
    """Optimal exponent/mantissa layout: (E+0.5)^δ (M+0.5)^ν against M for each total bit width, optimum marked."""
    widest = max(bit_widths) - 1
    sources, note = _sources(fits, {"E": (0, widest), "M": (0, widest)}, FORMAT_PARAMS)
    fig, axes = new_figure(width=6.0, height=4.0)
    ax = axes[0][0]
    for bits, color in zip(bit_widths, series_palette("viridis", len(bit_widths))):
        mantissa = np.arange(bits)
        for label, params in sources:
            factor = law.format_factor(params, bits - 1 - mantissa, mantissa)
            ax.plot(mantissa, factor, _STYLE[label], color=color, lw=1, label=f"fp{bits}" if label == "paper" else None)
            E, M = law.optimal_layout(params, bits)
            ax.plot(M, law.format_factor(params, E, M), "o" if label == "paper" else "x", color=color, ms=4)
    ax.set(
        yscale="log",
        xlabel="mantissa bits M (E = P − 1 − M)",
        ylabel="(E+0.5)^δ (M+0.5)^ν",
        title="Optimal FP layout per total bits (markers: best E/M split)",
    )
    ax.legend(ncol=3, fontsize=6)
    add_footer(fig, note + "; markers: ● the paper's optimum, × this run's")
    flag_bounds(fig, {"this run's Capybara fit": fits.get("capybara")}, drawn=FORMAT_PARAMS)
    return fig


@figure(fits="sun2025/capybara", law_only=True)
def fig6(tables, fits, N=1e9, block_size=128, formats=((3, 4), (3, 5), (3, 6))):
    """Predicted loss against training tokens for fixed N; each format's minimum sits at its D_crit. With this
    run's fit, a second panel at this run's largest fitted size, for its own lowest-precision formats."""
    fit = fits.get("capybara")
    fig, axes = new_figure(2 if fit else 1, 1, width=5.0, height=3.6)
    paper = dict(LAWS["sun2025.capybara"].default_paper_params())
    ax = axes[0][0]
    tokens = np.logspace(10, 16, 300)
    for color, (E, M) in zip(sns.color_palette(), formats):
        x = {"N": np.full_like(tokens, N), "D": tokens, "E": E, "M": M, "B": block_size}
        ax.plot(tokens, law.capybara_loss(paper, x), color=color, label=f"E{E}M{M}")
        ax.axvline(law.critical_data_size(paper, N, E, M, block_size), color=color, ls=":", lw=0.8)
    ax.set(xscale="log", xlabel="training tokens D", ylabel="predicted loss",
           title=f"Paper's law, N = {compact_number(N)}, B = {block_size}")  # fmt: skip
    ax.legend()
    note = "Solid: Sun et al. 2025, Table 2; dotted: each format's D_crit"
    if fit is not None:
        note += "; right: this run's fit (dashed), the paper's D_crit at the same N and B in black"
        _critical_data_at_our_scale(axes[0][1], fit, paper)
    add_footer(fig, note)
    flag_bounds(fig, {"this run's Capybara fit": fit})
    return fig


def _critical_data_at_our_scale(ax, fit, paper):
    inputs = pd.DataFrame(fit.points["inputs"])
    largest = inputs[inputs["N"] == inputs["N"].max()]
    quantized = largest[largest["M"] < FULL_M]
    formats = sorted({(int(e), int(m)) for e, m in zip(quantized["E"], quantized["M"])}, key=sum)[:3]
    N, B = float(largest["N"].iloc[0]), float(largest["B"].iloc[0])
    crit = {fmt: float(law.critical_data_size(fit.params, N, *fmt, B)) for fmt in formats}
    low, high = float(inputs["D"].min()) / 10, max(float(inputs["D"].max()) * 10, *[3 * c for c in crit.values()])
    tokens = np.geomspace(low, min(high, 1e4 * float(inputs["D"].max())), 300)
    for color, fmt in zip(sns.color_palette(), formats):
        x = {"N": np.full_like(tokens, N), "D": tokens, "E": fmt[0], "M": fmt[1], "B": B}
        ax.plot(tokens, law.capybara_loss(fit.params, x), "--", color=color, label="E{}M{}".format(*fmt))
        ax.axvline(crit[fmt], color=color, ls=":", lw=0.8)
        ax.axvline(law.critical_data_size(paper, N, *fmt, B), color="k", ls=":", lw=0.8)
    ax.set(xscale="log", xlabel="training tokens D", ylabel="predicted loss",
           title=f"This run's fit, N = {compact_number(N)}, B = {B:g}")  # fmt: skip
    mark_extrapolation(ax, fit, "D", (tokens[0], tokens[-1]))
    ax.legend(fontsize=7)


@figure(fits="sun2025/capybara", law_only=True)
def fig7(tables, fits, block_size=128, sizes=(1e9, 7e10)):
    """Cost-optimal precision against compute: N, D, P chosen jointly (solid) and for fixed N (thin)."""
    sources, note = _sources(fits, {"N": (min(sizes), max(sizes))})
    fig, axes = new_figure(width=5.0, height=3.6)
    ax = axes[0][0]
    compute = np.logspace(19, 33, 29)
    for label, params in sources:
        joint = [law.optimal_precision_joint(params, c, block_size)[0] for c in compute]
        ax.plot(compute, joint, _STYLE[label], color="k", label="joint N, D, P" if label == "paper" else None)
        for color, N in zip(sns.color_palette(), sizes):
            fixed = law.optimal_precision_fixed_size(params, compute, N, block_size)
            ax.plot(
                compute,
                fixed,
                _STYLE[label],
                color=color,
                lw=0.8,
                label=f"fixed N = {compact_number(N)}" if label == "paper" else None,
            )
    ax.axhspan(4, 8, color="0.9", zorder=0, label="4–8 bits")
    ax.set(
        xscale="log",
        ylim=(1, 16),
        xlabel="compute C = (6/16)·P·N·D",
        ylabel="optimal precision P (bits)",
        title=f"Optimal FP precision vs compute (B = {block_size})",
    )
    ax.legend(fontsize=7)
    add_footer(fig, note)
    flag_bounds(fig, {"this run's Capybara fit": fits.get("capybara")})
    return fig


@figure(fits="sun2025/capybara", law_only=True)
def fig14(tables, fits, block_size=128):
    """Cost-optimal precision against training tokens at fixed D: P^(δ+ν) ∝ D^β, independent of compute."""
    tokens = np.logspace(9, 15, 100)
    sources, note = _sources(fits, {"D": (tokens[0], tokens[-1])})
    fig, axes = new_figure(width=5.0, height=3.6)
    ax = axes[0][0]
    for label, params in sources:
        ax.plot(tokens, law.optimal_precision_fixed_data(params, tokens, block_size), _STYLE[label], label=label)
    ax.set(
        xscale="log",
        xlabel="training tokens D",
        ylabel="optimal precision P (bits)",
        title=f"Optimal FP precision vs data (B = {block_size})",
    )
    ax.legend()
    add_footer(fig, note)
    flag_bounds(fig, {"this run's Capybara fit": fits.get("capybara")})
    return fig
