"""Kumar et al.'s ablations of the training precision: INT weights scaled per channel or per tensor (Fig. 13), FP
weight formats and their own N_eff fit (Fig. 16), exponent against mantissa bits (Fig. 17)."""

import re

import numpy as np
import pandas as pd
import seaborn as sns

from qscaling.figures import add_footer, compact_number, figure, new_figure, no_points
from qscaling.figures.caveats import flag_bounds, seed_band
from qscaling.laws import LAWS
from qscaling.laws import kumar2024 as law
from qscaling.studies.kumar2024_training.analysis import LAW, TABLE2, recipe_rows
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

PAPER = "kumar2024"


def _ablation_cells(rows, varied: str) -> list:
    """The (N, D) cells where the ablation sweep `varied` (w_tensor, w_fp) has trained points, sorted."""
    return sorted(rows.loc[rows["varied"] == varied, ["N", "D"]].drop_duplicates().itertuples(index=False, name=None))


GRANULARITIES = {"w": "per channel (the paper's)", "w_tensor": "per tensor"}


@figure(tables=STUDY_TABLES)
def fig13(tables, fits):
    """Loss against weight training precision with the weights scaled per output channel and per tensor, one panel
    per (N, D) that trains both (Kumar Fig. 13)."""
    rows = selected_rows(tables, recipe_rows)
    cells = _ablation_cells(rows, "w_tensor")
    fig, axes = new_figure(max(len(cells), 1), 1, width=3.8, height=3.3)
    if not cells:
        no_points(axes[0][0], "no per-tensor weight sweep")
    for ax, (N, D) in zip(axes[0], cells):
        for colour, (varied, name) in zip(sns.color_palette(), GRANULARITIES.items()):
            points = rows[(rows["varied"] == varied) & (rows["N"] == N) & (rows["D"] == D)].sort_values("P_w")
            ax.errorbar(points["P_w"], points["loss"], yerr=2 * points["loss_se"], fmt="o-", ms=4, color=colour,
                        label=name)  # fmt: skip
            seed_band(ax, points["P_w"], points["loss"], point_seed_sd(tables), colour)
        partner_line(ax, rows, N, D)
        ax.set(xlabel="weight training precision P_w (bits)", ylabel="held-out loss (nats/token)")
        ax.set_title(f"N {compact_number(N)}, D {compact_number(D)} tokens")
        ax.legend(fontsize=6)
    add_footer(
        fig,
        "INT weights, symmetric absmax, forward fake-quant with STE: one scale per output channel (Kumar et al.'s "
        "setup) or one per tensor; activations and KV cache in fp32. Dotted: the fp32 partner. The paper's message: "
        f"per-channel scaling costs less loss at every precision, most at low bits. {noise_note(tables)}.",
    )
    return fig


FP_LAYOUT = re.compile(r"WE(\d)M(\d)")
FP_PAPER = LAWS[LAW].paper_params["fp_weights"]


def _fp_points(rows) -> pd.DataFrame:
    """The FP weight points with their exponent and mantissa bits (columns `E`, `M`)."""
    points = rows[rows["varied"] == "w_fp"].copy()
    layout = points["precision"].str.extract(FP_LAYOUT).astype(float)
    return points.assign(E=layout[0], M=layout[1])


