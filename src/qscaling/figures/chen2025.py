"""Chen et al. 2025 figures. Law-only ones draw Table 1's W4A4 constants and, given `fits["qat"]` (a
chen2025.qat fit), this run's fit as dashed contours."""

import numpy as np

from qscaling.figures import add_footer, figure, new_figure
from qscaling.laws import LAWS, compare_sources
from qscaling.laws import chen2025 as law


def _contours(fits, quantity, levels, title, G):
    fit = fits.get("qat")
    sources = compare_sources(LAWS["chen2025.qat"], fit, variant="W4A4")
    fig, axes = new_figure(width=5.0, height=4.0)
    ax = axes[0][0]
    N, D = np.meshgrid(np.logspace(7.5, 11, 120), np.logspace(9.5, 13.5, 120))
    for label, params in sources:
        style = {"linestyles": "-" if label == "paper" else "--", "colors": "k" if label == "paper" else "C3"}
        if label == "paper":
            ax.contourf(N, D, quantity(params, N, D, G), levels=levels, cmap="viridis", extend="both")
        lines = ax.contour(N, D, quantity(params, N, D, G), levels=levels, linewidths=0.8, **style)
        ax.clabel(lines, fontsize=6, fmt="%.3g")
    ax.set(xscale="log", yscale="log", xlabel="parameters N", ylabel="training tokens D", title=title)
    add_footer(fig, "Constants: Chen et al. 2025, Table 1 (W4A4)" + ("; red dashed: this run's fit" if fit else ""))
    return fig


@figure(law_only=True)
def fig1(tables, fits, G=128):
    """W4A4 QAT error δ_p over (N, D): iso-error lines of slope γ_N/γ_D in log–log."""

    def delta(params, N, D, G):
        return law.qat_error(params, {"N": N, "D": D, "G": G})

    levels = [0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2]
    return _contours(fits, delta, levels, f"W4A4 QAT error δ_p, G = {G}", G)


@figure(law_only=True)
def fig16(tables, fits, G=128):
    """Effective-parameter multiplier N_eff/N of W4A4 QAT over (N, D)."""
    levels = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    return _contours(
        fits, law.effective_parameter_multiplier, levels, f"W4A4 effective-parameter multiplier, G = {G}", G
    )
