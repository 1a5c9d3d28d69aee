"""Kumar et al.'s figures of the N_eff law on this run's sweeps: loss against each tensor's training precision with
the marginal fits (Figs. 4, 14, 20), fitted against measured loss (Fig. 5), f_x(P) and IsoLoss contours (Fig. 3),
the empirical N_eff/N (Fig. 15), and Table 1's comparison of functional forms."""

import itertools
import math

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import BoundaryNorm, ListedColormap

from qscaling.figures import add_footer, compact_number, figure, new_figure, no_points, series_palette
from qscaling.figures.caveats import flag_bounds, seed_band
from qscaling.laws import kumar2024 as law
from qscaling.studies.kumar2024_training.analysis import FITS, FORM_COLUMNS, TABLE2, law_rows, sweep_rows
from qscaling.studies.kumar2024_training.figures import (
    BITS,
    STUDY_TABLES,
    fit_text,
    law_inputs,
    noise_note,
    partner_line,
    point_seed_sd,
    selected_rows,
)
from qscaling.studies.kumar2024_training.grid import STUDY
from qscaling.studies.kumar2024_training.precision import FULL, JOINT

PAPER = "kumar2024"
TENSOR_NAMES = {"w": "weights", "a": "activations", "kv": "KV cache"}


def _sweep(ax, rows, tensor, fit, colours, sd, budget=None):
    """One tensor's sweep: loss against its bits per N (at `budget` if given, else per (N, D)), coloured by
    `colours[(N, D)]`, with its seed band (`sd` per point); each partner's loss as a dotted line; this run's fit
    dashed, and dash-dot the fit with Table 2's γ_x, n_x in place of its own."""
    column = f"P_{tensor}"
    sweep = sweep_rows(rows, tensor)
    if budget is not None:
        sweep = sweep[sweep["budget"] == budget]
    points = sweep[sweep["varied"] == tensor]
    if points.empty:
        no_points(ax, f"no {TENSOR_NAMES[tensor]} sweep")
        return
    for N, D in sorted(points.groupby(["N", "D"]).groups):
        colour, group = colours[(N, D)], points[(points["N"] == N) & (points["D"] == D)].sort_values(column)
        name = f"N {compact_number(N)}" + ("" if budget is not None else f", D {compact_number(D)}")
        ax.errorbar(group[column], group["loss"], yerr=2 * group["loss_se"], fmt="o", ms=4, color=colour, label=name)
        partner = sweep[(sweep["N"] == N) & (sweep["D"] == D) & (sweep["varied"] == "")]
        if not partner.empty:
            ax.axhline(partner["loss"].iloc[0], color=colour, ls=":", lw=0.8)
        if fit is not None:
            bits = np.linspace(group[column].min(), group[column].max(), 40)
            at = law_inputs(N, D, column, bits)
            ax.plot(bits, fit.predict(at), "--", color=colour, lw=1)
            paper_sensitivity = {
                **fit.params,
                **{param: TABLE2[param] for param in (f"gamma_{tensor}", f"n_{tensor}")},
            }
            ax.plot(bits, fit.law(paper_sensitivity, at), "-.", color=colour, lw=0.7)
    for N, D in sorted(points.groupby(["N", "D"]).groups):
        group = points[(points["N"] == N) & (points["D"] == D)]
        seed_band(ax, group[column], group["loss"], sd, colours[(N, D)])
    ax.set(xlabel=f"training precision {column} (bits)")
    ax.legend(fontsize=6)


def sweep_colours(rows, tensors, by_size=False) -> dict:
    """{(N, D): colour} over every point the sweeps of `tensors` draw, so that a series keeps its colour from panel
    to panel; `by_size`: one colour per N, whatever its D."""
    points = rows[rows["varied"].isin(tensors)]
    keys = sorted(points.groupby(["N", "D"]).groups)
    sizes = sorted({N for N, _ in keys}) if by_size else keys
    palette = dict(zip(sizes, series_palette("viridis", len(sizes))))
    return {(N, D): palette[N if by_size else (N, D)] for N, D in keys}


