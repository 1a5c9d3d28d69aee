"""Kumar et al.'s figures of compute and precision: the compute-optimal training precision P*(D) at fixed N (Fig. 6)
and compute-matched models, more parameters at fewer bits (Fig. 1 right)."""

import math

import numpy as np
import pandas as pd

from qscaling.figures import add_footer, compact_number, figure, new_figure, no_points, series_palette
from qscaling.figures.caveats import flag_bounds, seed_band, seed_band_note
from qscaling.laws import kumar2024 as law
from qscaling.studies.kumar2024_training.analysis import MOST_BITS, TABLE2, law_rows, optimal_precision
from qscaling.studies.kumar2024_training.figures import (
    SEED_SOURCE,
    STUDY_TABLES,
    fit_text,
    law_inputs,
    point_seed_sd,
    selected_rows,
)
from qscaling.studies.kumar2024_training.grid import STUDY

PAPER = "kumar2024"


def _fixed_size_optimum(params, N: float, tokens) -> np.ndarray:
    """P*(D) at fixed N (`law.fixed_size_optimal_precision`) at each D, NaN where it has none below MOST_BITS."""
    return np.array([law.optimum_or_nan(law.fixed_size_optimal_precision, params, N, D) for D in tokens])


def _optimum_note(joint, run_star: float, solved: bool) -> str:
    if joint is None:
        return "No neff_joint fit: Table 2's constants only."
    note = f"This run's P* (N, D, P all chosen): {run_star:.3g} bits." if math.isfinite(run_star) else (
        f"This run's joint fit has no P* below {MOST_BITS:g} bits (N, D, P all chosen)."
    )  # fmt: skip
    if not solved:
        note += f" Its fixed-N balance has no root below {MOST_BITS:g} bits at any (N, D) drawn: no dashed line."
    if joint.ill_conditioned:
        note += (
            f" The joint fit is ill-conditioned (Jacobian condition number {joint.jacobian_condition:.2g}): its γ_x, "
            "n_x, and with them P*, are not identified."
        )
    return note


@figure(tables=STUDY_TABLES, fits=f"{STUDY}/neff_joint")
def fig6(tables, fits):
    """Compute-optimal training precision P*(D) at fixed N for each of this run's sizes (Kumar Fig. 6 centre/right):
    this run's joint fit beside Table 2's constants, with each one's P* when N, D and P are all chosen."""
    rows = selected_rows(tables, law_rows)
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
        ax.plot(tokens, _fixed_size_optimum(TABLE2, N, tokens), "-", color=colour, label=f"N {compact_number(N)}")
        if joint is not None:
            ours = _fixed_size_optimum(joint.params, N, tokens)
            ax.plot(tokens, ours, "--", color=colour)
            solved |= bool(np.isfinite(ours).any())
    paper_star = optimal_precision(TABLE2)
    ax.axhline(paper_star, color="k", lw=0.8, label=f"P* Table 2 ({paper_star:.2f})")
    run_star = optimal_precision(joint.params) if joint is not None else math.nan
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
        f"{MOST_BITS:g} bits. Horizontal: P* with N, D and P all chosen (Sec. 4.3.1). "
        + _optimum_note(joint, run_star, solved),
    )
    flag_bounds(fig, {"this run's neff_joint fit": joint})
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


@figure(tables=STUDY_TABLES, fits=f"{STUDY}/neff_w")
def fig1_right(tables, fits):
    """Compute-matched models (Kumar Fig. 1 right): at each D, models of equal N·P — more parameters at fewer weight
    bits — with their measured losses, and the weight sweep's fit along N = C/P."""
    families = compute_matched_families(selected_rows(tables, law_rows))
    budgets = sorted(families["D"].unique())
    fig, axes = new_figure(max(len(budgets), 1), 1, width=3.8, height=3.4)
    fit = fits.get("neff_w")
    if not budgets:
        no_points(axes[0][0], "no compute-matched family")
    keys = sorted(families["family"].unique())
    colours = dict(zip(keys, series_palette("viridis", len(keys))))  # a family keeps its colour in every panel
    for ax, D in zip(axes[0], budgets):
        at_budget = families[families["D"] == D]
        for key in sorted(at_budget["family"].unique()):
            colour, family = colours[key], at_budget[at_budget["family"] == key].sort_values("P")
            ax.plot(family["P"], family["loss"], "o-", color=colour, ms=4, label=f"N·P ≈ {compact_number(key)}")
            for position, (_, point) in enumerate(family.iterrows()):
                # The highest-precision member's label goes to its left: on the right it would run into the next panel.
                last = position == len(family) - 1
                ax.annotate(f"N {compact_number(point['N'])}", (point["P"], point["loss"]), fontsize=5,
                            xytext=(-3 if last else 3, 3), textcoords="offset points", ha="right" if last else "left")  # fmt: skip
            if fit is not None:
                bits = np.geomspace(family["P"].min(), family["P"].max(), 30)
                at = law_inputs(key / bits, D, "P_w", bits)
                ax.plot(bits, fit.predict(at), "--", color=colour, lw=0.8)
            seed_band(ax, family["P"], family["loss"], point_seed_sd(tables), colour)
        budget = at_budget["budget"].iloc[0]
        ax.set(xscale="log", xlabel="weight precision P (bits)", title=f"D = {compact_number(budget)} tokens")
        ticks = sorted(at_budget["P"].unique())
        ax.set_xticks(ticks, labels=[f"{bits:g}" for bits in ticks])
        ax.minorticks_off()
    # One legend beside the last panel (a family keeps its colour throughout): inside, it covered points and labels.
    entries = {label: handle for ax in axes[0] for handle, label in zip(*ax.get_legend_handles_labels())}
    if entries:
        axes[0][-1].legend(entries.values(), entries.keys(), fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1),
                           borderaxespad=0)  # fmt: skip
    axes[0][0].set_ylabel("held-out loss (nats/token)")
    add_footer(
        fig,
        f"Families: the weight sweep's points and fp32 partners at one D whose N·P agree within {COMPUTE_MATCH:.0%} "
        "(training compute C = (6/16)·N·D·P, an fp32 partner counted at P = 16, the paper's bf16 baseline); each point "
        f"is labelled with its N. Dashed: this run's neff_w fit along N = C/P ({fit_text(fit, 'w')}). The paper's "
        f"message: at equal compute, more parameters at fewer bits can beat fewer at more; "
        f"{seed_band_note(point_seed_sd(tables), SEED_SOURCE)}.",
    )
    flag_bounds(fig, {"this run's neff_w fit": fit})
    return fig
