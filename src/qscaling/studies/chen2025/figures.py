"""Chen et al. 2025 figures. Law-only ones draw Table 1's W4A4 constants and, given `fits["qat"]` (a
chen2025.qat fit), this run's fit as dashed contours. Study figures read the chen2025 table (`tables["evals"]`: δ
per QAT point), its Linear-input statistics (`tables["activations"]`), the decomposition points and every fit."""

import itertools

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from qscaling.figures import add_footer, compact_number, figure, interval_text, new_figure, no_points, series_palette
from qscaling.laws import LAWS, compare_sources
from qscaling.laws import chen2025 as law
from qscaling.studies.chen2025.analysis import (
    RATIO_VARIANTS,
    REDUCED_PRECISIONS,
    decomposition_slope,
    fit_name,
    main_grid,
)
from qscaling.studies.chen2025.grid import ABSMAX, CHANNEL, FP, INT, PRECISIONS

PAPER = "chen2025"


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


STUDY_TABLES = {"evals": "chen2025"}
NOISE_NOTE = "error bars: ± 2 s.e. of δ over held-out windows (between-run seed noise is larger: see claims)"


def _trained_rows(tables, precision):
    """Every point of `precision` at the recipe seed that trained, whatever its format, quantizer or LR."""
    table = tables["evals"]
    return table[(table["precision"] == precision) & (table["seed"] == table["seed"].min()) & ~table["diverged"]]


def _recipe_rows(tables, precision):
    """The law's points of `precision`: INT4, absmax, the recipe's LR and seed."""
    rows = _trained_rows(tables, precision)
    return rows[main_grid(rows)]


def table1_frame(tables, fits):
    """Table 1: k, γ_N, γ_D, γ_G per precision (columns `law_<param>`), the paper's and this run's with 95 % CIs
    (`law_<param>_ci`: the interval, "held at paper" or "… at bound"; the fits' notes are in their JSON)."""
    rows = []
    for precision in PRECISIONS:
        paper = law.QAT.paper_params[precision]
        values = {f"law_{name}": value for name, value in dict(paper).items()}
        rows.append({"precision": precision, "source": f"paper ({paper.source})", **values})
        fit = fits.get(fit_name(precision))
        if fit is None:
            continue
        estimate = {f"law_{name}": fit.params[name] for name in law.QAT.param_names}
        bounds = {f"law_{name}_ci": interval_text(fit, name) for name in law.QAT.param_names}
        rows.append({"precision": precision, "source": "this run's fit", **estimate, **bounds,
                     "n_points": fit.n_points, "heldout_relative_error": fit.heldout_relative_error})  # fmt: skip
    return pd.DataFrame(rows)


def _table_page(frame, width):
    """A figure with one bare axes, tall enough for a table of the frame's rows."""
    fig, axes = new_figure(width=width, height=0.25 * len(frame) + 0.9)
    ax = axes[0][0]
    ax.axis("off")
    return fig, ax


@figure(tables=STUDY_TABLES, fits="chen2025", frame=True)
def table1(tables, fits):
    """Table 1 rendered: the QAT law's constants per precision, the paper's beside this run's."""
    frame = table1_frame(tables, fits)
    fig, ax = _table_page(frame, width=7.5)
    cells = []
    for row in frame.itertuples():
        values = []
        for name in law.QAT.param_names:
            interval = getattr(row, f"law_{name}_ci", "")
            values.append(
                f"{getattr(row, f'law_{name}'):.3g}"
                + (f" {interval}" if isinstance(interval, str) and interval else "")
            )
        cells.append(values)
    labels = [
        f"{row.precision} · {'paper' if row.source.startswith('paper') else 'this run'}" for row in frame.itertuples()
    ]
    table = ax.table(
        cellText=cells,
        rowLabels=labels,
        colLabels=["k", "γ_N", "γ_D", "γ_G"],
        colWidths=[0.28, 0.24, 0.24, 0.24],
        bbox=[0.22, 0, 0.78, 1],
    )
    table.auto_set_font_size(False)
    table.set_fontsize(6)
    ax.set_title("QAT error law δ = k·D^γ_D·(log2 G)^γ_G / N^γ_N — Chen et al. 2025, Table 1")
    add_footer(
        fig,
        "Paper: 74M–595M parameters, 10B–100B tokens; this run: models under 250k parameters, 95 % CIs from "
        "resampling runs.\nHeld at paper: the grid has one value of that exponent's input (N or G) for the "
        "precision, or no point with δ > 0 at another; at bound: the optimum lies outside the law's range.",
    )
    return fig