SOURCES_NOTE = (
    "Points: this run; dotted: each size's fp32 partner; dashed: this run's {name} fit; dash-dot: the same fit "
    "with Kumar et al.'s Table 2 γ_{tensor}, n_{tensor} in place of its own."
)


@figure(tables=STUDY_TABLES, fits=f"{STUDY}/neff_w")
def fig4(tables, fits):
    """Loss against weight training precision P_w per N, one panel per budget, with the weight sweep's N_eff fit."""
    rows = law_rows(tables["evals"])
    budgets = sorted(rows.loc[rows["varied"] == "w", "budget"].unique())
    fig, axes = new_figure(max(len(budgets), 1), 1, width=3.6, height=3.3)
    fit = fits.get("neff_w")
    if not budgets:
        no_points(axes[0][0], "no weight sweep")
    colours = sweep_colours(rows, ["w"], by_size=True)
    for ax, budget in zip(axes[0], budgets):
        _sweep(ax, rows, "w", fit, colours, point_seed_sd(tables), budget)
        ax.set_title(f"D = {compact_number(budget)} tokens")
    axes[0][0].set_ylabel("held-out loss (nats/token)")
    fig.tight_layout()  # each panel's own loss ticks clear the panel to its left
    note = SOURCES_NOTE.format(name="neff_w", tensor="w")
    add_footer(fig, f"{note} Fit: {fit_text(fit, 'w')}. {noise_note(tables)}.")
    flag_bounds(fig, {"this run's neff_w fit": fit})
    return fig


@figure(tables=STUDY_TABLES, fits=STUDY)
def fig20(tables, fits):
    """Loss against activation (P_a) and KV-cache (P_kv) training precision per (N, D), each with its N_eff fit."""
    rows = law_rows(tables["evals"])
    fig, axes = new_figure(2, 1, width=3.8, height=3.3)
    notes = []
    colours = sweep_colours(rows, ["a", "kv"])
    for ax, tensor in zip(axes[0], ("a", "kv")):
        fit = fits.get(f"neff_{tensor}")
        _sweep(ax, rows, tensor, fit, colours, point_seed_sd(tables))
        ax.set_title(f"{TENSOR_NAMES[tensor]} only")
        notes.append(f"{tensor}: {fit_text(fit, tensor)}")
    axes[0][0].set_ylabel("held-out loss (nats/token)")
    fig.tight_layout()
    note = SOURCES_NOTE.format(name="neff_a / neff_kv", tensor="x")
    add_footer(fig, f"{note} Fits: {'; '.join(notes)}. {noise_note(tables)}.")
    flag_bounds(fig, {f"this run's neff_{tensor} fit": fits.get(f"neff_{tensor}") for tensor in ("a", "kv")})
    return fig


def _predicted_against_measured(ax, rows, predicted, title):
    for varied, colour in zip(("", "w", "a", "kv", JOINT), ("C7", "C0", "C1", "C2", "C3")):
        chosen = (rows["varied"] == varied).to_numpy() & np.isfinite(predicted)
        if chosen.any():
            ax.scatter(rows["loss"][chosen], predicted[chosen], s=14, color=colour, label=varied or FULL)
    values = np.concatenate([rows["loss"].to_numpy(float), predicted[np.isfinite(predicted)]])
    ends = np.array([values.min(), values.max()])
    ends = ends + np.array([-1, 1]) * 0.05 * (ends[1] - ends[0] or 1.0)
    ax.plot(ends, ends, ":", color="k", lw=1, label="y = x")
    ax.set(xlim=ends, ylim=ends, xlabel="measured loss (nats/token)", ylabel="fitted loss", title=title)
    ax.legend(fontsize=6, title="quantized")


