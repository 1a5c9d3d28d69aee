"""The seed study's figure (figures/common/noise.png): every seed's held-out loss and δ per (size, budget), with
the σ_seed each cell gives the noise model."""

import numpy as np

from qscaling.figures import add_footer, figure, new_figure, no_points, series_palette
from qscaling.noise import describe_cell, mad_sigma
from qscaling.studies.noise.grid import FULL

PAPER = "common"
# What the recipe is meant to reach at the reference cells (one run's loss, one run's δ; nats).
TARGETS = {"loss": 0.01, "delta": 0.02}


def _cells(rows):
    return sorted({(size, int(budget), n) for size, budget, n in zip(rows["size"], rows["budget"], rows["N"])},
                  key=lambda cell: (cell[2], cell[1]))  # fmt: skip


@figure(tables={"noise": "noise"})
def noise(tables, fits):
    """Left: each seed's held-out loss, fp32 and the quantized precision; right: each seed's δ. A cell's bar is
    its median ± σ_seed (MAD of its seeds); the footer lists each σ_seed with its dof beside the recipe's target."""
    table = tables["noise"]
    trained = table[~table["diverged"]]
    fig, axes = new_figure(2, 1, width=4.2, height=3.4)
    by_loss, by_delta = axes[0]
    if trained.empty:
        for ax in (by_loss, by_delta):
            no_points(ax, "no run trained")
        return fig
    cells = _cells(trained)
    positions = {cell[:2]: i for i, cell in enumerate(cells)}
    precisions = [FULL, *sorted(set(trained["precision"]) - {FULL})]
    colours = dict(zip(precisions, series_palette("viridis", len(precisions))))
    notes = []
    for panel, value, shown in ((by_loss, "loss", precisions), (by_delta, "delta", precisions[1:])):
        for offset, precision in zip(np.linspace(-0.15, 0.15, len(shown)), shown):
            rows = trained[trained["precision"] == precision]
            for (size, budget), group in rows.groupby(["size", "budget"]):
                x = positions[(size, int(budget))] + offset
                values = group[value].to_numpy(float)
                panel.plot(np.full(len(values), x), values, "o", ms=3, color=colours[precision], alpha=0.8)
                if len(values) >= 2:
                    sigma = mad_sigma(values, (size, int(budget)))
                    middle = float(np.median(values))
                    panel.errorbar([x + 0.06], [middle], yerr=[sigma.value], fmt="_", ms=8, capsize=2,
                                   color=colours[precision])  # fmt: skip
                    if value == "delta" or precision == FULL:  # what the noise model holds
                        notes.append(f"{f'δ {precision}' if value == 'delta' else 'fp32 loss'} at {describe_cell((size, int(budget)))}"
                                     f" {sigma.value:.3g} ({sigma.runs} seeds)")  # fmt: skip
            panel.plot([], [], "o", ms=3, color=colours[precision], label=precision)
    for panel in (by_loss, by_delta):
        panel.set_xticks(range(len(cells)), [f"{size}\n{budget / 1e6:g}M" for size, budget, _ in cells], fontsize=6)
        panel.set_xlim(-0.5, len(cells) - 0.5)
    by_delta.axhline(0, color="0.6", lw=0.6)
    by_loss.set(ylabel="held-out loss (nats/token)", title="loss of each seed")
    by_delta.set(ylabel="δ = loss − fp32 partner's (nats/token)", title="δ of each seed")
    by_loss.legend(fontsize=6)
    dof = f"{mad_sigma(np.arange(5.0)).dof:.1f} dof at 5 seeds"
    add_footer(fig, f"bars: median ± σ_seed (MAD of the seeds, scaled to be unbiased; {dof}); σ_seed of the "
                    "noise model: " + "; ".join(notes))  # fmt: skip
    add_footer(fig, f"the recipe's target: σ_seed ≤ {TARGETS['loss']} nats of an fp32 loss, ≤ {TARGETS['delta']} "
                    "of a δ, at every cell")  # fmt: skip
    return fig