@figure(tables=STUDY_TABLES, fits="chen2025/qat")
def fig4(tables, fits):
    """δ_W4A4 against N, D and G, each panel at the most common values of the other two, with this run's fit and
    the paper's exponents."""
    return _against_each_input(tables, fits, "W4A4")


@figure(tables=STUDY_TABLES, fits="chen2025")
def fig7(tables, fits):
    """δ_W4A16 (weights only) and δ_W16A4 (activations only) against N, D and G, with their fits."""
    return _against_each_input(tables, fits, "W4A16", "W16A4")


@figure(tables=STUDY_TABLES, fits="chen2025")
def fig5(tables, fits):
    """Each precision's fitted δ against the measured one, coloured by G: how well one law covers the grid."""
    table = tables["evals"]
    present = [name for name in PRECISIONS if fit_name(name) in fits]
    fig, axes = new_figure(max(1, len(present)), 1, width=2.8, height=2.9)
    groups = sorted(table["G"].unique())
    colours = dict(zip(groups, series_palette("viridis", len(groups))))
    for ax, precision in zip(axes[0], present):
        rows = _recipe_rows(tables, precision)
        rows = rows[rows["delta"] > 0]
        predicted = fits[fit_name(precision)].predict(rows)
        for group, colour in colours.items():
            chosen = (rows["G"] == group).to_numpy()
            if chosen.any():
                ax.scatter(rows["delta"][chosen], predicted[chosen], s=12, color=colour, label=f"G = {group:g}")
        both = np.concatenate([rows["delta"].to_numpy(float), np.asarray(predicted, float)])
        # One square view a decade or more wide on both axes, so y = x is the diagonal and ticks stay sparse.
        ends = np.array([both.min() / 3, both.max() * 3]) if len(rows) else np.array([1e-4, 1e-3])
        ax.plot(ends, ends, ":", color="k", lw=1, label="y = x")
        ax.set(xscale="log", yscale="log", xlim=ends, ylim=ends, xlabel="measured δ (nats/token)",
               title=precision.replace("_", " "), ylabel="fitted δ" if precision == present[0] else "")  # fmt: skip
        ax.legend(fontsize=6)
    add_footer(fig, "This run's QAT points with δ > 0 at the recipe seed (the fits' points); each precision's own fit.")
    return fig


def _against_each_input(tables, fits, *precisions):
    panels = [(precision, variable) for precision in precisions for variable in ("N", "D", "G")]
    fig, axes = new_figure(3, len(precisions), width=3.4, height=3.0)
    labels = {"N": "N (non-embedding parameters)", "D": "D (training tokens)", "G": "G (group size)"}
    for ax, (precision, variable) in zip([ax for row in axes for ax in row], panels):
        rows = _recipe_rows(tables, precision)
        fit, paper = fits.get(fit_name(precision)), law.QAT.paper_params[precision]
        others = [name for name in ("N", "D", "G") if name != variable]
        if rows.empty:
            ax.text(0.5, 0.5, f"{precision}: not in this run's grid", ha="center", transform=ax.transAxes)
            continue
        mode = rows.groupby(others).size().idxmax()
        panel = rows.set_index(others).loc[[mode]].reset_index().sort_values(variable)
        ax.errorbar(panel[variable], panel["delta"], yerr=2 * panel["delta_se"], fmt="o", color="C0", ms=4,
                    label="this run")  # fmt: skip
        grid = np.geomspace(panel[variable].min() / 1.2, panel[variable].max() * 1.2, 40)
        at = {**dict(zip(others, mode)), variable: grid}
        points = pd.DataFrame(
            {name: np.broadcast_to(np.asarray(value, float), grid.shape) for name, value in at.items()}
        )
        if fit is not None:
            ax.plot(grid, fit.predict(points), "-", color="C0", lw=1, label="this run's fit")
        slope = {"N": -paper["gamma_N"], "D": paper["gamma_D"]}.get(variable)
        if slope is not None and len(panel):
            anchor = float(panel["delta"].abs().median())
            ax.plot(grid, anchor * (grid / np.median(panel[variable])) ** slope, ":", color="k", lw=1,
                    label=f"paper slope {slope:+.3g}")  # fmt: skip
        fixed = ", ".join(f"{name} = {compact_number(value)}" for name, value in zip(others, mode))
        ylabel = f"δ_{precision} (nats/token)" if variable == "N" else ""
        ax.set(xscale="log", xlabel=labels[variable], ylabel=ylabel, title=fixed)
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
        ax.legend(fontsize=6)
    fig.tight_layout()  # rows spaced so a panel's title clears the axis labels above it
    names = " and ".join(precisions)
    add_footer(fig, f"Points: this run's {names} QAT models − their fp32 partners; {NOISE_NOTE}.")
    return fig