@figure(tables=STUDY_TABLES, fits=STUDY)
def fig5(tables, fits):
    """Fitted against measured loss: each sweep's points under its own marginal fit, and every point under the
    joint fit."""
    rows = law_rows(tables["evals"])
    fig, axes = new_figure(2, 1, width=3.6, height=3.4)
    marginal = np.full(len(rows), np.nan)
    for tensor in ("w", "a", "kv"):
        fit = fits.get(f"neff_{tensor}")
        # Partners are drawn once, under the weight fit; every marginal fit also saw them.
        chosen = (rows["varied"] == tensor).to_numpy() | ((rows["varied"] == "").to_numpy() & (tensor == "w"))
        if fit is not None and chosen.any():
            marginal[chosen] = fit.predict(rows[chosen])
    joint = fits.get("neff_joint")
    panels = ((axes[0][0], marginal, "marginal fits (γ_x of one tensor each)"),
              (axes[0][1], joint.predict(rows) if joint is not None else None, "joint fit (all γ_x, n_x at once)"))  # fmt: skip
    for ax, predicted, title in panels:
        if predicted is None or not np.isfinite(predicted).any():
            no_points(ax, "no fit")
            continue
        _predicted_against_measured(ax, rows, predicted, title)
    r2 = ", ".join(f"{name} R² {fit.r2:.3f}" for name in FITS if (fit := fits.get(name)) is not None)
    add_footer(
        fig,
        f"This run's points at the recipe seed, each N_eff fit's own R²: {r2 or 'no fits'} (mostly the size and "
        "data terms' share: compare the precision costs with Figs. 4 and 20).",
    )
    flag_bounds(
        fig, {f"this run's {name} fit": fits.get(name) for name in ("neff_w", "neff_a", "neff_kv", "neff_joint")}
    )
    return fig


def _flags(fit, tensor: str) -> str:
    """ " (n_kv at bound)": which of a tensor's γ_x, n_x its fit did not determine (held at Table 2's value or on a
    bound), "" where it determined both."""
    flagged = [
        f"{symbol}_{tensor} {'held at paper' if fit.held_fixed(name) else 'at bound'}"
        for symbol, name in (("γ", f"gamma_{tensor}"), ("n", f"n_{tensor}"))
        if fit.held_fixed(name) or fit.at_bound(name)
    ]
    return f" ({', '.join(flagged)})" if flagged else ""


def _isoloss(fig, ax, rows, fit) -> str:
    """Fig. 3 right: the loss the weight sweep's fit predicts over (N, P_w) at the sweep's largest budget as filled
    contours, and that budget's measured points on the same colour scale: a point coloured like the band it sits
    in is where the fit puts it. Returns the footer's note."""
    points = rows[rows["varied"] == "w"]
    if points.empty or fit is None:
        no_points(ax, "no weight sweep" if points.empty else "no neff_w fit")
        return ""
    points = points[points["budget"] == points["budget"].max()]
    D = float(points["D"].iloc[0])
    grid_N, grid_P = np.meshgrid(
        np.geomspace(points["N"].min() / 2, points["N"].max() * 2, 60),
        # Half a bit below the lowest point, so that its marker is not cut by the axes' edge.
        np.linspace(min(BITS[0], points["P_w"].min()) - 0.5, max(BITS[-1], points["P_w"].max()), 60),
    )
    at = law_inputs(grid_N.ravel(), D, "P_w", grid_P.ravel())
    predicted = fit.predict(at).reshape(grid_N.shape)
    measured = points["loss"].to_numpy(float)
    # Where f_w nears 0 the predicted loss runs away: the grid's top 5 % shares the top colour, so that the scale
    # stays on the measured range.
    top = max(measured.max(), np.quantile(predicted, 0.95))
    levels = np.linspace(min(predicted.min(), measured.min()), top, 13)
    colours = ListedColormap(series_palette("viridis", 256))
    norm = BoundaryNorm(levels, colours.N, extend="max")
    filled = ax.contourf(grid_N, grid_P, predicted, levels=levels, cmap=colours, norm=norm, extend="max")
    ax.scatter(points["N"], points["P_w"], c=measured, cmap=colours, norm=norm, s=36, edgecolors="k", label="measured")
    fig.colorbar(filled, ax=ax, label="loss (nats/token)", ticks=levels[::2], format="%.3g")
    ax.set(xscale="log", xlabel="N (non-embedding parameters)", ylabel="weight training precision P_w (bits)")
    ax.set_title(f"IsoLoss at D = {compact_number(D)} tokens")
    return (
        f"Right: filled, the loss this run's neff_w fit predicts at D = {compact_number(D)} tokens (the weight "
        "sweep's largest budget) with activations and KV cache in fp32; points, the measured losses there, coloured "
        "on the same scale."
    )


