"""The ladder's figures (figures/common/…): the Chinchilla fit on the annealed grid, its profile over E, and the
learning-rate sweep."""

import numpy as np

from qscaling.figures import add_footer, compact_number, figure, new_figure, series_palette
from qscaling.figures.caveats import flag_bounds, mark_extrapolation
from qscaling.studies.ladder.analysis import ALPHA_TARGET, EPOCH_AI, FLAT, flat_ridge

PAPER = "common"


def _fit_summary(fit) -> str:
    """α, β with their CIs and the held-out error, each flagged where the optimiser stopped on a bound."""
    parts = []
    for name, symbol in (("alpha", "α"), ("beta", "β"), ("E", "E")):
        low, high = fit.ci[name]
        flag = " (at its bound)" if fit.at_bound(name) else ""
        parts.append(f"{symbol} = {fit.params[name]:.3f} [{low:.3f}, {high:.3f}]{flag}")
    heldout = fit.heldout_relative_error
    return "; ".join(parts) + (f"; leave-one-size-out error {heldout:.1%}" if heldout is not None else "")


@figure(tables={"ladder": "ladder"}, fits="ladder/chinchilla")
def ladder(tables, fits):
    """Annealed loss of the ladder against N at each budget and against D at each size, with this run's Chinchilla
    fit drawn through both; Epoch AI's exponents as the slope a paper-scale ladder would show."""
    grid = tables["ladder"][tables["ladder"]["variant"] == "grid"].sort_values(["N", "D"])
    fit = fits.get("chinchilla")
    fig, axes = new_figure(2, 1, width=4.2, height=3.4)
    by_n, by_d = axes[0]
    # Budgets are named by their nominal size (`milestone`); D is the tokens actually seen (whole steps).
    sizes, budgets = sorted(grid["N"].unique()), sorted(grid["milestone"].unique())
    size_colours = dict(zip(sizes, series_palette("viridis", len(sizes))))
    budget_colours = dict(zip(budgets, series_palette("rocket", len(budgets))))
    for budget, rows in grid.groupby("milestone"):
        by_n.errorbar(rows["N"], rows["loss"], yerr=rows["loss_se"], fmt="o", color=budget_colours[budget], ms=4,
                      label=compact_number(budget))  # fmt: skip
    for n, rows in grid.groupby("N"):
        by_d.errorbar(rows["D"], rows["loss"], yerr=rows["loss_se"], fmt="o", color=size_colours[n], ms=4,
                      label=f"{rows['size'].iloc[0]} ({n:,})")  # fmt: skip
    if fit is not None:
        n_line = np.geomspace(min(sizes) / 1.3, max(sizes) * 1.3, 50)
        d_line = np.geomspace(grid["D"].min() / 1.3, grid["D"].max() * 1.3, 50)
        for budget, rows in grid.groupby("milestone"):
            d = np.full_like(n_line, rows["D"].iloc[0])
            by_n.plot(n_line, fit.predict({"N": n_line, "D": d}), color=budget_colours[budget], lw=1)
        for n in sizes:
            by_d.plot(d_line, fit.predict({"N": np.full_like(d_line, n), "D": d_line}), color=size_colours[n], lw=1)
        mark_extrapolation(by_n, fit, "N", (n_line[0], n_line[-1]))
        mark_extrapolation(by_d, fit, "D", (d_line[0], d_line[-1]))
    by_n.set(xscale="log", xlabel="N (non-embedding parameters)", ylabel="held-out loss (nats/token)",
             title="loss vs N at fixed D")  # fmt: skip
    by_d.set(xscale="log", xlabel="D (training tokens)", ylabel="held-out loss (nats/token)",
             title="loss vs D at fixed N")  # fmt: skip
    by_n.legend(title="D (training tokens)", fontsize=6, title_fontsize=7)
    by_d.legend(title="model (N)", fontsize=6, title_fontsize=7)
    summary = _fit_summary(fit) if fit is not None else "no Chinchilla fit"
    add_footer(
        fig,
        f"Points: this run's annealed (WSD cooldown) models, ± s.e. over held-out windows; lines: this run's fit, "
        f"{summary}. Epoch AI's refit of Chinchilla: α = {EPOCH_AI['alpha']}, β = {EPOCH_AI['beta']}.",
    )
    flag_bounds(fig, {"this run's Chinchilla fit": fit})
    return fig


