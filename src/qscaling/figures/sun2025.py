"""Sun et al. 2025 figures. Law-only ones draw Table 2's constants and, given `fits["capybara"]`, this run's fit."""

import numpy as np
import seaborn as sns

from qscaling.figures import add_footer, compact_number, figure, new_figure, series_palette
from qscaling.laws import LAWS, compare_sources
from qscaling.laws import sun2025 as law

_STYLE = {"paper": "-", "this run": "--"}


def _sources(fits):
    fit = fits.get("capybara")
    note = "Constants: Sun et al. 2025, Table 2" + ("; dashed: this run's fit" if fit else "")
    return compare_sources(LAWS["sun2025.capybara"], fit), note


@figure(law_only=True)
def fig5(tables, fits, max_bits=16):
    """Optimal exponent/mantissa layout: (E+0.5)^δ (M+0.5)^ν against M for fp1…fp16, optimum marked."""
    sources, note = _sources(fits)
    fig, axes = new_figure(width=6.0, height=4.0)
    ax = axes[0][0]
    colors = iter(series_palette("viridis", max_bits))
    for bits in range(1, max_bits + 1):
        color = next(colors)
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
    ax.legend(ncol=4, fontsize=6)
    add_footer(fig, note)
    return fig


@figure(law_only=True)
def fig6(tables, fits, N=1e9, block_size=128, formats=((3, 4), (3, 5), (3, 6))):
    """Predicted loss against training tokens for fixed N; each format's minimum sits at its D_crit."""
    sources, note = _sources(fits)
    fig, axes = new_figure(width=5.0, height=3.6)
    ax = axes[0][0]
    tokens = np.logspace(10, 16, 300)
    for color, (E, M) in zip(sns.color_palette(), formats):
        for label, params in sources:
            x = {"N": np.full_like(tokens, N), "D": tokens, "E": E, "M": M, "B": block_size}
            ax.plot(
                tokens,
                law.capybara_loss(params, x),
                _STYLE[label],
                color=color,
                label=f"E{E}M{M}" if label == "paper" else None,
            )
            ax.axvline(law.critical_data_size(params, N, E, M, block_size), color=color, ls=":", lw=0.8)
    ax.set(
        xscale="log",
        xlabel="training tokens D",
        ylabel="predicted loss",
        title=f"Critical data size (dotted), N = {compact_number(N)}, B = {block_size}",
    )
    ax.legend()
    add_footer(fig, note)
    return fig


@figure(law_only=True)
def fig7(tables, fits, block_size=128, sizes=(1e9, 7e10)):
    """Cost-optimal precision against compute: N, D, P chosen jointly (solid) and for fixed N (thin)."""
    sources, note = _sources(fits)
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
    return fig


@figure(law_only=True)
def fig14(tables, fits, block_size=128):
    """Cost-optimal precision against training tokens at fixed D: P^(δ+ν) ∝ D^β, independent of compute."""
    sources, note = _sources(fits)
    fig, axes = new_figure(width=5.0, height=3.6)
    ax = axes[0][0]
    tokens = np.logspace(9, 15, 100)
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
    return fig
