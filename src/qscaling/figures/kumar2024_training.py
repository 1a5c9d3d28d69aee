"""Kumar et al. 2024 figures of the training-precision study (targets `kumar2024_<name>`): they read the
kumar2024_training table (`tables["evals"]`: one row per checkpoint and precision) and its N_eff fits. The paper's
A, B, E belong to 30M–220M models on Dolma, so its constants enter only as γ_x, n_x beside this run's size and data
terms, labelled as such."""

import itertools
import math
import re

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.lines import Line2D

from qscaling.figures import add_footer, compact_number, figure, interval_text, new_figure, no_points, series_palette
from qscaling.laws import LAWS
from qscaling.laws import kumar2024 as law
from qscaling.studies import kumar2024_training as study

PAPER = "kumar2024"
STUDY_TABLES = {"evals": study.STUDY}
PTQ_TABLES = {"ptq": f"{study.STUDY}/ptq"}
TENSOR_NAMES = {"w": "weights", "a": "activations", "kv": "KV cache"}
NOISE_NOTE = "error bars: ± 2 s.e. over held-out windows (separately trained runs differ by σ_seed more: see claims)"


def _fit_text(fit, tensor: str) -> str:
    if fit is None:
        return "no fit"
    gamma, offset = f"gamma_{tensor}", f"n_{tensor}"
    return (
        f"γ_{tensor} {fit.params[gamma]:.3g} {interval_text(fit, gamma)}, n_{tensor} {fit.params[offset]:.3g} "
        f"{interval_text(fit, offset)}; R² {fit.r2:.3f}"
    )


def _law_inputs(N, D, column: str, bits) -> dict:
    """The N_eff law's inputs along a sweep of one tensor's precision (`column`: P_w, P_a or P_kv) through `bits`,
    the other tensors in fp32 (FULL_BITS); N and D a number or an array as long as `bits`."""
    bits = np.asarray(bits, dtype=float)
    at = {"N": np.broadcast_to(np.asarray(N, dtype=float), bits.shape), "D": np.full_like(bits, D)}
    return at | {f"P_{tensor}": np.full_like(bits, study.FULL_BITS) for tensor in study.TENSOR_SPECS} | {column: bits}


def _sweep(ax, rows, tensor, fit, budget=None):
    """One tensor's sweep: loss against its bits per N (at `budget` if given, else per (N, D)); each partner's loss
    as a dotted line; this run's fit dashed, and dash-dot the fit with Table 2's γ_x, n_x in place of its own."""
    column = f"P_{tensor}"
    sweep = study.sweep_rows(rows, tensor)
    if budget is not None:
        sweep = sweep[sweep["budget"] == budget]
    points = sweep[sweep["varied"] == tensor]
    if points.empty:
        no_points(ax, f"no {TENSOR_NAMES[tensor]} sweep")
        return
    keys = sorted(points.groupby(["N", "D"]).groups)
    for colour, (N, D) in zip(series_palette("viridis", len(keys)), keys):
        group = points[(points["N"] == N) & (points["D"] == D)].sort_values(column)
        name = f"N {compact_number(N)}" + ("" if budget is not None else f", D {compact_number(D)}")
        ax.errorbar(group[column], group["loss"], yerr=2 * group["loss_se"], fmt="o", ms=4, color=colour, label=name)
        partner = sweep[(sweep["N"] == N) & (sweep["D"] == D) & (sweep["varied"] == "")]
        if not partner.empty:
            ax.axhline(partner["loss"].iloc[0], color=colour, ls=":", lw=0.8)
        if fit is not None:
            bits = np.linspace(group[column].min(), group[column].max(), 40)
            at = _law_inputs(N, D, column, bits)
            ax.plot(bits, fit.predict(at), "--", color=colour, lw=1)
            paper_sensitivity = {
                **fit.params,
                **{param: study.PAPER[param] for param in (f"gamma_{tensor}", f"n_{tensor}")},
            }
            ax.plot(bits, fit.law(paper_sensitivity, at), "-.", color=colour, lw=0.7)
    ax.set(xlabel=f"training precision {column} (bits)", ylabel="held-out loss (nats/token)")
    ax.legend(fontsize=6)


SOURCES_NOTE = (
    "Points: this run; dotted: each size's fp32 partner; dashed: this run's {name} fit; dash-dot: the same fit "
    "with Kumar et al.'s Table 2 γ_{tensor}, n_{tensor} in place of its own."
)


@figure(tables=STUDY_TABLES, fits=f"{study.STUDY}/neff_w")
def fig4(tables, fits):
    """Loss against weight training precision P_w per N, one panel per budget, with the weight sweep's N_eff fit."""
    rows = study.law_rows(tables["evals"])
    budgets = sorted(rows.loc[rows["varied"] == "w", "budget"].unique())
    fig, axes = new_figure(max(len(budgets), 1), 1, width=3.6, height=3.3)
    fit = fits.get("neff_w")
    if not budgets:
        no_points(axes[0][0], "no weight sweep")
    for ax, budget in zip(axes[0], budgets):
        _sweep(ax, rows, "w", fit, budget)
        ax.set_title(f"D = {compact_number(budget)} tokens")
    add_footer(fig, f"{SOURCES_NOTE.format(name='neff_w', tensor='w')} Fit: {_fit_text(fit, 'w')}. {NOISE_NOTE}")
    return fig