@figure(tables={**STUDY_TABLES, "decomposition": "chen2025/decomposition"}, fits="chen2025")
def fig6(tables, fits):
    """δ_W4A4 against δ_W4A16 + δ_W16A4 at each shared (N, D, G): this run's slope c beside the paper's 0.906."""
    frame = tables["decomposition"]
    fig, axes = new_figure(width=4.0, height=3.6)
    ax = axes[0][0]
    colours = dict(zip(sorted(frame["N"].unique()), series_palette("viridis", frame["N"].nunique())))
    for n, rows in frame.groupby("N"):
        ax.scatter(rows["delta_sum"], rows["delta_W4A4"], s=14, color=colours[n], label=f"N = {n:,}")
    values = frame[["delta_sum", "delta_W4A4"]].to_numpy(float)
    line = np.array([min(0.0, values.min(initial=0.0)), max(values.max(initial=1e-6), 1e-6)]) * 1.1
    ax.plot(line, law.DECOMPOSITION_SLOPE * line, ":", color="k", lw=1, label=f"paper y = {law.DECOMPOSITION_SLOPE}x")
    if len(frame) >= 2:
        c, low, high = decomposition_slope(frame, bootstrap=200)
        ax.plot(line, c * line, "-", color="C3", lw=1, label=f"this run y = {c:.2f}x [{low:.2f}, {high:.2f}]")
    ax.set(xlabel="δ_W4A16 + δ_W16A4 (nats/token)", ylabel="δ_W4A4 (nats/token)",
           title="W4A4 error vs the sum of its parts")  # fmt: skip
    ax.xaxis.set_major_locator(MaxNLocator(4))
    ax.ticklabel_format(style="sci", scilimits=(-2, 2))
    ax.legend(fontsize=6)
    add_footer(fig, "Points: this run's QAT models at the recipe seed; slope through the origin, 95 % CI over points.")
    return fig


@figure(tables={**STUDY_TABLES, "activations": "chen2025/activations"})
def fig9(tables, fits):
    """Left: kurtosis of each Linear's input per role, fp32 vs W4A4 models; right: δ_W4A4 with and without the FC2
    input at 8 bits, across G."""
    stats = tables["activations"]
    fig, axes = new_figure(2, 1, width=4.2, height=3.2)
    left, right = axes[0]
    roles = ["qkv", "o", "fc1", "fc2"]
    for offset, (precision, colour) in enumerate((("full", "0.4"), ("W4A4", "C0"))):
        rows = stats[(stats["precision"] == precision) & main_grid(stats)]
        medians = rows.groupby("role")["kurtosis"].median().reindex(roles)
        left.bar(np.arange(len(roles)) + 0.4 * offset - 0.2, medians, width=0.4, color=colour,
                 label="fp32" if precision == "full" else "W4A4 QAT")  # fmt: skip
    left.set_xticks(range(len(roles)), roles)
    left.set(ylabel="input kurtosis (median)", title="kurtosis of each Linear's input")
    left.legend(fontsize=6)
    for precision, marker in (("W4A4", "o"), ("W4A4_FC2_8bit", "s")):
        rows = _recipe_rows(tables, precision)
        mean = rows.groupby("G")["delta"].mean()
        right.plot(mean.index, mean.to_numpy(), marker=marker, label=precision.replace("_", " "))
    right.set(xscale="log", xlabel="G (group size)", ylabel="mean δ over N and D (nats/token)",
              title="W4A4 with the FC2 input at 8 bits")  # fmt: skip
    right.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    fig.tight_layout()
    right.legend(fontsize=6)
    add_footer(
        fig,
        "This run's models at the recipe seed; kurtosis on 8 held-out windows, median over blocks and models. "
        "Paper: FC2's input kurtosis 123 (BF16) → 89 (QAT);\nFC2 at 8 bits cuts W4A4 error by 20.5 % (G = 32) to "
        "42.9 % (G = 256).",
    )
    return fig


