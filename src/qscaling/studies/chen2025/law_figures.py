"""Chen et al. 2025's law-only figures (figures/chen2025/…): Table 1's W4A4 constants over the paper's (N, D) and,
given `fits["qat"]` (a chen2025.qat fit), this run's fit beside them — as dashed contours where its iso-lines
cross the view, and along one line of constant D/N from the sizes it was fitted on to the paper's."""

import numpy as np

from qscaling.figures import add_footer, figure, new_figure
from qscaling.figures.caveats import extrapolation_note, flag_bounds, mark_extrapolation
from qscaling.laws import LAWS, compare_sources
from qscaling.laws import chen2025 as law

PAPER = "chen2025"
PAPER_N, PAPER_D = (10**7.5, 1e11), (10**9.5, 10**13.5)  # the view: 30M–100B parameters, 3B–30T tokens
FIT_STYLE = {"colors": "C3", "linestyles": "--"}


def _contour_panel(ax, sources, quantity, levels, G) -> bool:
    """Filled contours of the paper's constants, iso-lines of each source; whether this run's fit has any iso-line
    in view (a fit flat in N and D has none)."""
    N, D = np.meshgrid(np.geomspace(*PAPER_N, 120), np.geomspace(*PAPER_D, 120))
    crossed = False
    for label, params in sources:
        values = quantity(params, N, D, G)
        if label == "paper":
            ax.contourf(N, D, values, levels=levels, cmap="viridis", extend="both")
        inside = [level for level in levels if values.min() < level < values.max()]
        if not inside:
            continue
        style = {"colors": "k", "linestyles": "-"} if label == "paper" else FIT_STYLE
        ax.clabel(ax.contour(N, D, values, levels=inside, linewidths=0.8, **style), fontsize=6, fmt="%.3g")
        crossed |= label != "paper"
    ax.set(xscale="log", yscale="log", xlabel="parameters N", ylabel="training tokens D")
    return crossed


def _cut_panel(ax, fit, sources, quantity, ylabel, G) -> float:
    """The quantity along the median D/N of this run's points, from its smallest fitted size to the paper's
    largest: the paper's constants solid, this run's fit dashed, hatched beyond the sizes it was fitted on."""
    inputs = fit.points["inputs"]
    ratio = float(np.median(np.asarray(inputs["D"], float) / np.asarray(inputs["N"], float)))
    N = np.geomspace(min(inputs["N"]) / 2, PAPER_N[1], 200)
    for label, params in sources:
        ax.plot(N, quantity(params, N, ratio * N, G), "-" if label == "paper" else "--",
                color="k" if label == "paper" else "C3", lw=1.2,
                label="paper (Table 1)" if label == "paper" else "this run's fit")  # fmt: skip
    ax.set(xscale="log", xlabel="parameters N", ylabel=ylabel, title=f"along D/N = {ratio:.3g}")
    mark_extrapolation(ax, fit, "N", (N[0], N[-1]))
    ax.legend(fontsize=6)
    return ratio


def _contours(fits, quantity, levels, title, G):
    fit = fits.get("qat")
    sources = compare_sources(LAWS["chen2025.qat"], fit, variant="W4A4")
    fig, axes = new_figure(2 if fit else 1, 1, width=5.0, height=4.0)
    crossed = _contour_panel(axes[0][0], sources, quantity, levels, G)
    axes[0][0].set_title(title)
    note = "Constants: Chen et al. 2025, Table 1 (W4A4)"
    if fit is not None:
        ratio = _cut_panel(axes[0][1], fit, sources, quantity, title.split(",")[0], G)
        fig.tight_layout()
        flat = "" if crossed else " (none here: its value does not cross a drawn level)"
        cut = f"right: both along D/N = {ratio:.3g}"
        beyond = extrapolation_note(fit, {"N": PAPER_N, "D": PAPER_D})
        note += f"; dashed: this run's fit, its iso-lines{flat}; {cut}." + (
            f"\nLeft: this run's fit, {beyond}." if beyond else ""
        )
        flag_bounds(fig, {"this run's W4A4 fit": fit})
    add_footer(fig, note)
    return fig


@figure(fits="chen2025/qat", law_only=True)
def fig1(tables, fits, G=128):
    """W4A4 QAT error δ_p over (N, D): iso-error lines of slope γ_N/γ_D in log–log."""

    def delta(params, N, D, G):
        return law.qat_error(params, {"N": N, "D": D, "G": G})

    levels = [0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2]
    return _contours(fits, delta, levels, f"W4A4 QAT error δ_p, G = {G}", G)


@figure(fits="chen2025/qat", law_only=True)
def fig16(tables, fits, G=128):
    """Effective-parameter multiplier N_eff/N of W4A4 QAT over (N, D)."""
    levels = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    return _contours(
        fits, law.effective_parameter_multiplier, levels, f"W4A4 effective-parameter multiplier, G = {G}", G
    )