@figure(tables=STUDY_TABLES, fits=study.STUDY)
def fig20(tables, fits):
    """Loss against activation (P_a) and KV-cache (P_kv) training precision per (N, D), each with its N_eff fit."""
    rows = study.law_rows(tables["evals"])
    fig, axes = new_figure(2, 1, width=3.8, height=3.3)
    notes = []
    for ax, tensor in zip(axes[0], ("a", "kv")):
        fit = fits.get(f"neff_{tensor}")
        _sweep(ax, rows, tensor, fit)
        ax.set_title(f"{TENSOR_NAMES[tensor]} only")
        notes.append(f"{tensor}: {_fit_text(fit, tensor)}")
    note = SOURCES_NOTE.format(name="neff_a / neff_kv", tensor="x")
    add_footer(fig, f"{note} Fits: {'; '.join(notes)}. {NOISE_NOTE}")
    return fig


def _predicted_against_measured(ax, rows, predicted, title):
    for varied, colour in zip(("", "w", "a", "kv", study.JOINT), ("C7", "C0", "C1", "C2", "C3")):
        chosen = (rows["varied"] == varied).to_numpy() & np.isfinite(predicted)
        if chosen.any():
            ax.scatter(rows["loss"][chosen], predicted[chosen], s=14, color=colour, label=varied or study.FULL)
    values = np.concatenate([rows["loss"].to_numpy(float), predicted[np.isfinite(predicted)]])
    ends = np.array([values.min(), values.max()])
    ends = ends + np.array([-1, 1]) * 0.05 * (ends[1] - ends[0] or 1.0)
    ax.plot(ends, ends, ":", color="k", lw=1, label="y = x")
    ax.set(xlim=ends, ylim=ends, xlabel="measured loss (nats/token)", ylabel="fitted loss", title=title)
    ax.legend(fontsize=6, title="quantized")


@figure(tables=STUDY_TABLES, fits=study.STUDY)
def fig5(tables, fits):
    """Fitted against measured loss: each sweep's points under its own marginal fit, and every point under the
    joint fit."""
    rows = study.law_rows(tables["evals"])
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
    r2 = ", ".join(f"{name} R² {fit.r2:.3f}" for name in study.FITS if (fit := fits.get(name)) is not None)
    add_footer(
        fig,
        f"This run's points at the recipe seed, each N_eff fit's own R²: {r2 or 'no fits'} (mostly the size and "
        "data terms' share: compare the precision costs with Figs. 4 and 20).",
    )
    return fig


def _ptq_cell(ptq):
    """The (N, D) Fig. 7 shows: the largest size at its largest budget among the recipe seed's weight-only points."""
    points = ptq[(ptq["precision"] != study.FULL) & (ptq["seed"] == study.recipe_seed(ptq))]
    N = points["N"].max()
    return N, points.loc[points["N"] == N, "D"].max()


def _degradation(law, params, rows):
    """δ_PTQ a unified law predicts at each row: its loss at P_post less its loss as trained."""
    return law(params, rows) - law(params, rows.assign(P_post=np.inf))


def _heatmap(ax, rows, values, title, vmax, *, first: bool, last: bool, bottom: bool):
    """One panel of δ_PTQ over (P_train, P_post), the row's shared colour scale: its bar right of the last panel,
    the training precisions left of the first, the axis name under the bottom row."""
    grid = rows.assign(value=values).pivot_table(index="P_train", columns="P_post", values="value")
    grid = grid.sort_index(ascending=False)
    grid.index = [study.FULL if bits == study.FULL_BITS else f"W{bits:g}" for bits in grid.index]
    grid.columns = [f"{bits:g}" for bits in grid.columns]
    sns.heatmap(grid, ax=ax, cmap="vlag", center=0, vmin=-vmax, vmax=vmax, annot=True, fmt=".2g",
                annot_kws={"fontsize": 6}, cbar=last, yticklabels=first,
                cbar_kws={"label": "δ_PTQ (nats/token)"} if last else None)  # fmt: skip
    ax.grid(False)
    ax.set(title=title, xlabel="post-training precision P_post (bits)" if bottom else "")
    ax.set_ylabel("training precision" if first else "")


