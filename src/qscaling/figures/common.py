"""Figures of no one study: the learning curves of the shared trunks (figures/common/learning_curves)."""

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
