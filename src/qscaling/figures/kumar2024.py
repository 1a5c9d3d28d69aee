"""Kumar et al. 2024 figures. Law-only ones draw Table 2's constants and, given `fits["neff"]` (a
kumar2024.neff fit), this run's fit."""

import numpy as np
import seaborn as sns

from qscaling.figures import add_footer, new_figure
from qscaling.laws import LAWS, compare_sources
from qscaling.laws import kumar2024 as law

_STYLE = {"paper": "-", "this run": "--"}
_LLAMA3 = {"Llama-3 8B": (8e9, 15e12), "Llama-3 70B": (70e9, 15e12)}  # ~15T training tokens (Meta, 2024)


def _sources(fits):
    fit = fits.get("neff")
    note = "Constants: Kumar et al. 2024, Table 2" + ("; dashed: this run's fit" if fit else "")
    return compare_sources(LAWS["kumar2024.neff"], fit), note


def fig3_left(tables, fits):
    """N_eff/N against bits for weights, activations, KV cache, and all three at once (tied)."""
    sources, note = _sources(fits)
    fig, axes = new_figure(width=5.0, height=3.6)
    ax = axes[0][0]
    bits = np.linspace(3, 12, 200)
    for label, params in sources:
        curves = {f"P_{t}": law.precision_fraction(params, bits, t) for t in law.TENSORS}
        curves["tied (w, a, kv)"] = np.prod(list(curves.values()), axis=0)
        for color, (name, curve) in zip(sns.color_palette(), curves.items()):
            ax.plot(bits, curve, _STYLE[label], color=color, label=name if label == "paper" else None)
    ax.set(xlabel="training precision (bits)", ylabel="N_eff / N", ylim=(0, 1.02),
           title="Effective parameters per quantized tensor")
    ax.legend()
    add_footer(fig, note)
    return fig


def fig6_right(tables, fits, sizes=(1e9, 8e9, 70e9)):
    """Compute-optimal training precision P*(D) for a fixed model size; the joint optimum is flat at P*."""
    sources, note = _sources(fits)
    fig, axes = new_figure(width=5.0, height=3.6)
    ax = axes[0][0]
    tokens = np.logspace(9, 14, 60)
    for label, params in sources:
        for color, N in zip(sns.color_palette(), sizes):
            optimum = [law.fixed_size_optimal_precision(params, N, D) for D in tokens]
            ax.plot(tokens, optimum, _STYLE[label], color=color, label=f"N = {N:.0e}" if label == "paper" else None)
        ax.axhline(law.compute_optimal_precision(params), color="k", ls=_STYLE[label], lw=0.8)
        for name, (N, D) in _LLAMA3.items():
            ax.plot(D, law.fixed_size_optimal_precision(params, N, D), "*", color="k", ms=8)
            ax.annotate(name, (D, law.fixed_size_optimal_precision(params, N, D)), fontsize=6, ha="right", va="bottom")
    ax.set(xscale="log", xlabel="training tokens D", ylabel="compute-optimal precision P* (bits)",
           title="P* for fixed N (black line: N, D, P all free)")
    ax.legend(fontsize=7)
    add_footer(fig, note)
    return fig


def fig9(tables, fits, served=(0.0, 1e12, 1e13)):
    """Optimal P*, N*, D* against total cost when serving tokens is part of the cost (assumed cost model)."""
    sources, note = _sources(fits)
    fig, axes = new_figure(3, 1, width=3.6, height=3.2)
    costs = np.logspace(21, 27, 13)
    for label, params in sources:
        for color, served_tokens in zip(sns.color_palette(), served):
            optima = np.array([law.inference_aware_optimum(params, c, served_tokens) for c in costs])
            for ax, column in zip(axes[0], optima.T):
                ax.plot(costs, column, _STYLE[label], color=color,
                        label=f"{served_tokens:.0e} tokens served" if label == "paper" else None)
    for ax, name in zip(axes[0], ("P* (bits)", "N*", "D*")):
        ax.set(xscale="log", yscale="log", xlabel="total cost (FLOP-equivalents)", ylabel=name)
    axes[0][0].legend(fontsize=6)
    fig.suptitle("Optimum with inference cost")
    add_footer(fig, note + "; assumed cost: (6/16)·N·D·P training + 2·N per token served in 16 bits")
    return fig
