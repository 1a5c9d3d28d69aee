"""Ouyang et al. 2024 figures. Law-only ones draw the unified QiD law's constants and, given `fits["qid"]`
(an ouyang2024.qid fit), this run's fit."""

import numpy as np
import seaborn as sns

from qscaling.figures import add_footer, new_figure
from qscaling.laws import LAWS, compare_sources
from qscaling.laws import ouyang2024 as law

_STYLE = {"paper": "-", "this run": "--"}
PYTHIA_VOCAB = 50277  # GPT-NeoX tokenizer: a uniform guess costs ln(50277) nats


def fig1(tables, fits, sizes=("7B", "70B", "405B")):
    """Predicted QiD against training tokens up to 1e14 per bit width; grey: worse than a uniform guess."""
    fit = fits.get("qid")
    sources = compare_sources(LAWS["ouyang2024.qid"], fit)
    sixteen_bit = LAWS["kaplan"].paper_params["ouyang2024"]
    fig, axes = new_figure(len(sizes), 1, width=3.4, height=3.2, sharey=True)
    tokens = np.logspace(9, 14, 100)
    for ax, model in zip(axes[0], sizes):
        N = np.full_like(tokens, law.MODELS[model])
        random_gap = np.log(PYTHIA_VOCAB) - LAWS["kaplan"](sixteen_bit, {"N": N, "D": tokens})
        ax.fill_between(tokens, random_gap, 100, color="0.85", label="worse than random")
        for label, params in sources:
            for color, bits in zip(sns.color_palette(), (2, 3, 4)):
                qid = law.qid(params, {"N": N, "D": tokens, "P": bits})
                ax.plot(tokens, qid, _STYLE[label], color=color, label=f"{bits}-bit" if label == "paper" else None)
        ax.set(xscale="log", yscale="log", ylim=(1e-3, 30), xlabel="training tokens", title=model)
    axes[0][0].set_ylabel("QiD (Δ loss)")
    axes[0][0].legend(fontsize=6)
    add_footer(fig, "Constants: Ouyang et al. 2024, unified law and 16-bit Kaplan-form loss"
               + ("; dashed: this run's fit" if fit else ""))
    return fig


def table1_frame(tables, fits):
    """Table 1 as a tidy frame; with `fits["qid"]` the unified law uses this run's constants."""
    fit = fits.get("qid")
    return law.table1(unified=dict(fit.params) if fit else None)


def table1(tables, fits):
    """Table 1 rendered: trillions of tokens to reach each QiD, per source (the CSV holds the same rows)."""
    frame = table1_frame(tables, fits)
    wide = frame.pivot_table(index=["bits", "model", "source"], columns="delta", values="tokens_T", sort=False)
    fig, axes = new_figure(width=7.5, height=0.18 * len(wide) + 0.8)
    ax = axes[0][0]
    ax.axis("off")
    cells = [[f"{value:.4g}" for value in row] for row in wide.to_numpy()]
    rows = [f"{bits}-bit {model} · {source}" for bits, model, source in wide.index]
    table = ax.table(cellText=cells, rowLabels=rows, colLabels=[f"QiD {d}" for d in wide.columns], loc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(6)
    ax.set_title("Tokens (trillions) to reach a QiD — Ouyang et al. 2024, Table 1")
    add_footer(fig, law.TABLE1_NOTE)
    return fig
