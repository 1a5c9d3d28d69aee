"""Figures of no one study: the learning curves of the shared trunks (figures/common/learning_curves) and every law
fitted on every study's runs (figures/common/law_comparison)."""

import numpy as np
import seaborn as sns
from matplotlib.ticker import FixedLocator, NullFormatter

from qscaling.figures import add_footer, figure, new_figure


@figure(tables={"curves": "learning_curves"})
def learning_curves(tables, fits):
    """Validation loss vs tokens seen, one line per model size, log-log."""
    curves = tables["curves"].sort_values(["N", "D"])
    fig, axes = new_figure(width=4.6, height=3.4)
    ax = axes[0][0]
    labels = {n: f"{size} (N={n:,})" for n, size in curves[["N", "size"]].drop_duplicates().itertuples(index=False)}
    sns.lineplot(
        data=curves.assign(model=curves["N"].map(labels)),
        x="D",
        y="loss",
        hue="model",
        marker="o",
        hue_order=[labels[n] for n in sorted(labels)],
        palette="viridis",
        ax=ax,
        errorbar=None,
    )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="training tokens D",
        ylabel="validation loss (nats/token)",
        title="Learning curves of the model ladder",
    )
    ax.legend(title="non-embedding params", fontsize=7, title_fontsize=7)
    # Losses span less than a decade: label a few log-spaced values instead of powers of ten.
    ticks = np.geomspace(curves["loss"].min(), curves["loss"].max(), 5)
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(lambda value, _: f"{value:.2f}")
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    add_footer(
        fig, f"{curves['run'].nunique()} runs, held-out tokens per point: {int(curves['eval_tokens'].iloc[0]):,}"
    )
    return fig


# The law comparison's held-out schemes and the paper constants' prediction, each a bar or marker per law.
COMPARISON_SERIES = {
    "leave one size out": ("this run's fit, sizes held out", "C0", "o"),
    "leave one budget out": ("this run's fit, budgets held out", "C2", "s"),
    "paper constants, no fit": ("paper constants (no fit)", "0.2", "D"),
}


@figure(tables={"comparison": "law_comparison"})
def law_comparison(tables, fits):
    """Every law fitted on the same runs: its error on held-out sizes (circle) and budgets (square) and the error of
    its paper's constants (diamond), one panel for laws of the loss and one for laws of a degradation δ."""
    table = tables["comparison"]
    kinds = [kind for kind in ("loss", "delta") if kind in set(table["kind"])]
    heights = [table[table["kind"] == kind]["law"].nunique() for kind in kinds]
    fig, axes = new_figure(1, len(kinds), width=6.4, height=0.3 * sum(heights) / len(kinds) + 1.0,
                           gridspec_kw={"height_ratios": [h + 2 for h in heights], "hspace": 0.5})  # fmt: skip
    for ax, kind in zip(axes[:, 0], kinds):
        rows = table[table["kind"] == kind]
        laws = list(dict.fromkeys(rows["law"]))
        for offset, (scheme, (label, colour, marker)) in zip((-0.2, 0.0, 0.2), COMPARISON_SERIES.items()):
            shown = rows[(rows["scheme"] == scheme) & (rows["relative_error"] > 0)]
            y = [laws.index(law) + offset for law in shown["law"]]
            ax.plot(shown["relative_error"], y, marker, ms=4, ls="none", color=colour, label=label)
        ax.set_yticks(range(len(laws)), [_law_label(rows, law) for law in laws], fontsize=7)
        ax.invert_yaxis()
        ax.set(xscale="log", xlabel=f"mean |predicted − observed| / observed {'loss' if kind == 'loss' else 'δ'}",
               title="laws of the loss" if kind == "loss" else "laws of a degradation δ")  # fmt: skip
    axes[0][0].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    add_footer(
        fig,
        "Each law fitted on the points of this run its inputs allow (every study's runs, shared runs once); held out: "
        "each size (budget) predicted by a fit without it. † a parameter at its bound; (not fitted): too few points "
        "or an input no study records. δ laws fitted on linear residuals are scored against the held-out mean |δ|.",
    )
    return fig


def _law_label(rows, law: str) -> str:
    """The law's name with its number of points, † where its fit has a parameter at its bound, or why not fitted."""
    mine = rows[(rows["law"] == law) & (rows["source"] == "this run's fit")]
    first = mine.iloc[0] if len(mine) else None
    if first is None or str(first["note"]).startswith("not fitted"):
        return f"{law} (not fitted)"
    bound = "†" if mine["note"].astype(str).str.contains("at its bound").any() else ""
    return f"{law}{bound} ({int(first['n_points'])} pts)"
