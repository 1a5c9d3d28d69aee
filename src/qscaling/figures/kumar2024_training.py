"""Kumar et al. 2024 figures of the training-precision study (targets `kumar2024_<name>`): they read the
kumar2024_training table (`tables["evals"]`: one row per checkpoint and precision) and its N_eff fits. The paper's
A, B, E belong to 30M–220M models on Dolma, so its constants enter only as γ_x, n_x beside this run's size and data
terms, labelled as such."""

import numpy as np
import seaborn as sns

from qscaling.figures import add_footer, compact_number, figure, interval_text, new_figure, no_points, series_palette
from qscaling.laws import LAWS
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
            at = {"N": np.full_like(bits, N), "D": np.full_like(bits, D)}
            at |= {f"P_{other}": np.full_like(bits, study.FULL_BITS) for other in study.TENSOR_SPECS} | {column: bits}
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