@figure(tables=STUDY_TABLES | PTQ_TABLES, fits=study.STUDY)
def fig7(tables, fits):
    """δ_PTQ over (P_train, P_post) at one (N, D), per PTQ method: measured, this run's unified fit, and the
    unified law with Table 2's constants (C_x = 1 assumed)."""
    ptq = tables["ptq"]
    methods = sorted(set(ptq["method"]) - {study.AS_TRAINED})
    fig, axes = new_figure(3, max(len(methods), 1), width=3.2, height=3.0, gridspec_kw={"width_ratios": [1, 1, 1.25]})
    if not methods:
        no_points(axes[0][0], "no post-quantized checkpoint")
        return fig
    N, D = _ptq_cell(ptq)
    notes = []
    for position, (row_axes, method) in enumerate(zip(axes, methods)):
        rows = study.unified_rows(ptq, method)
        rows = rows[(rows["method"] == method) & (rows["N"] == N) & (rows["D"] == D)].reset_index(drop=True)
        fit = fits.get(f"unified_{method}")
        law = LAWS[study.UNIFIED_LAW]
        predicted = _degradation(fit.law, fit.params, rows) if fit is not None else np.full(len(rows), np.nan)
        panels = {
            f"{method.upper()}: measured": rows["delta"].to_numpy(float),
            f"{method.upper()}: this run's unified fit": np.asarray(predicted, float),
            f"{method.upper()}: Table 2 law (C_x = 1)": np.asarray(_degradation(law, study.UNIFIED_PAPER, rows), float),
        }
        finite = np.concatenate([values[np.isfinite(values)] for values in panels.values()])
        vmax = float(np.abs(finite).max()) if finite.size else 1.0
        for column, (ax, (title, values)) in enumerate(zip(row_axes, panels.items())):
            if not np.isfinite(values).any():
                no_points(ax, "no unified fit")
                continue
            edges = {"first": column == 0, "last": column == len(panels) - 1, "bottom": position == len(methods) - 1}
            _heatmap(ax, rows, values, title, vmax, **edges)
        notes.append(f"{method}: {_unified_text(fit)}")
    add_footer(
        fig,
        f"N {compact_number(N)}, D {compact_number(D)} tokens, recipe seed. δ_PTQ: the loss after post-quantizing "
        "the weights (INT, per output channel) less the same checkpoint's as trained, on the same windows; rows: "
        f"the weights' training precision (fp32: the partner). Fits: {'; '.join(notes)}. Table 2's law uses the "
        "paper's own constants at this N, D (its C_x unreported, 1 assumed). Separately trained rows differ by "
        "σ_seed too: see claims.",
    )
    return fig


def _unified_text(fit) -> str:
    if fit is None:
        return "no fit"
    return (
        f"γ_post {fit.params['gamma_post']:.3g} {interval_text(fit, 'gamma_post')}, "
        f"C_w {fit.params['C_w']:.3g} {interval_text(fit, 'C_w')}; R² {fit.r2:.3f}"
    )


BITS = np.linspace(2, 12, 200)  # Fig. 3's range of training precisions (the paper's runs span 3–12 bits)
LAW_COLUMNS = ["varied", "N", "D", "budget", "loss", "P_w", "P_a", "P_kv"]


def _law_rows(tables):
    """The study's law rows (`study.law_rows`), none where its table is missing or empty."""
    table = tables.get("evals")
    if table is None or table.empty:
        return pd.DataFrame(columns=LAW_COLUMNS)
    return study.law_rows(table)


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
    at = _law_inputs(grid_N.ravel(), D, "P_w", grid_P.ravel())
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


@figure(tables=STUDY_TABLES, fits=study.STUDY)
def fig3(tables, fits):
    """Left: N_eff/N = f_x(P) per tensor, this run's marginal fits beside Table 2's. Right: IsoLoss contours over
    (N, P_w) from the weight sweep's fit at its largest budget, with the measured points on the same colour scale."""
    fig, axes = new_figure(2, 1, width=4.2, height=3.4)
    left, right = axes[0]
    notes = []
    for colour, (tensor, name) in zip(sns.color_palette(), TENSOR_NAMES.items()):
        fit = fits.get(f"neff_{tensor}")
        paper = law.precision_fraction(study.PAPER, BITS, tensor)
        left.plot(BITS, paper, "-", color=colour, label=f"{name}: Table 2")
        if fit is not None:
            ours = law.precision_fraction(fit.params, BITS, tensor)
            left.plot(BITS, ours, "--", color=colour, label=f"{name}: neff_{tensor}{_flags(fit, tensor)}")
        notes.append(f"{tensor}: {_fit_text(fit, tensor)}")
    left.set(xlabel="training precision P_x (bits)", ylabel="N_eff / N = f_x(P_x)", ylim=(0, 1.02))
    left.set_title("effective parameters per tensor")
    left.legend(fontsize=6, loc="lower right")
    isoloss = _isoloss(fig, right, _law_rows(tables), fits.get("neff_w"))
    add_footer(
        fig,
        "Left: f_x(P) = 1 − e^(−P/γ_x + n_x) with Kumar et al.'s Table 2 constants (solid) and with this run's "
        f"marginal fits, each on its own sweep (dashed). Fits: {'; '.join(notes)}. {isoloss}",
    )
    return fig


