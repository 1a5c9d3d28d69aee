"""Chen et al. 2025's figures from this run (the law-only ones: `law_figures`). They read the chen2025 table
(`tables["evals"]`: δ per QAT point), its Linear-input statistics (`tables["activations"]`), the decomposition
points, the ratio table (which carries σ_seed) and every fit."""

import itertools
import math

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from qscaling.figures import add_footer, compact_number, figure, interval_text, new_figure, no_points, series_palette
from qscaling.figures.caveats import flag_bounds, mark_extrapolation, seed_band, seed_band_note
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
STUDY_TABLES = {"evals": "chen2025"}
# What the figures of δ read: each δ is a QAT model less a separately trained partner, so σ_seed belongs beside it.
SEED_TABLES = {**STUDY_TABLES, "ratio": "chen2025/ratio"}


def seed_sd(tables) -> float:
    """σ_seed of δ (`analysis.seed_sigma`: the MAD of the seed repeats) from the ratio table; NaN without it."""
    ratio = tables.get("ratio")
    return float(ratio["sigma_seed"].iloc[0]) if ratio is not None and len(ratio) else math.nan


def noise_note(tables) -> str:
    source = "the MAD of δ over this study's seed repeats"
    return f"error bars: ± 2 s.e. of δ over held-out windows; {seed_band_note(seed_sd(tables), source)}"


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
    fig, ax = _table_page(frame, width=8.2)  # room for "1e-08 [1e-08, 1e-08] at bound" beside its row label
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
        "precision, or no point at another; at bound: the optimum lies outside the law's range.",
    )
    flag_bounds(fig, {f"this run's {precision} fit": fits.get(fit_name(precision)) for precision in PRECISIONS})
    return fig


@figure(tables=SEED_TABLES, fits="chen2025/qat")
def fig4(tables, fits):
    """δ_W4A4 against N, D and G, each panel at the most common values of the other two, with this run's fit and
    the paper's exponents."""
    return _against_each_input(tables, fits, "W4A4")


@figure(tables=SEED_TABLES, fits="chen2025")
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
        rows = _recipe_rows(tables, precision).dropna(subset=["delta"])
        predicted = fits[fit_name(precision)].predict(rows)
        for group, colour in colours.items():
            chosen = (rows["G"] == group).to_numpy()
            if chosen.any():
                ax.scatter(rows["delta"][chosen], predicted[chosen], s=12, color=colour, label=f"G = {group:g}")
        both = np.concatenate([rows["delta"].to_numpy(float), np.asarray(predicted, float), [0.0]])
        # One square view on linear axes (the fits read δ ≤ 0 too), so y = x is the diagonal.
        ends = np.array([both.min(), both.max()]) + np.array([-0.08, 0.08]) * (both.max() - both.min() or 1e-3)
        ax.plot(ends, ends, ":", color="k", lw=1, label="y = x")
        ax.axvline(0, color="0.6", lw=0.6)
        ax.set(xlim=ends, ylim=ends, xlabel="measured δ (nats/token)", title=precision.replace("_", " "),
               ylabel="fitted δ" if precision == present[0] else "")  # fmt: skip
        ax.xaxis.set_major_locator(MaxNLocator(3))
        ax.legend(fontsize=6)
    note = "This run's QAT points at the recipe seed, δ ≤ 0 included (the fits' points: each law is fitted on linear"
    add_footer(fig, note + " residuals); each precision's own fit.")
    flag_bounds(fig, {f"this run's {precision} fit": fits[fit_name(precision)] for precision in present})
    return fig


INPUT_LABELS = {"N": "N (non-embedding parameters)", "D": "D (training tokens)", "G": "G (group size)"}


