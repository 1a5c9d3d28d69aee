"""Sun et al. 2025's figures from this run (figures/sun2025/…): they read the sun2025 table (`tables["evals"]`: one
row per checkpoint and variant), its per-(N, D) block-size slopes (`tables["block_slopes"]`) and every fit."""

import math

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from qscaling.figures import (
    add_footer,
    compact_number,
    figure,
    interval_text,
    new_figure,
    no_points,
    series_palette,
)
from qscaling.figures.caveats import flag_bounds, mark_extrapolation, seed_band, seed_band_note
from qscaling.laws import LAWS
from qscaling.laws import sun2025 as law
from qscaling.studies.sun2025.analysis import (
    block_rows,
    effective_tensor_block,
    gemm_rows,
    kumar_form_inputs,
    law_rows,
    quantized_rows,
    seed_sigma,
)
from qscaling.studies.sun2025.grid import CHANNEL, FULL, GEMM_INPUTS, LAW_INPUTS, TENSOR, VALIDATION

PAPER = "sun2025"
STUDY_TABLES = {"evals": "sun2025"}
SEED_SOURCE = "σ_seed/√2 per point, σ_seed being the MAD over this study's seed repeats of δ, a difference of two runs"


def seed_sd(table) -> float:
    """σ_seed of δ from the study's own repeats (`analysis.seed_sigma`), NaN where they measure none."""
    sigma = seed_sigma(table)
    return sigma.value if sigma is not None else math.nan


def point_seed_sd(tables) -> float:
    """Each trained point's share of the between-run noise: σ_seed of δ is the noise of a difference between two
    points at one seed, σ_seed/√2 per point."""
    return seed_sd(tables["evals"]) / math.sqrt(2)


def noise_note(tables) -> str:
    return f"Error bars: ± 2 s.e. over held-out windows; {seed_band_note(point_seed_sd(tables), SEED_SOURCE)}"


def _law_rows(tables):
    return law_rows(tables["evals"])


def _fit_text(fit, name) -> str:
    if fit is None:
        return f"no {name} fit"
    heldout = fit.heldout_relative_error
    return f"R² {fit.r2:.3f}" + (f", leave-one-size-out error {heldout:.1%}" if heldout is not None else "")


def _diagonal(ax, values):
    values = np.asarray([v for v in values if np.isfinite(v)], float)
    ends = np.array([values.min(), values.max()]) if len(values) else np.array([1.0, 2.0])
    pad = 0.05 * (ends[1] - ends[0] or 1.0)
    ends = ends + np.array([-pad, pad])
    ax.plot(ends, ends, ":", color="k", lw=1, label="y = x")
    ax.set(xlim=ends, ylim=ends, xlabel="measured loss (nats/token)")


def _fit_inputs(rows, name):
    return kumar_form_inputs(rows) if name == "kumar_form" else rows


@figure(tables=STUDY_TABLES, fits="sun2025")
def fig1(tables, fits):
    """Fitted against measured loss for Kumar et al.'s N_eff form (P = E + M + 1 bits) and the Capybara law."""
    rows = _law_rows(tables)
    fig, axes = new_figure(2, 1, width=3.4, height=3.3)
    for ax, (name, title) in zip(axes[0], (("kumar_form", "Kumar et al. form"), ("capybara", "Capybara (Sun et al.)"))):
        fit = fits.get(name)
        if fit is None:
            no_points(ax, f"no {name} fit")
            continue
        predicted = fit.predict(_fit_inputs(rows, name))
        quantized = (rows["format"] != FULL).to_numpy()
        ax.scatter(rows["loss"][quantized], predicted[quantized], s=14, color="C0", label="FP-quantized")
        ax.scatter(rows["loss"][~quantized], predicted[~quantized], s=14, color="C1", marker="s",
                               label="fp32 partner")  # fmt: skip
        _diagonal(ax, [*rows["loss"], *predicted])
        ax.set(ylabel="fitted loss", title=f"{title}\n{_fit_text(fit, name)}")
        ax.legend(fontsize=6)
    add_footer(
        fig,
        "This run's fitted points (P2+P4+P6 quantized, block or channel scaling, recipe seed); each law "
        "fitted to the same points. The N_eff form cannot tell formats of equal bits or block sizes apart.",
    )
    flag_bounds(
        fig, {"this run's Kumar-form fit": fits.get("kumar_form"), "this run's Capybara fit": fits.get("capybara")}
    )
    return fig