def _fixed_size_optimum(params, N: float, tokens) -> np.ndarray:
    """P*(D) at fixed N (`law.fixed_size_optimal_precision`) at each D, NaN where it has none below MOST_BITS."""
    return np.array([law.optimum_or_nan(law.fixed_size_optimal_precision, params, N, D) for D in tokens])


def _optimum_note(joint, run_star: float, solved: bool) -> str:
    if joint is None:
        return "No neff_joint fit: Table 2's constants only."
    note = f"This run's P* (N, D, P all chosen): {run_star:.3g} bits." if math.isfinite(run_star) else (
        f"This run's joint fit has no P* below {study.MOST_BITS:g} bits (N, D, P all chosen)."
    )  # fmt: skip
    if not solved:
        note += f" Its fixed-N balance has no root below {study.MOST_BITS:g} bits at any (N, D) drawn: no dashed line."
    if joint.ill_conditioned:
        note += (
            f" The joint fit is ill-conditioned (Jacobian condition number {joint.jacobian_condition:.2g}): its γ_x, "
            "n_x, and with them P*, are not identified."
        )
    return note


@figure(tables=STUDY_TABLES, fits=f"{study.STUDY}/neff_joint")
def fig6(tables, fits):
    """Compute-optimal training precision P*(D) at fixed N for each of this run's sizes (Kumar Fig. 6 centre/right):
    this run's joint fit beside Table 2's constants, with each one's P* when N, D and P are all chosen."""
    rows = _law_rows(tables)
    fig, axes = new_figure(width=5.0, height=3.6)
    ax = axes[0][0]
    joint = fits.get("neff_joint")
    if rows.empty:
        no_points(ax, "no trained point")
        return fig
    budgets = np.sort(rows["D"].unique())
    tokens = np.geomspace(budgets[0] / 10, budgets[-1] * 10, 60)
    ax.axvspan(budgets[0], budgets[-1], color="0.93", label="this run's budgets")
    sizes = np.sort(rows["N"].unique())
    solved = False
    for colour, N in zip(series_palette("viridis", len(sizes)), sizes):
        ax.plot(tokens, _fixed_size_optimum(study.PAPER, N, tokens), "-", color=colour, label=f"N {compact_number(N)}")
        if joint is not None:
            ours = _fixed_size_optimum(joint.params, N, tokens)
            ax.plot(tokens, ours, "--", color=colour)
            solved |= bool(np.isfinite(ours).any())
    paper_star = study.optimal_precision(study.PAPER)
    ax.axhline(paper_star, color="k", lw=0.8, label=f"P* Table 2 ({paper_star:.2f})")
    run_star = study.optimal_precision(joint.params) if joint is not None else math.nan
    if math.isfinite(run_star):
        ax.axhline(run_star, color="k", ls="--", lw=0.8, label=f"P* this run ({run_star:.2f})")
    ax.set(xscale="log", xlabel="D (training tokens)", ylabel="compute-optimal P_w = P_a = P_kv (bits)")
    ax.set_title("compute-optimal training precision at fixed N")
    ax.legend(fontsize=6)
    add_footer(
        fig,
        "P*(D): the precision that minimises the loss at fixed N and compute C ∝ N·D·P, the same for every tensor "
        "(Sec. 4.3.2). Solid: Kumar et al.'s Table 2 constants (A, B, α of 30M–220M models: at these N an "
        "extrapolation); dashed: this run's neff_joint fit; gaps: no root below "
        f"{study.MOST_BITS:g} bits. Horizontal: P* with N, D and P all chosen (Sec. 4.3.1). "
        + _optimum_note(joint, run_star, solved),
    )
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


def _empirical_panel(ax, points, fit, tensor: str) -> str:
    """One sweep's empirical N_eff/N per (N, D) — colour per N, marker per D — beside f_x(P) of its fit and of
    Table 2. Returns how many points the view leaves out, for the footer."""
    column = f"P_{tensor}"
    fraction = empirical_fraction(fit, points)
    finite = fraction[np.isfinite(fraction)]
    top = min(max(1.1, 1.05 * finite.max()) if finite.size else 1.1, EMPIRICAL_TOP)
    sizes, budgets = np.sort(points["N"].unique()), np.sort(points["D"].unique())
    colours = dict(zip(sizes, series_palette("viridis", len(sizes))))
    markers = dict(zip(budgets, itertools.cycle("os^Dv")))
    for (N, D), group in points.groupby(["N", "D"]):
        chosen = ((points["N"] == N) & (points["D"] == D)).to_numpy()
        ax.plot(group[column], fraction[chosen], markers[D], color=colours[N], ms=4, ls="none",
                label=f"N {compact_number(N)}, D {compact_number(D)}")  # fmt: skip
    bits = np.linspace(min(BITS[0], points[column].min()), max(8.0, points[column].max()), 100)
    ax.plot(bits, law.precision_fraction(fit.params, bits, tensor), "--", color="k", lw=1,
            label=f"f_{tensor}: neff_{tensor}{_flags(fit, tensor)}")  # fmt: skip
    ax.plot(
        bits, law.precision_fraction(study.PAPER, bits, tensor), "-", color="0.5", lw=1, label=f"f_{tensor}: Table 2"
    )
    ax.set(xlabel=f"training precision {column} (bits)", ylabel="N_eff / N", ylim=(0, top))
    ax.legend(fontsize=6)
    hidden = int((~np.isfinite(fraction) | (fraction > top)).sum())
    return f"{tensor}: {hidden} of {len(fraction)}" if hidden else ""