REDUCED_LABELS = {None: "with D", "no_D": "without D", "N_only": "N only"}  # REDUCED_LAWS and the full law


def _insample_relative_error(fit) -> float:
    """Mean |fitted − measured| / measured over the fit's own points (Chen et al.'s prediction error)."""
    observed = np.asarray(fit.points["observed"], float)
    predicted = np.asarray(fit.predict(pd.DataFrame(fit.points["inputs"])), float)
    return float(np.mean(np.abs(predicted - observed) / observed))


def table2_frame(tables, fits):
    """Tables 2 and 4: relative prediction error of the law, of it without D and of an N-only law δ = k / N^γ_N,
    for W4A4 and W4A16 — on the fits' own points (`insample_relative_error`, the paper's measure) and on each
    size left out of its fit (`heldout_relative_error`), beside the paper's (`paper_relative_error`)."""
    rows = []
    for precision in REDUCED_PRECISIONS:
        paper = law.PREDICTION_ERROR[precision]
        present = {form: fits[fit_name(precision, reduced)] for reduced, form in REDUCED_LABELS.items()
                   if fit_name(precision, reduced) in fits}  # fmt: skip
        if not present:
            continue
        for form, fit in present.items():
            rows.append({"precision": precision, "law": form, "n_points": fit.n_points,
                         "insample_relative_error": _insample_relative_error(fit),
                         "heldout_relative_error": fit.heldout_relative_error,
                         "paper_relative_error": paper.get(form, np.nan)})  # fmt: skip
        rows.append({"precision": precision, "law": "earlier laws (paper only)",
                     "paper_relative_error": paper["earlier laws"]})  # fmt: skip
    return pd.DataFrame(rows)


@figure(tables=STUDY_TABLES, fits="chen2025", frame=True)
def table2(tables, fits):
    """Tables 2 and 4 rendered: does each term of the law earn its place in prediction error?"""
    frame = table2_frame(tables, fits)
    fig, ax = _table_page(frame, width=6.5)

    def percent(value):
        return "—" if value is None or not np.isfinite(value) else f"{value:.1%}"

    cells = [
        [percent(row.get("insample_relative_error")), percent(row.get("heldout_relative_error")),
         percent(row["paper_relative_error"])]
        for row in frame.to_dict("records")
    ]  # fmt: skip
    table = ax.table(
        cellText=cells,
        rowLabels=[f"{row.precision} · {row.law}" for row in frame.itertuples()],
        colLabels=["this run, own points", "this run, size left out", "paper"],
        bbox=[0.32, 0, 0.68, 1],
    )
    table.auto_set_font_size(False)
    table.set_fontsize(6)
    ax.set_title("Relative prediction error of δ — Chen et al. 2025, Tables 2 and 4")
    add_footer(
        fig,
        "Without D: γ_D held at 0; N only: γ_D and γ_G held at 0 (δ = k / N^γ_N). The paper's 'earlier laws' are "
        "other forms,\nnot this N-only law. Size left out: each N predicted by a fit that never saw it.",
    )
    return fig


@figure(tables={**STUDY_TABLES, "ratio": "chen2025/ratio"})
def fig8(tables, fits):
    """R = δ_W16A4 / δ_W4A16 against D/N per N and G, plain and with the FC2 input at 8 bits, beside the paper's
    R at G = 32; hollow points have a δ inside 2 σ_seed."""
    ratios = tables["ratio"]
    fig, axes = new_figure(len(RATIO_VARIANTS), 1, width=3.4, height=3.0)
    sizes = sorted(ratios["N"].unique())
    colours = dict(zip(sizes, series_palette("viridis", len(sizes))))
    markers = dict(zip(sorted(ratios["G"].unique()), itertools.cycle("osD^v")))
    for ax, variant in zip(axes[0], RATIO_VARIANTS):
        rows = ratios[ratios["variant"] == variant]
        for (n, group), points in rows.groupby(["N", "G"]):
            faces = [colours[n] if clear else "none" for clear in points["clear_of_seed_noise"]]
            ax.scatter(points["tokens_per_param"], points["R"], s=16, marker=markers[group], edgecolors=colours[n],
                       facecolors=faces, label=f"N = {n:,}, G = {group:g}")  # fmt: skip
        if variant == "plain":
            paper = law.RATIO_AT_TOKENS_PER_PARAM
            ax.plot(list(paper), list(paper.values()), ":", color="k", marker="x", label="paper, G = 32")
        if rows.empty:
            ax.text(0.5, 0.5, f"{RATIO_VARIANTS[variant]}:\nnot in this run's grid", ha="center", fontsize=7,
                    transform=ax.transAxes)  # fmt: skip
        ax.axhline(1, color="0.6", lw=0.6)
        ax.set(xscale="log", xlabel="D / N (tokens per parameter)", title=f"R, {variant}",
               ylabel="R = δ_W16A4 / δ_W4A16" if variant == "plain" else "")  # fmt: skip
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    sigma = float(ratios["sigma_seed"].iloc[0]) if len(ratios) else np.nan
    add_footer(
        fig,
        f"This run's models at the recipe seed; hollow: a δ within 2 σ_seed = {sigma:.2g} of 0, where R is noise. "
        "Paper: R 1.67 → 1.20 (D/N 100 → 1000), 0.85–1.10 with FC2 8-bit.",
    )
    return fig