@figure(tables=STUDY_TABLES, fits=STUDY)
def fig3(tables, fits):
    """Left: N_eff/N = f_x(P) per tensor, this run's marginal fits beside Table 2's. Right: IsoLoss contours over
    (N, P_w) from the weight sweep's fit at its largest budget, with the measured points on the same colour scale."""
    fig, axes = new_figure(2, 1, width=4.2, height=3.4)
    left, right = axes[0]
    notes = []
    for colour, (tensor, name) in zip(sns.color_palette(), TENSOR_NAMES.items()):
        fit = fits.get(f"neff_{tensor}")
        paper = law.precision_fraction(TABLE2, BITS, tensor)
        left.plot(BITS, paper, "-", color=colour, label=f"{name}: Table 2")
        if fit is not None:
            ours = law.precision_fraction(fit.params, BITS, tensor)
            left.plot(BITS, ours, "--", color=colour, label=f"{name}: neff_{tensor}{_flags(fit, tensor)}")
        notes.append(f"{tensor}: {fit_text(fit, tensor)}")
    left.set(xlabel="training precision P_x (bits)", ylabel="N_eff / N = f_x(P_x)", ylim=(0, 1.02))
    left.set_title("effective parameters per tensor")
    left.legend(fontsize=6, loc="lower right")
    isoloss = _isoloss(fig, right, selected_rows(tables, law_rows), fits.get("neff_w"))
    add_footer(
        fig,
        "Left: f_x(P) = 1 − e^(−P/γ_x + n_x) with Kumar et al.'s Table 2 constants (solid) and with this run's "
        f"marginal fits, each on its own sweep (dashed). Fits: {'; '.join(notes)}. {isoloss}",
    )
    flag_bounds(fig, {f"this run's neff_{tensor} fit": fits.get(f"neff_{tensor}") for tensor in TENSOR_NAMES})
    return fig


EMPIRICAL_TOP = 2.0  # the highest N_eff/N fig15 shows: above it a point says more about its noise than about f_x


def empirical_fraction(fit, rows: pd.DataFrame) -> np.ndarray:
    """N_eff/N that each row's measured loss implies (Kumar App. M): its excess over its fp32 partner's measured
    loss (`base_loss`) read through the fit's A and α, N_eff/N = (1/N)·[(L − L_fp32)/A + N^−α]^(−1/α); NaN where
    the bracket is ≤ 0 (a point that beat its partner by more than the whole size term)."""
    p = fit.params
    N = rows["N"].to_numpy(float)
    bracket = (rows["loss"].to_numpy(float) - rows["base_loss"].to_numpy(float)) / p["A"] + N ** -p["alpha"]
    n_eff = np.full(len(rows), np.nan)
    positive = bracket > 0
    n_eff[positive] = bracket[positive] ** (-1 / p["alpha"])
    return n_eff / N


