"""Kumar et al.'s figures of post-training quantization after low-precision training: δ_PTQ over (P_train, P_post)
measured and by the unified law (Fig. 7), and δ_PTQ against N and N_eff (Fig. 21)."""

import itertools

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from qscaling.figures import add_footer, compact_number, figure, interval_text, new_figure, no_points, series_palette
from qscaling.figures.caveats import flag_bounds
from qscaling.laws import LAWS
from qscaling.laws import kumar2024 as law
from qscaling.studies.kumar2024_training.analysis import (
    AS_TRAINED,
    TABLE2,
    UNIFIED_LAW,
    UNIFIED_PAPER,
    unified_rows,
)
from qscaling.studies.kumar2024_training.figures import STUDY_TABLES, fit_text
from qscaling.studies.kumar2024_training.grid import STUDY
from qscaling.studies.kumar2024_training.precision import FULL, FULL_BITS
from qscaling.studies.tables import recipe_seed

PAPER = "kumar2024"
PTQ_TABLES = {"ptq": f"{STUDY}/ptq"}


def _ptq_cell(ptq):
    """The (N, D) Fig. 7 shows: the largest size at its largest budget among the recipe seed's weight-only points."""
    points = ptq[(ptq["precision"] != FULL) & (ptq["seed"] == recipe_seed(ptq))]
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
    grid.index = [FULL if bits == FULL_BITS else f"W{bits:g}" for bits in grid.index]
    grid.columns = [f"{bits:g}" for bits in grid.columns]
    sns.heatmap(grid, ax=ax, cmap="vlag", center=0, vmin=-vmax, vmax=vmax, annot=True, fmt=".2g",
                annot_kws={"fontsize": 6}, cbar=last, yticklabels=first,
                cbar_kws={"label": "δ_PTQ (nats/token)"} if last else None)  # fmt: skip
    ax.grid(False)
    ax.set(title=title, xlabel="post-training precision P_post (bits)" if bottom else "")
    ax.set_ylabel("training precision" if first else "")


@figure(tables=STUDY_TABLES | PTQ_TABLES, fits=STUDY)
def fig7(tables, fits):
    """δ_PTQ over (P_train, P_post) at one (N, D), per PTQ method: measured, this run's unified fit, and the
    unified law with Table 2's constants (C_x = 1 assumed)."""
    ptq = tables["ptq"]
    methods = sorted(set(ptq["method"]) - {AS_TRAINED})
    fig, axes = new_figure(3, max(len(methods), 1), width=3.2, height=3.0, gridspec_kw={"width_ratios": [1, 1, 1.25]})
    if not methods:
        no_points(axes[0][0], "no post-quantized checkpoint")
        return fig
    N, D = _ptq_cell(ptq)
    notes = []
    for position, (row_axes, method) in enumerate(zip(axes, methods)):
        rows = unified_rows(ptq, method)
        rows = rows[(rows["method"] == method) & (rows["N"] == N) & (rows["D"] == D)].reset_index(drop=True)
        fit = fits.get(f"unified_{method}")
        law = LAWS[UNIFIED_LAW]
        predicted = _degradation(fit.law, fit.params, rows) if fit is not None else np.full(len(rows), np.nan)
        panels = {
            f"{method.upper()}: measured": rows["delta"].to_numpy(float),
            f"{method.upper()}: this run's unified fit": np.asarray(predicted, float),
            f"{method.upper()}: Table 2 law (C_x = 1)": np.asarray(_degradation(law, UNIFIED_PAPER, rows), float),
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
    flag_bounds(fig, {f"this run's unified_{method} fit": fits.get(f"unified_{method}") for method in methods})
    return fig


def _unified_text(fit) -> str:
    if fit is None:
        return "no fit"
    return (
        f"γ_post {fit.params['gamma_post']:.3g} {interval_text(fit, 'gamma_post')}, "
        f"C_w {fit.params['C_w']:.3g} {interval_text(fit, 'C_w')}; R² {fit.r2:.3f}"
    )


PTQ_METHOD = "gptq"  # the paper's main PTQ method (Fig. 21 is drawn for it)
MARKERS = "osD^vPX"


def _ptq_points(tables) -> pd.DataFrame:
    """Fig. 21's rows: the recipe seed's PTQ_METHOD rows below their training precision (every P_post of an fp32
    partner, whose P_train is FULL_BITS)."""
    ptq = tables.get("ptq")
    if ptq is None or ptq.empty:
        return pd.DataFrame(columns=["N", "P_w", "P_train", "P_post", "delta"])
    rows = ptq[(ptq["method"] == PTQ_METHOD) & (ptq["P_post"] < ptq["P_train"])]
    return rows[rows["seed"] == recipe_seed(ptq)].reset_index(drop=True)


def _trained_name(bits: float) -> str:
    return f"trained {FULL}" if bits == FULL_BITS else f"trained W{bits:g}"


@figure(tables=PTQ_TABLES, fits=f"{STUDY}/neff_w")
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
    params = fit.params if fit is not None else TABLE2
    source = f"this run's neff_w fit ({fit_text(fit, 'w')})" if fit is not None else (
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