@figure(tables=STUDY_TABLES, fits=study.STUDY)
def fig15(tables, fits):
    """Empirical N_eff/N of each quantized point of each marginal sweep (Kumar App. M) against its bits, beside
    f_x(P) of the sweep's fit and of Table 2."""
    rows = _law_rows(tables)
    fig, axes = new_figure(3, 1, width=3.7, height=3.3)
    notes, hidden = [], []
    for ax, (tensor, name) in zip(axes[0], TENSOR_NAMES.items()):
        fit = fits.get(f"neff_{tensor}")
        points = rows[rows["varied"] == tensor]
        ax.set_title(f"{name} only")
        notes.append(f"{tensor}: {_fit_text(fit, tensor)}")
        if points.empty or fit is None:
            no_points(ax, f"no {name} sweep" if points.empty else f"no neff_{tensor} fit")
            continue
        hidden.append(_empirical_panel(ax, points, fit, tensor))
    left_out = "; ".join(note for note in hidden if note)
    add_footer(
        fig,
        "Points: N_eff/N = [(L − L_fp32)/A + N^−α]^(−1/α) / N from each quantized point's measured loss L, its fp32 "
        "partner's L_fp32 and the A, α of its sweep's own fit (Kumar et al. App. M); separately trained runs differ "
        "by σ_seed, which moves a point by about σ_seed·N^α/(α·A) of its value. Dashed: that fit's f_x(P); grey: "
        f"Table 2's. Fits: {'; '.join(notes)}."
        + (f" Not drawn (bracket ≤ 0, or N_eff/N above {EMPIRICAL_TOP:g}): {left_out}." if left_out else ""),
    )
    return fig


PTQ_METHOD = "gptq"  # the paper's main PTQ method (Fig. 21 is drawn for it)
MARKERS = "osD^vPX"


def _ptq_points(tables) -> pd.DataFrame:
    """Fig. 21's rows: the recipe seed's PTQ_METHOD rows below their training precision (every P_post of an fp32
    partner, whose P_train is FULL_BITS)."""
    ptq = tables.get("ptq")
    if ptq is None or ptq.empty:
        return pd.DataFrame(columns=["N", "P_w", "P_train", "P_post", "delta"])
    rows = ptq[(ptq["method"] == PTQ_METHOD) & (ptq["P_post"] < ptq["P_train"])]
    return rows[rows["seed"] == study.recipe_seed(ptq)].reset_index(drop=True)


def _trained_name(bits: float) -> str:
    return f"trained {study.FULL}" if bits == study.FULL_BITS else f"trained W{bits:g}"


@figure(tables=PTQ_TABLES, fits=f"{study.STUDY}/neff_w")
def fig21(tables, fits):
    """δ_PTQ after GPTQ against N (left) and against N_eff = N·f_w(P_w) (right; Kumar Fig. 21), colour per P_post,
    marker per the weights' training precision."""
    rows = _ptq_points(tables)
    fit = fits.get("neff_w")
    fig, axes = new_figure(2, 1, width=3.8, height=3.4, sharey=True)
    if rows.empty:
        for ax in axes[0]:
            no_points(ax, f"no {PTQ_METHOD.upper()} row below its training precision")
        return fig
    params = fit.params if fit is not None else study.PAPER
    source = f"this run's neff_w fit ({_fit_text(fit, 'w')})" if fit is not None else (
        f"Kumar et al.'s Table 2 (γ_w {params['gamma_w']:.4g}, n_w {params['n_w']:.4g}; no neff_w fit)"
    )  # fmt: skip
    n_eff = rows["N"] * law.precision_fraction(params, rows["P_w"], "w")
    posts, trains = np.sort(rows["P_post"].unique()), np.sort(rows["P_train"].unique())
    colours = dict(zip(posts, series_palette("rocket", len(posts))))
    markers = dict(zip(trains, itertools.cycle(MARKERS)))
    panels = ((axes[0][0], rows["N"], "N (non-embedding parameters)"), (axes[0][1], n_eff, "N_eff = N·f_w(P_w)"))
    for ax, x, name in panels:
        for (P_train, P_post), group in rows.groupby(["P_train", "P_post"]):
            ax.scatter(x[group.index], group["delta"], color=colours[P_post], marker=markers[P_train], s=20,
                       label=f"{_trained_name(P_train)}, P_post {P_post:g}")  # fmt: skip
        ax.axhline(0, color="k", lw=0.6)
        ax.set(xscale="log", xlabel=name)
    axes[0][0].set_ylabel(f"δ_PTQ after {PTQ_METHOD.upper()} (nats/token)")
    handles = [Line2D([], [], ls="none", marker="o", color=colours[p], label=f"P_post {p:g} bits") for p in posts]
    handles += [Line2D([], [], ls="none", marker=markers[t], color="0.3", label=_trained_name(t)) for t in trains]
    axes[0][1].legend(handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1))
    add_footer(
        fig,
        f"{PTQ_METHOD.upper()} rows of the PTQ-after-training table at the recipe seed: each weight-only point "
        "post-quantized below its training precision and each fp32 partner. δ_PTQ: the loss after post-quantizing "
        "the weights (INT, per output channel) less the same checkpoint's as trained, on the same windows. "
        f"N_eff = N·f_w(P_w) with γ_w, n_w of {source}; an fp32 partner's N_eff is its N. Separately trained points "
        "differ by σ_seed too: see claims.",
    )
    return fig