def _empirical_panel(ax, points, fit, tensor: str, colours: dict) -> str:
    """One sweep's empirical N_eff/N per (N, D) — colour per N, marker per D — beside f_x(P) of its fit and of
    Table 2 (`colours`: one per N, shared by the panels). Returns how many points the view leaves out, for the
    footer."""
    column = f"P_{tensor}"
    fraction = empirical_fraction(fit, points)
    finite = fraction[np.isfinite(fraction)]
    top = min(max(1.1, 1.05 * finite.max()) if finite.size else 1.1, EMPIRICAL_TOP)
    budgets = np.sort(points["D"].unique())
    markers = dict(zip(budgets, itertools.cycle("os^Dv")))
    for (N, D), group in points.groupby(["N", "D"]):
        chosen = ((points["N"] == N) & (points["D"] == D)).to_numpy()
        ax.plot(group[column], fraction[chosen], markers[D], color=colours[N], ms=4, ls="none",
                label=f"N {compact_number(N)}, D {compact_number(D)}")  # fmt: skip
    bits = np.linspace(min(BITS[0], points[column].min()), max(8.0, points[column].max()), 100)
    ax.plot(bits, law.precision_fraction(fit.params, bits, tensor), "--", color="k", lw=1,
            label=f"f_{tensor}: neff_{tensor}{_flags(fit, tensor)}")  # fmt: skip
    ax.plot(bits, law.precision_fraction(TABLE2, bits, tensor), "-", color="0.5", lw=1, label=f"f_{tensor}: Table 2")
    ax.set(xlabel=f"training precision {column} (bits)", ylabel="N_eff / N", ylim=(0, top))
    ax.legend(fontsize=6)
    hidden = int((~np.isfinite(fraction) | (fraction > top)).sum())
    return f"{tensor}: {hidden} of {len(fraction)}" if hidden else ""


@figure(tables=STUDY_TABLES, fits=STUDY)
def fig15(tables, fits):
    """Empirical N_eff/N of each quantized point of each marginal sweep (Kumar App. M) against its bits, beside
    f_x(P) of the sweep's fit and of Table 2."""
    rows = selected_rows(tables, law_rows)
    fig, axes = new_figure(3, 1, width=3.7, height=3.3)
    notes, hidden = [], []
    sizes = np.sort(rows.loc[rows["varied"].isin(TENSOR_NAMES), "N"].unique())
    colours = dict(zip(sizes, series_palette("viridis", len(sizes))))
    for ax, (tensor, name) in zip(axes[0], TENSOR_NAMES.items()):
        fit = fits.get(f"neff_{tensor}")
        points = rows[rows["varied"] == tensor]
        ax.set_title(f"{name} only")
        notes.append(f"{tensor}: {fit_text(fit, tensor)}")
        if points.empty or fit is None:
            no_points(ax, f"no {name} sweep" if points.empty else f"no neff_{tensor} fit")
            continue
        hidden.append(_empirical_panel(ax, points, fit, tensor, colours))
    left_out = "; ".join(note for note in hidden if note)
    add_footer(
        fig,
        "Points: N_eff/N = [(L − L_fp32)/A + N^−α]^(−1/α) / N from each quantized point's measured loss L, its fp32 "
        "partner's L_fp32 and the A, α of its sweep's own fit (Kumar et al. App. M); separately trained runs differ "
        "by σ_seed, which moves a point by about σ_seed·N^α/(α·A) of its value. Dashed: that fit's f_x(P); grey: "
        f"Table 2's. Fits: {'; '.join(notes)}."
        + (f" Not drawn (bracket ≤ 0, or N_eff/N above {EMPIRICAL_TOP:g}): {left_out}." if left_out else ""),
    )
    flag_bounds(fig, {f"this run's neff_{tensor} fit": fits.get(f"neff_{tensor}") for tensor in TENSOR_NAMES})
    return fig