@figure(tables=STUDY_TABLES, fits="sun2025/capybara")
def fig4(tables, fits):
    """The Capybara fit against measured loss on its own points and on the larger sizes it never saw."""
    table = tables["evals"]
    fit = fits.get("capybara")
    fig, axes = new_figure(width=4.2, height=3.8)
    ax = axes[0][0]
    if fit is None:
        no_points(ax, "no Capybara fit")
        return fig
    fitted, held_out = law_rows(table), law_rows(table, VALIDATION)
    ax.scatter(fitted["loss"], fit.predict(fitted), s=14, color="C0", label="fitted sizes")
    errors = []
    for size, rows in held_out.groupby("size"):
        predicted = fit.predict(rows)
        errors.append(f"{size} {np.mean(np.abs(predicted / rows['loss'] - 1)):.1%}")
        ax.scatter(rows["loss"], predicted, s=14, color="C3", marker="D", label=f"held out: {size}")
    _diagonal(ax, [*fitted["loss"], *held_out["loss"]])
    ax.set(ylabel="Capybara prediction", title="Capybara fit, validated on a larger size")
    ax.legend(fontsize=6)
    validation = "; mean relative error of the held-out size(s): " + ", ".join(errors) if errors else ""
    add_footer(fig, f"{_fit_text(fit, 'capybara')}{validation}.")
    flag_bounds(fig, {"this run's Capybara fit": fit})
    return fig


@figure(tables=STUDY_TABLES, fits="sun2025")
def fig2(tables, fits):
    """δ of quantizing each GEMM input alone (P1…P6) and the scaling-law set P2+P4+P6, in one format, ranked."""
    table = tables["evals"]
    gemm = gemm_rows(table)
    fig, axes = new_figure(width=5.0, height=3.4)
    ax = axes[0][0]
    if gemm.empty:
        no_points(ax, "no GEMM-input runs")
        return fig
    gemm = gemm.sort_values("delta")
    names = {**{key: f"{key}: {field.replace('_', ' ')}" + (f" (d{gemms[1].upper()})" if gemms else "")
                    for key, (field, gemms) in GEMM_INPUTS.items()}, LAW_INPUTS: LAW_INPUTS}  # fmt: skip
    ax.barh([names[key] for key in gemm.index], gemm["delta"], xerr=2 * gemm["delta_se"],
            color=["C3" if key == LAW_INPUTS else "C0" for key in gemm.index])  # fmt: skip
    sigma = seed_sd(table)
    if math.isfinite(sigma):
        ax.axvspan(-2 * sigma, 2 * sigma, color="0.88", zorder=0, label="± 2 σ_seed")
        ax.legend(fontsize=6)
    first = gemm.iloc[0]
    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.set(xlabel="δ = loss − fp32 partner's loss (nats/token)",
           title=f"{first['format'].upper()} {first['block']}, {first['size']}, D = {compact_number(first['budget'])}")  # fmt: skip
    add_footer(fig, "Error bars: ± 2 s.e. over held-out windows; grey: ± 2 σ_seed, the MAD of δ over the seed repeats.")
    return fig


def _curves(ax, rows, x, fit, inputs, colours, sd, by=("N", "D")):
    """Measured points of `rows` against `x` per (N, D) with their seed bands (`sd` per point), and `fit`'s curve
    through each."""
    for key, group in rows.groupby(list(by)):
        group = group.sort_values(x)
        colour = colours[key]
        ax.errorbar(group[x], group["loss"], yerr=2 * group["loss_se"], fmt="o", ms=4, color=colour,
                    label=f"N {compact_number(key[0])}, D {compact_number(key[1])}")  # fmt: skip
        if fit is not None:
            grid = np.linspace(group[x].min(), group[x].max(), 40)
            at = {**{name: np.full_like(grid, group[name].iloc[0], dtype=float) for name in inputs}, x: grid}
            ax.plot(grid, fit.predict(at), "--", color=colour, lw=1)
    for key, group in rows.groupby(list(by)):
        seed_band(ax, group[x], group["loss"], sd, colours[key])