def _ablation_cells(rows, varied: str) -> list:
    """The (N, D) cells where the ablation sweep `varied` (w_tensor, w_fp) has trained points, sorted."""
    return sorted(rows.loc[rows["varied"] == varied, ["N", "D"]].drop_duplicates().itertuples(index=False, name=None))


def _partner_line(ax, rows, N, D, colour="0.4") -> None:
    partner = rows[(rows["N"] == N) & (rows["D"] == D) & (rows["varied"] == "")]
    if not partner.empty:
        ax.axhline(partner["loss"].iloc[0], color=colour, ls=":", lw=0.8, label=f"{study.FULL} partner")


def _recipe_rows(tables):
    """Every trained point at the recipe seed, the ablations' included (`study.recipe_rows`)."""
    table = tables.get("evals")
    if table is None or table.empty:
        return pd.DataFrame(columns=LAW_COLUMNS + ["precision", "loss_se"])
    return study.recipe_rows(table)


GRANULARITIES = {"w": "per channel (the paper's)", "w_tensor": "per tensor"}


@figure(tables=STUDY_TABLES)
def fig13(tables, fits):
    """Loss against weight training precision with the weights scaled per output channel and per tensor, one panel
    per (N, D) that trains both (Kumar Fig. 13)."""
    rows = _recipe_rows(tables)
    cells = _ablation_cells(rows, "w_tensor")
    fig, axes = new_figure(max(len(cells), 1), 1, width=3.8, height=3.3)
    if not cells:
        no_points(axes[0][0], "no per-tensor weight sweep")
    for ax, (N, D) in zip(axes[0], cells):
        for colour, (varied, name) in zip(sns.color_palette(), GRANULARITIES.items()):
            points = rows[(rows["varied"] == varied) & (rows["N"] == N) & (rows["D"] == D)].sort_values("P_w")
            ax.errorbar(points["P_w"], points["loss"], yerr=2 * points["loss_se"], fmt="o-", ms=4, color=colour,
                        label=name)  # fmt: skip
        _partner_line(ax, rows, N, D)
        ax.set(xlabel="weight training precision P_w (bits)", ylabel="held-out loss (nats/token)")
        ax.set_title(f"N {compact_number(N)}, D {compact_number(D)} tokens")
        ax.legend(fontsize=6)
    add_footer(
        fig,
        "INT weights, symmetric absmax, forward fake-quant with STE: one scale per output channel (Kumar et al.'s "
        "setup) or one per tensor; activations and KV cache in fp32. Dotted: the fp32 partner. The paper's message: "
        f"per-channel scaling costs less loss at every precision, most at low bits. {NOISE_NOTE}",
    )
    return fig


FP_LAYOUT = re.compile(r"WE(\d)M(\d)")
FP_PAPER = LAWS[study.LAW].paper_params["fp_weights"]


def _fp_points(rows) -> pd.DataFrame:
    """The FP weight points with their exponent and mantissa bits (columns `E`, `M`)."""
    points = rows[rows["varied"] == "w_fp"].copy()
    layout = points["precision"].str.extract(FP_LAYOUT).astype(float)
    return points.assign(E=layout[0], M=layout[1])