@figure(tables={"profile": "ladder/e_profile"}, fits="ladder/chinchilla")
def ladder_profile(tables, fits):
    """Is α identified? The Chinchilla fit redone with E held at each value: left, the exponents it then takes (α's
    95 % CI and the design target beside them); right, how much worse it fits, and its held-out error."""
    frame, fit = tables["profile"].sort_values("E"), fits.get("chinchilla")
    fig, axes = new_figure(2, 1, width=4.2, height=3.4)
    exponents, quality = axes[0]
    ridge = flat_ridge(frame)
    for ax in (exponents, quality):
        ax.axvspan(ridge["E"].min(), ridge["E"].max(), color="0.9", label=f"objective within {FLAT:.0%} of the best")
    exponents.plot(frame["E"], frame["alpha"], "o-", color="C0", ms=4, label="α with E held")
    exponents.plot(frame["E"], frame["beta"], "s--", color="C1", ms=4, label="β with E held")
    exponents.axhline(ALPHA_TARGET, color="C3", lw=0.8, ls=":", label=f"α target (CI above {ALPHA_TARGET})")
    if fit is not None:
        low, high = fit.ci["alpha"]
        exponents.errorbar([fit.params["E"]], [fit.params["alpha"]], yerr=[[fit.params["alpha"] - low],
                           [high - fit.params["alpha"]]], fmt="D", color="black", ms=5, capsize=3,
                           label="free fit: α, 95 % CI")  # fmt: skip
    exponents.set(xlabel="E held at (nats/token)", ylabel="fitted exponent", title="exponents along the profile")
    exponents.legend(fontsize=6)
    best = frame["objective"].min()
    quality.plot(frame["E"], 100 * (frame["objective"] / best - 1), "o-", color="black", ms=4,
                 label="objective above the best (%)")  # fmt: skip
    quality.plot(frame["E"], 100 * frame["heldout_relative_error"], "s--", color="C2", ms=4,
                 label="leave-one-size-out error (%)")  # fmt: skip
    quality.set(xlabel="E held at (nats/token)", ylabel="%", yscale="symlog", title="fit quality along the profile")
    quality.legend(fontsize=6)
    add_footer(
        fig,
        "This run's annealed ladder grid, the Chinchilla law refitted with E fixed at each point (no bootstrap). "
        f"Epoch AI's refit of Chinchilla (44M–16B parameters): α = {EPOCH_AI['alpha']}, E = {EPOCH_AI['E']}.",
    )
    flag_bounds(fig, {"this run's free Chinchilla fit": fit}, drawn=("E", "alpha"))
    return fig


@figure(tables={"sweep": "ladder/lr_sweep"})
def ladder_lr(tables, fits):
    """The learning-rate sweep: annealed loss against peak LR per size, each size's measured optimum, and the LR
    the recipe gives it; right, the optima against N with this run's power law and the recipe's."""
    sweep = tables["sweep"].sort_values(["N", "lr"])
    fig, axes = new_figure(2, 1, width=4.2, height=3.4)
    curves, law = axes[0]
    sizes = sorted(sweep["N"].unique())
    colours = dict(zip(sizes, series_palette("viridis", len(sizes))))
    for n, rows in sweep.groupby("N"):
        curves.errorbar(rows["lr"], rows["loss"], yerr=rows["loss_se"], fmt="-o", color=colours[n], ms=4,
                        label=f"{rows['size'].iloc[0]} (D={compact_number(rows['milestone'].iloc[0])})")  # fmt: skip
        curves.axvline(rows["lr_opt"].iloc[0], color=colours[n], lw=0.8, ls=":")
    curves.set(xscale="log", xlabel="peak learning rate", ylabel="held-out loss (nats/token)",
               title="loss vs peak LR (dotted: optimum)")  # fmt: skip
    curves.legend(title="model", fontsize=6, title_fontsize=7)
    optima = sweep.drop_duplicates("N")
    interior = optima[optima["interior"]]
    edge = optima[~optima["interior"]]
    law.scatter(interior["N"], interior["lr_opt"], color="black", s=18, label="measured optimum", zorder=3)
    if not edge.empty:
        law.scatter(edge["N"], edge["lr_opt"], facecolors="none", edgecolors="black", s=18,
                    label="optimum at the swept range's edge", zorder=3)  # fmt: skip
    law.plot(optima["N"], optima["lr_recipe"], color="tab:blue", lw=1.2, label="the recipe's LR(N) (config)")
    footer = "This run's sweep, annealed runs at one budget per size"
    if "lr_law" in optima:
        first = optima.iloc[0]
        law.plot(optima["N"], optima["lr_law"], color="black", lw=1, ls="--",
                 label=f"fit: N^-{first['law_exponent']:.2f}")  # fmt: skip
        footer += (
            f"; fitted exponent {first['law_exponent']:.2f} "
            f"[{first['law_exponent_low']:.2f}, {first['law_exponent_high']:.2f}] (95 % CI over sizes)"
        )
    law.set(xscale="log", yscale="log", xlabel="N (non-embedding parameters)", ylabel="peak learning rate",
            title="optimal LR vs N")  # fmt: skip
    law.legend(fontsize=6)
    add_footer(fig, footer)
    return fig