def _palette(rows, by=("N", "D")):
    keys = sorted(rows.groupby(list(by)).groups)
    return dict(zip(keys, series_palette("viridis", len(keys))))


@figure(tables=STUDY_TABLES, fits="sun2025")
def fig9(tables, fits):
    """Loss against exponent bits (M = 1) and mantissa bits (E = 1), channel-wise, with the two sub-laws."""
    rows = quantized_rows(_law_rows(tables))
    rows = rows[rows["block"] == CHANNEL]
    fig, axes = new_figure(2, 1, width=3.8, height=3.3)
    sweeps = {}
    for name, varied, held in (("exponent", "E", "M"), ("mantissa", "M", "E")):
        sweep = rows[rows[held] == 1]
        sweeps[name] = sweep[sweep.groupby(["N", "D"])[varied].transform("nunique") >= 2]
    colours = _palette(pd.concat(sweeps.values()))  # an (N, D) keeps its colour in both panels
    for ax, (name, varied, held) in zip(axes[0], (("exponent", "E", "M"), ("mantissa", "M", "E"))):
        sweep = sweeps[name]
        if sweep.empty:
            no_points(ax, f"no {name} sweep")
            continue
        _curves(ax, sweep, varied, fits.get(name), ("N", "D", held), colours, point_seed_sd(tables))
        ax.set(xlabel=f"{name} bits {varied} ({held} = 1)", ylabel="held-out loss (nats/token)",
               title=f"{name}-only law:\n{_fit_text(fits.get(name), name)}")  # fmt: skip
        ax.legend(fontsize=6)
    add_footer(fig, f"Points: this run's channel-wise runs; dashed: each sub-law's fit. {noise_note(tables)}.")
    flag_bounds(fig, {f"this run's {name} fit": fits.get(name) for name in ("exponent", "mantissa")})
    return fig


def implied_gamma(rows, fit, varied):
    """Per point, the γ of a sub-law that would give it its loss exactly (its other parameters as fitted):
    Fig. 10's constant, flat in log(N/D) when the D^β/N^α weight carries the whole (N, D) dependence."""
    x = {name: rows[name].to_numpy(float) for name in ("N", "D")}
    exponent = fit.params["delta" if varied == "E" else "nu"]
    excess = rows["loss"].to_numpy(float) - law.data_size_terms(fit.params, x)
    with np.errstate(invalid="ignore", divide="ignore"):
        gamma = law.precision_weight(fit.params, x) / (excess * (rows[varied].to_numpy(float) + 0.5) ** exponent)
    return np.where(excess > 0, gamma, np.nan)


@figure(tables=STUDY_TABLES, fits="sun2025")
def fig10(tables, fits):
    """The exponent and mantissa sub-laws' γ implied by each point against log(N/D), beside the fitted constant."""
    rows = quantized_rows(_law_rows(tables))
    rows = rows[rows["block"] == CHANNEL]
    fig, axes = new_figure(2, 1, width=3.6, height=3.2)
    for ax, (name, varied, held, symbol) in zip(
        axes[0], (("exponent", "E", "M", "γ_E"), ("mantissa", "M", "E", "γ_M"))
    ):
        fit, sweep = fits.get(name), rows[rows[held] == 1]
        if fit is None or sweep.empty:
            no_points(ax, f"no {name} fit")
            continue
        gamma = implied_gamma(sweep, fit, varied)
        ratio = np.log(sweep["N"] / sweep["D"])
        colours = dict(zip(sorted(sweep[varied].unique()), series_palette("viridis", sweep[varied].nunique())))
        for value, colour in colours.items():
            chosen = (sweep[varied] == value).to_numpy() & np.isfinite(gamma)
            ax.scatter(ratio[chosen], gamma[chosen], s=14, color=colour, label=f"{varied} = {value}")
        ax.axhline(fit.params[f"gamma_{varied}"], color="C3", ls="--", lw=1, label=f"fitted {symbol}")
        ax.set(yscale="log", xlabel="log(N/D)", ylabel=f"implied {symbol}", title=f"{name}-only law")
        ax.legend(fontsize=6)
    add_footer(
        fig,
        "Each point's γ with the sub-law's other parameters as fitted (points below the law's base "
        "loss have none). The paper reports its own γ, ι drifting with N/D only as a figure.",
    )
    flag_bounds(fig, {f"this run's {name} fit": fits.get(name) for name in ("exponent", "mantissa")})
    return fig