@figure(tables=STUDY_TABLES, fits=study.STUDY)
def fig16(tables, fits):
    """FP weight training precision (Kumar Fig. 16): left, loss against P_w = 1 + E + M bits of each FP format with
    the FP weight fit (neff_w_fp); right, f_w(P) of that fit beside the INT one and the paper's two."""
    fp_fit, int_fit = fits.get("neff_w_fp"), fits.get("neff_w")
    fig, axes = new_figure(2, 1, width=3.9, height=3.3)
    left, right = axes[0]
    rows = _recipe_rows(tables)
    points = _fp_points(rows)
    if points.empty:
        no_points(left, "no FP weight sweep")
    for colour, ((N, D), group) in zip(sns.color_palette(), points.groupby(["N", "D"])):
        label = f"N {compact_number(N)}, D {compact_number(D)}"
        left.errorbar(group["P_w"], group["loss"], yerr=2 * group["loss_se"], fmt="o", ms=4, color=colour, label=label)
        _partner_line(left, rows, N, D, colour)
        if fp_fit is not None:
            bits = np.linspace(group["P_w"].min(), group["P_w"].max(), 40)
            at = _law_inputs(N, D, "P_w", bits)
            left.plot(bits, fp_fit.predict(at), "--", color=colour, lw=1, label=f"{label}: neff_w_fp")
    left.set(xlabel="weight training precision P_w = 1 + E + M (bits)", ylabel="held-out loss (nats/token)")
    if not points.empty:
        left.legend(fontsize=6)
    curves = (("this run, FP (neff_w_fp)", fp_fit, "--", "C3"), ("this run, INT (neff_w)", int_fit, "--", "C0"),
              ("paper, FP (Fig. 16)", FP_PAPER, "-", "C3"), ("paper, INT (Table 2)", study.PAPER, "-", "C0"))  # fmt: skip
    for name, source, style, colour in curves:
        if source is not None:
            params = source.params if hasattr(source, "params") else source
            right.plot(BITS, law.precision_fraction(params, BITS, "w"), style, color=colour, label=name)
    right.set(xlabel="weight training precision P_w (bits)", ylabel="N_eff / N = f_w(P_w)", ylim=(0, 1.02))
    right.legend(fontsize=6, loc="lower right")
    add_footer(
        fig,
        "FP weights ExMy (absmax-scaled per output channel, forward fake-quant with STE), each counted as 1 + E + M "
        f"bits; dotted: the fp32 partner; dashed (left): the FP fit's loss at each bit count. FP fit: "
        f"{_fit_text(fp_fit, 'w')}; INT fit: {_fit_text(int_fit, 'w')}. Paper's FP fit: γ_w {FP_PAPER['gamma_w']:.4g}, "
        f"n_w {FP_PAPER['n_w']:.4g}. {NOISE_NOTE}",
    )
    return fig


@figure(tables=STUDY_TABLES)
def fig17(tables, fits):
    """Loss against the exponent bits at 3 mantissa bits (ExM3, left) and against the mantissa bits at 3 exponent
    bits (E3Mx, right), per (N, D) (Kumar Fig. 17)."""
    rows = _recipe_rows(tables)
    points = _fp_points(rows)
    fig, axes = new_figure(2, 1, width=3.6, height=3.3, sharey=True)
    for ax, (fixed, varied, name) in zip(axes[0], (("M", "E", "exponent"), ("E", "M", "mantissa"))):
        sweep = points[points[fixed] == 3]
        ax.set_title(f"{'ExM3' if fixed == 'M' else 'E3Mx'}: {name} bits varied")
        ax.set_xlabel(f"{name} bits ({varied})")
        if sweep.empty:
            no_points(ax, f"no {'ExM3' if fixed == 'M' else 'E3Mx'} sweep")
            continue
        for colour, ((N, D), group) in zip(sns.color_palette(), sweep.groupby(["N", "D"])):
            group = group.sort_values(varied)
            ax.errorbar(group[varied], group["loss"], yerr=2 * group["loss_se"], fmt="o-", ms=4, color=colour,
                        label=f"N {compact_number(N)}, D {compact_number(D)}")  # fmt: skip
            _partner_line(ax, rows, N, D, colour)
        ax.legend(fontsize=6)
    axes[0][0].set_ylabel("held-out loss (nats/token)")
    add_footer(
        fig,
        "FP weights ExMy trained with forward fake-quant (absmax per output channel, STE); activations and KV cache "
        "in fp32. Dotted: the fp32 partner. The paper's message: at a fixed mantissa, exponent bits past ~3 buy "
        f"little; at a fixed exponent, each mantissa bit lowers the loss. {NOISE_NOTE}",
    )
    return fig


FORM_NAMES = {"neff": "N_eff (Eq. 3)", "additive": "additive", "effective_data": "D_eff", "tied": "tied N_eff + D_eff",
              "untied": "untied N_eff + D_eff", "multiplicative": "multiplicative"}  # fmt: skip


def table1_frame(tables, fits):
    """Table 1: each functional form's held-out R² on this run's weight sweep beside the paper's."""
    forms = tables.get("forms")
    if forms is None:
        return pd.DataFrame(columns=study.FORM_COLUMNS)
    return forms.assign(form=forms["form"].map(FORM_NAMES))


def _score(value) -> str:
    return "—" if not math.isfinite(value) else f"{value:.3f}"


@figure(tables={"forms": f"{study.STUDY}/forms"}, frame=True)
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


UNQUANTIZED_BITS = 16.0  # what an fp32 partner costs per parameter in C = (6/16)·N·D·P: the paper's bf16 baseline
COMPUTE_MATCH = 0.1  # the widest relative spread of N·P within one compute-matched family