@figure(tables=STUDY_TABLES, fits=STUDY)
def fig14(tables, fits):
    """L(P) sweeps side by side (Kumar Fig. 14): per (N, D) where two or more tensors were swept, the loss against
    each tensor's training precision with the others in fp32, and each marginal fit's curve."""
    rows = selected_rows(tables, law_rows)
    swept = rows[rows["varied"].isin(TENSOR_NAMES)]
    cells = sorted(key for key, group in swept.groupby(["N", "D"]) if group["varied"].nunique() >= 2)
    fig, axes = new_figure(max(len(cells), 1), 1, width=3.8, height=3.4, sharey=False)
    if not cells:
        no_points(axes[0][0], "no (N, D) with two tensors swept")
    for ax, (N, D) in zip(axes[0], cells):
        for colour, (tensor, name) in zip(sns.color_palette(), TENSOR_NAMES.items()):
            column, fit = f"P_{tensor}", fits.get(f"neff_{tensor}")
            points = swept[(swept["N"] == N) & (swept["D"] == D) & (swept["varied"] == tensor)].sort_values(column)
            if points.empty:
                continue
            ax.errorbar(points[column], points["loss"], yerr=2 * points["loss_se"], fmt="o", ms=4, color=colour,
                        label=name)  # fmt: skip
            if fit is not None:
                bits = np.linspace(points[column].min(), points[column].max(), 40)
                at = law_inputs(N, D, column, bits)
                ax.plot(bits, fit.predict(at), "--", color=colour, lw=1)
            seed_band(ax, points[column], points["loss"], point_seed_sd(tables), colour)
        partner_line(ax, rows, N, D)
        ax.set(xlabel="training precision of the swept tensor (bits)", ylabel="held-out loss (nats/token)")
        ax.set_title(f"N {compact_number(N)}, D {compact_number(rows.loc[rows['D'] == D, 'budget'].iloc[0])} tokens")
        ax.legend(fontsize=6)
    notes = "; ".join(f"{tensor}: {fit_text(fits.get(f'neff_{tensor}'), tensor)}" for tensor in TENSOR_NAMES)
    add_footer(
        fig,
        "Each tensor's sweep with the other two in fp32, at the recipe seed; dotted: the fp32 partner; dashed: "
        f"that tensor's marginal N_eff fit. Fits: {notes}. The paper's message: activations and the KV cache cost "
        f"more loss than weights at the same low precision. {noise_note(tables)}.",
    )
    flag_bounds(fig, {f"this run's neff_{tensor} fit": fits.get(f"neff_{tensor}") for tensor in TENSOR_NAMES})
    return fig


FORM_NAMES = {"neff": "N_eff (Eq. 3)", "additive": "additive", "effective_data": "D_eff", "tied": "tied N_eff + D_eff",
              "untied": "untied N_eff + D_eff", "multiplicative": "multiplicative"}  # fmt: skip


def table1_frame(tables, fits):
    """Table 1: each functional form's held-out R² on this run's weight sweep beside the paper's."""
    forms = tables.get("forms")
    if forms is None:
        return pd.DataFrame(columns=FORM_COLUMNS)
    return forms.assign(form=forms["form"].map(FORM_NAMES))


def _score(value) -> str:
    return "—" if not math.isfinite(value) else f"{value:.3f}"


@figure(tables={"forms": f"{STUDY}/forms"}, frame=True)
def table1(tables, fits):
    """Table 1 rendered: held-out R² of the loss and of the precision effect δ per form, the paper's beside ours."""
    frame = table1_frame(tables, fits)
    fig, axes = new_figure(width=7.2, height=0.3 * len(frame) + 1.4)
    ax = axes[0][0]
    ax.axis("off")
    header = ["form", "paper\nheld-out R²", "held-out R²\n(loss)", "held-out R²\n(δ)", "R²\n(in sample)", "on a bound"]
    cells = [
        [
            row["form"],
            f"{row['paper_heldout_r2']:.2f}",
            _score(row["heldout_r2"]),
            _score(row["heldout_r2_delta"]),
            _score(row["r2"]),
            row["at_bound"] or row["error"] or "—",
        ]
        for _, row in frame.iterrows()
    ]
    if not cells:
        no_points(ax, "no form comparison")
    else:
        widths = [0.24, 0.15, 0.15, 0.14, 0.14, 0.18]  # the forms' names are the longest cells
        table = ax.table(cellText=cells, colLabels=header, colWidths=widths, loc="center", cellLoc="center")
        table.auto_set_font_size(False)
        table.set_fontsize(7)
        table.scale(1, 1.5)
        for column in range(len(header)):
            table[0, column].set_height(2 * table[0, column].get_height())
    folds = f"{int(frame['folds'].iloc[0])} (N, D) cells, {int(frame['points'].iloc[0])} points" if cells else ""
    add_footer(
        fig,
        "Each form of weight training precision (Kumar et al. Table 1) fitted on the weight sweep and its fp32 "
        f"partners; held out: each (N, D) cell in turn predicted by the form refitted on the others ({folds}). "
        "δ: loss less the partner's, the precision effect alone. The paper's R² are on its 30M–220M runs.",
    )
    return fig