@figure(tables=STUDY_TABLES, fits="sun2025/block")
def fig3(tables, fits):
    """Loss against log2 B (E1M1: blocks, channel-wise at B = d_model) per (N, D), with the block-size law."""
    table = tables["evals"]
    rows = block_rows(table)
    blocks = rows[rows["B"].notna()]
    fig, axes = new_figure(width=4.6, height=3.6)
    ax = axes[0][0]
    if blocks.empty:
        no_points(ax, "no block-size sweep")
        return fig
    colours = _palette(blocks)
    shown = blocks.assign(log2_B=np.log2(blocks["B"]))
    fit = fits.get("block")
    for key, group in shown.groupby(["N", "D"]):
        group = group.sort_values("log2_B")
        ax.errorbar(group["log2_B"], group["loss"], yerr=2 * group["loss_se"], fmt="o", ms=4, color=colours[key],
                    label=f"N {compact_number(key[0])}, D {compact_number(key[1])}")  # fmt: skip
        if fit is not None:
            grid = np.linspace(1, group["log2_B"].max() + 1, 40)
            at = {"N": np.full_like(grid, key[0]), "D": np.full_like(grid, key[1]), "B": 2.0**grid}
            ax.plot(grid, fit.predict(at), "--", color=colours[key], lw=1)
    ax.set(xlabel="log2 B (block size; channel-wise at B = d_model)", ylabel="held-out loss (nats/token)",
           title=f"Block-size law (E1M1): {_fit_text(fit, 'block')}")  # fmt: skip
    for key, group in shown.groupby(["N", "D"]):
        seed_band(ax, group["log2_B"], group["loss"], point_seed_sd(tables), colours[key])
    if fit is not None:
        mark_extrapolation(ax, fit, "B", (1, shown["log2_B"].max() + 1), to_axis=np.log2)
    ax.legend(fontsize=6)
    add_footer(fig, f"Dashed: this run's block-size law. Tensor-wise runs: Figs. 12, 13. {noise_note(tables)}.")
    flag_bounds(fig, {"this run's block-size fit": fit})
    return fig


@figure(tables={**STUDY_TABLES, "block_slopes": "sun2025/block_slopes"}, fits="sun2025/block")
def fig11(tables, fits):
    """The slope of loss on log2 B per (N, D) against log(N/D): measured, this run's block law and the paper's."""
    slopes = tables["block_slopes"]
    fig, axes = new_figure(width=4.4, height=3.4)
    ax = axes[0][0]
    if slopes.empty:
        no_points(ax, "no (N, D) with three block sizes")
        return fig
    ratio = np.log(slopes["N"] / slopes["D"])
    ax.errorbar(ratio, slopes["slope"], yerr=2 * slopes["slope_se"], fmt="o", color="C0", label="this run, measured")
    x = {"N": slopes["N"].to_numpy(float), "D": slopes["D"].to_numpy(float)}
    paper = LAWS["sun2025.block"].paper_params["table2_E1M1"]
    ax.scatter(ratio, law.precision_weight(paper, x) / paper["gamma_B"], marker="x", color="k", label="paper's law")
    fit = fits.get("block")
    if fit is not None:
        ax.scatter(ratio, law.precision_weight(fit.params, x) / fit.params["gamma_B"], marker="D", color="C3",
                   label="this run's law")  # fmt: skip
    ax.axhline(0, color="0.5", lw=0.8)
    ax.set(xlabel="log(N/D)", ylabel="d loss / d log2 B (nats per doubling)", title="Block-size penalty per doubling")
    ax.legend(fontsize=6)
    add_footer(
        fig,
        "Measured: least squares over the E1M1 block sizes at each (N, D), ± 2 s.e. from the paired evaluation "
        "errors of δ (seed noise not included); laws: (D^β/N^α)/γ_B (the paper's γ_B is Table 2 folded at E1M1).",
    )
    flag_bounds(fig, {"this run's block-size fit": fit})
    return fig