def compute_matched_families(rows: pd.DataFrame) -> pd.DataFrame:
    """The weight sweep's points and fp32 partners (at UNQUANTIZED_BITS) grouped, per D, into families of equal
    training compute N·P (within COMPUTE_MATCH of the family's cheapest): columns `P`, `compute` and `family`
    (the cheapest member's N·P); only families of two or more precisions are kept."""
    points = rows[rows["varied"].isin(["w", ""])]
    points = points.assign(P=points["P_w"].where(points["varied"] == "w", UNQUANTIZED_BITS))
    points = points.assign(compute=points["N"] * points["P"]).sort_values(["D", "compute"])
    family, start, previous_D = [], math.nan, None
    for D, compute in zip(points["D"], points["compute"]):  # sorted by D, then compute: a family opens at its cheapest
        if previous_D != D or compute > start * (1 + COMPUTE_MATCH):
            start, previous_D = compute, D
        family.append(start)
    matched = points.assign(family=np.array(family, dtype=float))
    precisions = matched.groupby(["D", "family"])["P"].transform("nunique")
    return matched[precisions >= 2].reset_index(drop=True)


@figure(tables=STUDY_TABLES, fits=f"{study.STUDY}/neff_w")
def fig1_right(tables, fits):
    """Compute-matched models (Kumar Fig. 1 right): at each D, models of equal N·P — more parameters at fewer weight
    bits — with their measured losses, and the weight sweep's fit along N = C/P."""
    families = compute_matched_families(_law_rows(tables))
    budgets = sorted(families["D"].unique())
    fig, axes = new_figure(max(len(budgets), 1), 1, width=3.8, height=3.4)
    fit = fits.get("neff_w")
    if not budgets:
        no_points(axes[0][0], "no compute-matched family")
    for ax, D in zip(axes[0], budgets):
        at_budget = families[families["D"] == D]
        keys = sorted(at_budget["family"].unique())
        for colour, key in zip(series_palette("viridis", len(keys)), keys):
            family = at_budget[at_budget["family"] == key].sort_values("P")
            ax.plot(family["P"], family["loss"], "o-", color=colour, ms=4, label=f"N·P ≈ {compact_number(key)}")
            for position, (_, point) in enumerate(family.iterrows()):
                # The highest-precision member's label goes to its left: on the right it would run into the next panel.
                last = position == len(family) - 1
                ax.annotate(f"N {compact_number(point['N'])}", (point["P"], point["loss"]), fontsize=5,
                            xytext=(-3 if last else 3, 3), textcoords="offset points", ha="right" if last else "left")  # fmt: skip
            if fit is not None:
                bits = np.geomspace(family["P"].min(), family["P"].max(), 30)
                at = _law_inputs(key / bits, D, "P_w", bits)
                ax.plot(bits, fit.predict(at), "--", color=colour, lw=0.8)
        budget = at_budget["budget"].iloc[0]
        ax.set(xscale="log", xlabel="weight precision P (bits)", ylabel="held-out loss (nats/token)",
               title=f"D = {compact_number(budget)} tokens")  # fmt: skip
        ticks = sorted(at_budget["P"].unique())
        ax.set_xticks(ticks, labels=[f"{bits:g}" for bits in ticks])
        ax.minorticks_off()
        ax.legend(fontsize=6)
    add_footer(
        fig,
        f"Families: the weight sweep's points and fp32 partners at one D whose N·P agree within {COMPUTE_MATCH:.0%} "
        "(training compute C = (6/16)·N·D·P, an fp32 partner counted at P = 16, the paper's bf16 baseline); each point "
        f"is labelled with its N. Dashed: this run's neff_w fit along N = C/P ({_fit_text(fit, 'w')}). The paper's "
        "message: at equal compute, more parameters at fewer bits can beat fewer at more. Separately trained "
        "models also differ by σ_seed (claims table).",
    )
    return fig


@figure(tables=STUDY_TABLES, fits=study.STUDY)
def fig14(tables, fits):
    """L(P) sweeps side by side (Kumar Fig. 14): per (N, D) where two or more tensors were swept, the loss against
    each tensor's training precision with the others in fp32, and each marginal fit's curve."""
    rows = _law_rows(tables)
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
                at = _law_inputs(N, D, column, bits)
                ax.plot(bits, fit.predict(at), "--", color=colour, lw=1)
        _partner_line(ax, rows, N, D)
        ax.set(xlabel="training precision of the swept tensor (bits)", ylabel="held-out loss (nats/token)")
        ax.set_title(f"N {compact_number(N)}, D {compact_number(rows.loc[rows['D'] == D, 'budget'].iloc[0])} tokens")
        ax.legend(fontsize=6)
    notes = "; ".join(f"{tensor}: {_fit_text(fits.get(f'neff_{tensor}'), tensor)}" for tensor in TENSOR_NAMES)
    add_footer(
        fig,
        "Each tensor's sweep with the other two in fp32, at the recipe seed; dotted: the fp32 partner; dashed: "
        f"that tensor's marginal N_eff fit. Fits: {notes}. The paper's message: activations and the KV cache cost "
        f"more loss than weights at the same low precision. {NOISE_NOTE}",
    )
    return fig