def _at_point(rows, point, columns=("N", "D", "G")):
    return rows[np.logical_and.reduce([rows[column] == point[column] for column in columns])]


@figure(tables=STUDY_TABLES)
def fig2(tables, fits):
    """δ_W4A4 of INT4 and FP4 (E2M1) QAT against the group size, at each (N, D) where FP4 trained."""
    rows = _trained_rows(tables, "W4A4")
    rows = rows[(rows["quantizer"] == ABSMAX) & (rows["lr_scale"] == 1.0)]
    fp4 = rows[rows["format"] == FP]
    points = fp4[["N", "D"]].drop_duplicates().sort_values(["N", "D"]).to_dict("records") or [None]
    fig, axes = new_figure(len(points), 1, width=3.2, height=3.0)
    for ax, point in zip(axes[0], points):
        if point is None:
            no_points(ax, "no FP4 point in this run's grid")
            continue
        here = _at_point(rows, point, ("N", "D"))
        here = here[here["G"].isin(fp4["G"])]
        for (format, label), offset in zip(((INT, "INT4"), (FP, "FP4 E2M1")), (0.97, 1.03)):
            chosen = here[here["format"] == format].sort_values("G")
            ax.errorbar(chosen["G"] * offset, chosen["delta"], yerr=2 * chosen["delta_se"], marker="o", ms=4,
                        capsize=2, label=label)  # fmt: skip
        ax.axhline(0, color="0.6", lw=0.6)
        ax.set(xscale="log", xlabel="G (group size; per channel/token at d_model)", ylabel="δ_W4A4 (nats/token)",
               title=f"N = {compact_number(point['N'])}, D = {compact_number(point['D'])}")  # fmt: skip
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
        ax.legend(fontsize=6)
    add_footer(fig, f"This run's W4A4 QAT models (absmax scaling, blocks of G) − their fp32 partners; {NOISE_NOTE}. "
               "The paper gives this as a figure only.")  # fmt: skip
    return fig


@figure(tables=STUDY_TABLES, fits="chen2025/qat")
def fig13(tables, fits):
    """FP4 (E2M1) QAT error against the prediction of this run's INT4 W4A4 law at the same (N, D, G)."""
    fit = fits.get("qat")
    rows = _trained_rows(tables, "W4A4")
    fp4 = rows[(rows["format"] == FP) & (rows["quantizer"] == ABSMAX) & (rows["lr_scale"] == 1.0)]
    fig, axes = new_figure(1, 1, width=3.6, height=3.4)
    ax = axes[0][0]
    if fit is None or fp4.empty:
        no_points(ax, "no INT4 W4A4 fit" if fit is None else "no FP4 point in this run's grid")
        return fig
    int4 = _recipe_rows(tables, "W4A4")
    int4 = int4[int4["delta"] > 0]
    for frame, label, colour in ((int4, "INT4 (the fit's points)", "0.6"), (fp4, "FP4 E2M1", "C1")):
        predicted = np.asarray(fit.predict(frame), float)
        ax.errorbar(predicted, frame["delta"], yerr=2 * frame["delta_se"], fmt="o", ms=4, color=colour, label=label)
    predicted = np.asarray(fit.predict(fp4), float)
    error = float(np.mean(np.abs(predicted - fp4["delta"]) / np.abs(fp4["delta"])))
    values = np.concatenate([predicted, fp4["delta"].to_numpy(float), np.asarray(fit.predict(int4), float)])
    ends = np.array([min(values.min(), 0.0), values.max()]) * 1.1
    ax.plot(ends, ends, ":", color="k", lw=1, label="y = x")
    ax.set(xlabel="δ predicted by this run's INT4 law", ylabel="measured δ (nats/token)",
           title=f"INT4 law on FP4: mean |error| {error:.0%}")  # fmt: skip
    ax.legend(fontsize=6)
    add_footer(fig, f"The INT4 W4A4 law fitted on this run's INT4 points, evaluated at each FP4 point's (N, D, G); "
               f"{NOISE_NOTE}.")  # fmt: skip
    return fig