@figure(tables=STUDY_TABLES, fits="sun2025/block")
def fig12(tables, fits):
    """The effective log2 B of tensor-wise scaling per point, against log(N/D), beside channel-wise's true one."""
    table = tables["evals"]
    fit = fits.get("block")
    fig, axes = new_figure(width=4.4, height=3.4)
    ax = axes[0][0]
    tensor = effective_tensor_block(table, fit.params) if fit is not None else pd.DataFrame()
    if tensor.empty:
        no_points(ax, "no tensor-wise runs or no block-size fit")
        return fig
    ratio = np.log(tensor["N"] / tensor["D"])
    ax.scatter(ratio, tensor["log2_B_effective"], color="C0", label="tensor-wise, effective")
    ax.scatter(ratio, np.log2(tensor["channel_B"]), marker="_", s=80, color="k", label="channel-wise (B = d_model)")
    ax.axhline(law.CHANNELWISE_LOG2_BLOCK, color="0.5", ls=":", label="paper's channel-wise effective 13.16")
    ax.set(yscale="log", xlabel="log(N/D)", ylabel="log2 B", title="Tensor-wise scaling as a block size")
    ax.legend(fontsize=6)
    add_footer(
        fig,
        "Effective log2 B: what this run's block-size law needs to give each tensor-wise point its "
        "loss (none where the loss lies below the law's base).",
    )
    flag_bounds(fig, {"this run's block-size fit": fit})
    return fig


@figure(tables=STUDY_TABLES, fits="sun2025/block")
def fig13(tables, fits):
    """E1M1 loss against D per size, channel-wise and tensor-wise, with the block law (tensor at its median
    effective block)."""
    table = tables["evals"]
    rows = block_rows(table)
    fit = fits.get("block")
    fig, axes = new_figure(2, 1, width=3.6, height=3.2)
    tensor = effective_tensor_block(table, fit.params) if fit is not None else pd.DataFrame()
    median = float(np.nanmedian(tensor["log2_B_effective"])) if len(tensor) else math.nan
    shown = rows[rows["block"].isin([CHANNEL, TENSOR])]
    colours = dict(zip(sorted(shown["N"].unique()), series_palette("viridis", shown["N"].nunique())))
    for ax, (granularity, title) in zip(axes[0], ((CHANNEL, "channel-wise"), (TENSOR, "tensor-wise"))):
        panel = rows[rows["block"] == granularity]
        if panel.empty:
            no_points(ax, f"no {title} runs")
            continue
        for N, group in panel.groupby("N"):
            group = group.sort_values("D")
            ax.errorbar(group["D"], group["loss"], yerr=2 * group["loss_se"], fmt="o", ms=4, color=colours[N],
                        label=f"N {compact_number(N)}")  # fmt: skip
            log2_B = np.log2(group["B"].iloc[0]) if granularity == CHANNEL else median
            if fit is not None and np.isfinite(log2_B):
                grid = np.geomspace(group["D"].min(), group["D"].max(), 30)
                at = {"N": np.full_like(grid, N), "D": grid, "B": np.full_like(grid, 2.0**log2_B)}
                ax.plot(grid, fit.predict(at), "--", color=colours[N], lw=1)
        ax.set(xscale="log", xlabel="training tokens D", ylabel="held-out loss (nats/token)", title=f"E1M1 {title}")
        for N, group in panel.groupby("N"):
            seed_band(ax, group["D"], group["loss"], point_seed_sd(tables), colours[N])
        ax.legend(fontsize=6)
    add_footer(fig, f"Dashed: this run's block-size law (tensor-wise at its median effective log2 B = {median:.3g}). "
               f"{noise_note(tables)}.")  # fmt: skip
    flag_bounds(fig, {"this run's block-size fit": fit})
    return fig