def _input_panel(ax, rows, fit, precision, variable, sd) -> None:
    """δ of `precision` against one input at the most common values of the other two: the points with their
    evaluation error and seed band, this run's fit (hatched beyond the inputs it saw) and the paper's slope."""
    paper = law.QAT.paper_params[precision]
    others = [name for name in ("N", "D", "G") if name != variable]
    mode = rows.groupby(others).size().idxmax()
    panel = rows.set_index(others).loc[[mode]].reset_index().sort_values(variable)
    ax.errorbar(panel[variable], panel["delta"], yerr=2 * panel["delta_se"], fmt="o", color="C0", ms=4,
                label="this run")  # fmt: skip
    grid = np.geomspace(panel[variable].min() / 1.2, panel[variable].max() * 1.2, 40)
    at = {**dict(zip(others, mode)), variable: grid}
    points = pd.DataFrame({name: np.broadcast_to(np.asarray(value, float), grid.shape) for name, value in at.items()})
    if fit is not None:
        ax.plot(grid, fit.predict(points), "-", color="C0", lw=1, label="this run's fit")
    slope = {"N": -paper["gamma_N"], "D": paper["gamma_D"]}.get(variable)
    if slope is not None and len(panel):
        anchor = float(panel["delta"].abs().median())
        ax.plot(grid, anchor * (grid / np.median(panel[variable])) ** slope, ":", color="k", lw=1,
                label=f"paper slope {slope:+.3g}")  # fmt: skip
    fixed = ", ".join(f"{name} = {compact_number(value)}" for name, value in zip(others, mode))
    ylabel = f"δ_{precision} (nats/token)" if variable == "N" else ""
    ax.set(xscale="log", xlabel=INPUT_LABELS[variable], ylabel=ylabel, title=fixed)
    seed_band(ax, panel[variable], panel["delta"], sd, "C0")
    if fit is not None:
        mark_extrapolation(ax, fit, variable, (grid[0], grid[-1]))
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    ax.legend(fontsize=6)


def _against_each_input(tables, fits, *precisions):
    panels = [(precision, variable) for precision in precisions for variable in ("N", "D", "G")]
    fig, axes = new_figure(3, len(precisions), width=3.4, height=3.0)
    for ax, (precision, variable) in zip([ax for row in axes for ax in row], panels):
        rows = _recipe_rows(tables, precision)
        if rows.empty:
            ax.text(0.5, 0.5, f"{precision}: not in this run's grid", ha="center", transform=ax.transAxes)
            continue
        _input_panel(ax, rows, fits.get(fit_name(precision)), precision, variable, seed_sd(tables))
    fig.tight_layout()  # rows spaced so a panel's title clears the axis labels above it
    names = " and ".join(precisions)
    add_footer(fig, f"Points: this run's {names} QAT models − their fp32 partners; {noise_note(tables)}.")
    flag_bounds(fig, {f"this run's {precision} fit": fits.get(fit_name(precision)) for precision in precisions})
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