@figure(tables=STUDY_TABLES)
def fig3(tables, fits):
    """δ_W4A4 and both models' losses against the peak LR (each QAT run and its fp32 partner at the same LR)."""
    rows = _trained_rows(tables, "W4A4")
    rows = rows[(rows["format"] == INT) & (rows["quantizer"] == ABSMAX)]
    swept = rows[rows["lr_scale"] != 1.0]
    fig, axes = new_figure(2, 1, width=3.2, height=3.0)
    left, right = axes[0]
    if swept.empty:
        no_points(left, "no LR sweep in this run's grid")
        return fig
    point = swept.iloc[0]
    sweep = _at_point(rows, point).sort_values("lr_scale")
    left.errorbar(sweep["lr_scale"], sweep["delta"], yerr=2 * sweep["delta_se"], marker="o", ms=4, capsize=2)
    left.axhline(0, color="0.6", lw=0.6)
    left.set(xscale="log", xlabel="peak LR / the recipe's", ylabel="δ_W4A4 (nats/token)", title="QAT error")
    left.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    right.plot(sweep["lr_scale"], sweep["loss"], marker="o", ms=4, label="W4A4 QAT")
    right.plot(sweep["lr_scale"], sweep["base_loss"], marker="s", ms=4, label="fp32")
    right.set(xscale="log", xlabel="peak LR / the recipe's", ylabel="held-out loss (nats/token)", title="losses")
    right.legend(fontsize=6)
    fig.tight_layout()
    where = f"N = {compact_number(point['N'])}, D = {compact_number(point['D'])}, G = {point['G']:g}"
    add_footer(fig, f"This run's W4A4 QAT models and fp32 partners trained at each peak LR ({where}); {NOISE_NOTE}. "
               "The paper gives this as a figure only.")  # fmt: skip
    return fig


def _group_text(point) -> str:
    return f"per channel (G = {point['G']:g})" if point["granularity"] == CHANNEL else f"G = {point['G']:g}"


QUANTIZER_NAMES = {"absmax": "absmax", "lsq": "LSQ", "lwc": "LWC", "lac": "LAC"}


@figure(tables=STUDY_TABLES)
def fig14(tables, fits):
    """δ of each learnable quantizer beside absmax at the same point: LSQ / LWC weights, LAC activation clipping."""
    table = tables["evals"]
    rows = table[(table["seed"] == table["seed"].min()) & ~table["diverged"] & (table["format"] == INT)]
    rows = rows[rows["lr_scale"] == 1.0]
    learned = rows[rows["quantizer"] != ABSMAX]
    panels = learned[["precision", "N", "D", "G", "granularity"]].drop_duplicates().to_dict("records") or [None]
    fig, axes = new_figure(len(panels), 1, width=2.8, height=3.0)
    for ax, panel in zip(axes[0], panels):
        if panel is None:
            no_points(ax, "no learnable quantizer in this run's grid")
            continue
        bars = _at_point(rows[rows["precision"] == panel["precision"]], panel)
        bars = bars.set_index("quantizer").reindex([name for name in QUANTIZER_NAMES if name in set(bars["quantizer"])])
        ax.bar(range(len(bars)), bars["delta"], yerr=2 * bars["delta_se"], color="C0", capsize=3)
        ax.set_xticks(range(len(bars)), [QUANTIZER_NAMES[name] for name in bars.index])
        ax.axhline(0, color="0.6", lw=0.6)
        ax.set(ylabel="δ (nats/token)" if panel is panels[0] else "",
               title=f"{panel['precision']}, N = {compact_number(panel['N'])}, {_group_text(panel)}")  # fmt: skip
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    add_footer(fig, f"This run's QAT models − their fp32 partners, each quantizer trained from scratch; {NOISE_NOTE}. "
               "The paper gives this as a figure only.")  # fmt: skip
    return fig