@figure(tables=STUDY_TABLES, fits="sun2025")
def fig8(tables, fits):
    """The full-precision partners' loss against D per size, with the Chinchilla and OpenAI (Kaplan) forms."""
    rows = _law_rows(tables)
    rows = rows[rows["format"] == FULL]
    fig, axes = new_figure(width=4.6, height=3.6)
    ax = axes[0][0]
    if rows.empty:
        no_points(ax, "no full-precision runs")
        return fig
    colours = dict(zip(sorted(rows["N"].unique()), series_palette("viridis", rows["N"].nunique())))
    styles = {"bf16_chinchilla": "-", "bf16_kaplan": "--"}
    for N, group in rows.groupby("N"):
        group = group.sort_values("D")
        ax.errorbar(group["D"], group["loss"], yerr=2 * group["loss_se"], fmt="o", ms=4, color=colours[N],
                    label=f"N {compact_number(N)}")  # fmt: skip
        grid = np.geomspace(group["D"].min(), group["D"].max(), 30)
        for name, style in styles.items():
            if fits.get(name) is not None:
                ax.plot(
                    grid, fits[name].predict({"N": np.full_like(grid, N), "D": grid}), style, color=colours[N], lw=1
                )
    ax.set(xscale="log", xlabel="training tokens D", ylabel="held-out loss (nats/token)",
           title="Full-precision (fp32 for BF16) fits")  # fmt: skip
    for N, group in rows.groupby("N"):
        seed_band(ax, group["D"], group["loss"], point_seed_sd(tables), colours[N])
    ax.legend(fontsize=6)
    summary = "; ".join(f"{label}: {_fit_text(fits.get(name), label)}" for name, label in
                        (("bf16_chinchilla", "Chinchilla (solid)"), ("bf16_kaplan", "OpenAI form (dashed)")))  # fmt: skip
    add_footer(fig, f"{summary}. {noise_note(tables)}.")
    flag_bounds(fig, {"this run's Chinchilla fit": fits.get("bf16_chinchilla"),
                      "this run's OpenAI-form fit": fits.get("bf16_kaplan")})  # fmt: skip
    return fig


def table2_frame(tables, fits):
    """Table 2: one row per Capybara constant, the paper's value beside this run's with its 95 % CI (`this_run_ci`:
    the interval, "held at paper" or "… at bound")."""
    fit = fits.get("capybara")
    rows = []
    for name, value in law.TABLE2.items():
        row = {"parameter": name, "paper": value}
        if fit is not None:
            row.update({"this_run": fit.params[name], "this_run_ci": interval_text(fit, name)})
        rows.append(row)
    return pd.DataFrame(rows)


def _layouts(params) -> str:
    return ", ".join("FP{}: E{}M{}".format(bits, *law.optimal_layout(params, bits)) for bits in (4, 8, 16))


@figure(tables=STUDY_TABLES, fits="sun2025", frame=True)
def table2(tables, fits):
    """Table 2 rendered: the Capybara law's constants, the paper's beside this run's, and the layouts they imply."""
    frame = table2_frame(tables, fits)
    fit = fits.get("capybara")
    fig, axes = new_figure(width=6.0, height=0.3 * len(frame) + 1.3)
    ax = axes[0][0]
    ax.axis("off")
    header = ["parameter", "paper (Table 2)"] + (["this run", "95 % CI"] if fit is not None else [])
    cells = [
        [row["parameter"], f"{row['paper']:.4g}"]
        + ([f"{row['this_run']:.4g}", row["this_run_ci"]] if fit is not None else [])
        for _, row in frame.iterrows()
    ]
    table = ax.table(cellText=cells, colLabels=header, loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    table.scale(1, 1.4)
    footer = f"Optimal layouts, paper: {_layouts(law.TABLE2)}."
    if fit is not None:
        footer += f" This run: {_layouts(fit.params)}; {_fit_text(fit, 'Capybara')}; {fit.n_points} points."
    add_footer(fig, footer)
    flag_bounds(fig, {"this run's Capybara fit": fit})
    return fig