@figure(tables=STUDY_TABLES, fits=STUDY)
def fig16(tables, fits):
    """FP weight training precision (Kumar Fig. 16): left, loss against P_w = 1 + E + M bits of each FP format with
    the FP weight fit (neff_w_fp); right, f_w(P) of that fit beside the INT one and the paper's two."""
    fp_fit, int_fit = fits.get("neff_w_fp"), fits.get("neff_w")
    fig, axes = new_figure(2, 1, width=3.9, height=3.3)
    left, right = axes[0]
    rows = selected_rows(tables, recipe_rows)
    points = _fp_points(rows)
    if points.empty:
        no_points(left, "no FP weight sweep")
    for colour, ((N, D), group) in zip(sns.color_palette(), points.groupby(["N", "D"])):
        label = f"N {compact_number(N)}, D {compact_number(D)}"
        left.errorbar(group["P_w"], group["loss"], yerr=2 * group["loss_se"], fmt="o", ms=4, color=colour, label=label)
        partner_line(left, rows, N, D, colour)
        if fp_fit is not None:
            bits = np.linspace(group["P_w"].min(), group["P_w"].max(), 40)
            at = law_inputs(N, D, "P_w", bits)
            left.plot(bits, fp_fit.predict(at), "--", color=colour, lw=1, label=f"{label}: neff_w_fp")
        seed_band(left, group["P_w"], group["loss"], point_seed_sd(tables), colour)
    left.set(xlabel="weight training precision P_w = 1 + E + M (bits)", ylabel="held-out loss (nats/token)")
    if not points.empty:
        left.legend(fontsize=6)
    curves = (("this run, FP (neff_w_fp)", fp_fit, "--", "C3"), ("this run, INT (neff_w)", int_fit, "--", "C0"),
              ("paper, FP (Fig. 16)", FP_PAPER, "-", "C3"), ("paper, INT (Table 2)", TABLE2, "-", "C0"))  # fmt: skip
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
        f"{fit_text(fp_fit, 'w')}; INT fit: {fit_text(int_fit, 'w')}. Paper's FP fit: γ_w {FP_PAPER['gamma_w']:.4g}, "
        f"n_w {FP_PAPER['n_w']:.4g}. {noise_note(tables)}.",
    )
    flag_bounds(fig, {"this run's neff_w_fp fit": fp_fit, "this run's neff_w fit": int_fit})
    return fig


@figure(tables=STUDY_TABLES)
def fig17(tables, fits):
    """Loss against the exponent bits at 3 mantissa bits (ExM3, left) and against the mantissa bits at 3 exponent
    bits (E3Mx, right), per (N, D) (Kumar Fig. 17)."""
    rows = selected_rows(tables, recipe_rows)
    points = _fp_points(rows)
    fig, axes = new_figure(2, 1, width=3.6, height=3.3, sharey=True)
    # One colour per (N, D) in both panels, whichever sweeps it trained.
    colours = dict(zip(sorted(points.groupby(["N", "D"]).groups), sns.color_palette()))
    for ax, (fixed, varied, name) in zip(axes[0], (("M", "E", "exponent"), ("E", "M", "mantissa"))):
        sweep = points[points[fixed] == 3]
        ax.set_title(f"{'ExM3' if fixed == 'M' else 'E3Mx'}: {name} bits varied")
        ax.set_xlabel(f"{name} bits ({varied})")
        if sweep.empty:
            no_points(ax, f"no {'ExM3' if fixed == 'M' else 'E3Mx'} sweep")
            continue
        for (N, D), group in sweep.groupby(["N", "D"]):
            group, colour = group.sort_values(varied), colours[(N, D)]
            ax.errorbar(group[varied], group["loss"], yerr=2 * group["loss_se"], fmt="o-", ms=4, color=colour,
                        label=f"N {compact_number(N)}, D {compact_number(D)}")  # fmt: skip
            partner_line(ax, rows, N, D, colour)
            seed_band(ax, group[varied], group["loss"], point_seed_sd(tables), colour)
        ax.legend(fontsize=6)
    axes[0][0].set_ylabel("held-out loss (nats/token)")
    add_footer(
        fig,
        "FP weights ExMy trained with forward fake-quant (absmax per output channel, STE); activations and KV cache "
        "in fp32. Dotted: the fp32 partner. The paper's message: at a fixed mantissa, exponent bits past ~3 buy "
        f"little; at a fixed exponent, each mantissa bit lowers the loss. {noise_note(tables)}.",
    )
    return fig