@figure(tables={**SEED_TABLES, "activations": "chen2025/activations"})
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
    means = {}
    for precision, marker in (("W4A4", "o"), ("W4A4_FC2_8bit", "s")):
        grouped = _recipe_rows(tables, precision).groupby("G")["delta"]
        means[precision] = (grouped.mean(), grouped.count())
        right.plot(means[precision][0].index, means[precision][0].to_numpy(), marker=marker,
                   label=precision.replace("_", " "))  # fmt: skip
    right.set(xscale="log", xlabel="G (group size)", ylabel="mean δ over N and D (nats/token)",
              title="W4A4 with the FC2 input at 8 bits")  # fmt: skip
    # A mean over k points, each a separately trained pair, scatters by σ_seed / √k.
    for line, (mean, count) in zip(right.get_lines(), means.values()):
        seed_band(right, mean.index, mean.to_numpy(), seed_sd(tables) / np.sqrt(count.to_numpy()), line.get_color())
    right.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    fig.tight_layout()
    right.legend(fontsize=6)
    seed = seed_band_note(
        seed_sd(tables), "the MAD of δ over this study's seed repeats; a mean over k points: σ_seed/√k"
    )
    add_footer(
        fig,
        "This run's models at the recipe seed; kurtosis on 8 held-out windows, median over blocks and models. "
        f"Right: {seed}.\nPaper: FC2's input kurtosis 123 (BF16) → 89 (QAT); FC2 at 8 bits cuts W4A4 error by "
        "20.5 % (G = 32) to 42.9 % (G = 256).",
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
    flag_bounds(fig, {f"this run's {fit_name(p, reduced)} fit": fits.get(fit_name(p, reduced))
                      for p in REDUCED_PRECISIONS for reduced in REDUCED_LABELS})  # fmt: skip
    return fig


@figure(tables=SEED_TABLES)
def fig8(tables, fits):
    """R = δ_W16A4 / δ_W4A16 against D/N per N and G, plain and with the FC2 input at 8 bits, beside the paper's
    R at G = 32; hollow points have a δ inside σ_seed's 95 % t-floor."""
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
    add_footer(fig, f"This run's models at the recipe seed; hollow: a δ within the 95 % t-floor of σ_seed = {sigma:.2g} "
               "(this study's repeats) of 0, where R is noise. "
               "Paper: R 1.67 → 1.20 (D/N 100 → 1000), 0.85–1.10 with FC2 8-bit.")  # fmt: skip
    return fig


def _at_point(rows, point, columns=("N", "D", "G")):
    return rows[np.logical_and.reduce([rows[column] == point[column] for column in columns])]


@figure(tables=SEED_TABLES)
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
        bands = []
        for (format, label), offset in zip(((INT, "INT4"), (FP, "FP4 E2M1")), (0.97, 1.03)):
            chosen = here[here["format"] == format].sort_values("G")
            drawn = ax.errorbar(chosen["G"] * offset, chosen["delta"], yerr=2 * chosen["delta_se"], marker="o",
                                ms=4, capsize=2, label=label)  # fmt: skip
            bands.append((chosen["G"] * offset, chosen["delta"], drawn.lines[0].get_color()))
        ax.axhline(0, color="0.6", lw=0.6)
        ax.set(xscale="log", xlabel="G (group size; per channel/token at d_model)", ylabel="δ_W4A4 (nats/token)",
               title=f"N = {compact_number(point['N'])}, D = {compact_number(point['D'])}")  # fmt: skip
        for x, y, colour in bands:
            seed_band(ax, x, y, seed_sd(tables), colour)
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
        ax.legend(fontsize=6)
    add_footer(fig, f"This run's W4A4 QAT models (absmax scaling, blocks of G) − their fp32 partners; "
               f"{noise_note(tables)}. The paper gives this as a figure only.")  # fmt: skip
    return fig


@figure(tables=SEED_TABLES, fits="chen2025/qat")
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
    int4 = _recipe_rows(tables, "W4A4").dropna(subset=["delta"])
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
    for frame, colour in ((int4, "0.6"), (fp4, "C1")):
        seed_band(ax, np.asarray(fit.predict(frame), float), frame["delta"], seed_sd(tables), colour)
    ax.xaxis.set_major_locator(MaxNLocator(3))  # δ of 1e-4 nats prints five decimals: room for three labels
    ax.legend(fontsize=6)
    add_footer(fig, f"The INT4 W4A4 law fitted on this run's INT4 points, evaluated at each FP4 point's (N, D, G); "
               f"{noise_note(tables)}.")  # fmt: skip
    flag_bounds(fig, {"this run's INT4 W4A4 fit": fit})
    return fig


@figure(tables=SEED_TABLES)
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
    seed_band(left, sweep["lr_scale"], sweep["delta"], seed_sd(tables), "C0")
    left.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    right.plot(sweep["lr_scale"], sweep["loss"], marker="o", ms=4, label="W4A4 QAT")
    right.plot(sweep["lr_scale"], sweep["base_loss"], marker="s", ms=4, label="fp32")
    right.set(xscale="log", xlabel="peak LR / the recipe's", ylabel="held-out loss (nats/token)", title="losses")
    right.legend(fontsize=6)
    fig.tight_layout()
    where = f"N = {compact_number(point['N'])}, D = {compact_number(point['D'])}, G = {point['G']:g}"
    add_footer(fig, f"This run's W4A4 QAT models and fp32 partners trained at each peak LR ({where}); "
               f"{noise_note(tables)}. The paper gives this as a figure only.")  # fmt: skip
    return fig


def _group_text(point) -> str:
    return f"per channel (G = {point['G']:g})" if point["granularity"] == CHANNEL else f"G = {point['G']:g}"


QUANTIZER_NAMES = {"absmax": "absmax", "lsq": "LSQ", "lwc": "LWC", "lac": "LAC"}


@figure(tables=SEED_TABLES)
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
        seed_band(ax, range(len(bars)), bars["delta"], seed_sd(tables), "C0")
        ax.set_xticks(range(len(bars)), [QUANTIZER_NAMES[name] for name in bars.index])
        ax.axhline(0, color="0.6", lw=0.6)
        ax.set(ylabel="δ (nats/token)" if panel is panels[0] else "",
               title=f"{panel['precision']}, N = {compact_number(panel['N'])},\n{_group_text(panel)}")  # fmt: skip
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    add_footer(fig, f"This run's QAT models − their fp32 partners, each quantizer trained from scratch; "
               f"{noise_note(tables)}. The paper gives this as a figure only.")  # fmt: skip
    return fig
