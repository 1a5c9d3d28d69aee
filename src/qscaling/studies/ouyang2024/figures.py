"""Ouyang et al. 2024 figures (figures/ouyang2024/…). Law-only ones draw the unified QiD law's constants and, given
`fits["qid"]` (an ouyang2024.qid fit), this run's fit."""

from importlib import resources

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from qscaling.figures import add_footer, compact_number, figure, new_figure, series_palette
from qscaling.figures.caveats import EXTRAPOLATED, extrapolation_note, flag_bounds
from qscaling.laws import LAWS, compare_sources
from qscaling.laws import ouyang2024 as law
from qscaling.studies.ouyang2024.bitnet import bitnet_gaps

PAPER = "ouyang2024"
_STYLE = {"paper": "-", "this run": "--"}
GUIDE_LABEL = "paper slope (guide)"
PYTHIA_VOCAB = 50277  # GPT-NeoX tokenizer: a uniform guess costs ln(50277) nats


@figure(fits="ouyang2024/qid", law_only=True)
def fig1(tables, fits, sizes=("7B", "70B", "405B")):
    """Predicted QiD against training tokens up to 1e14 per bit width; grey: worse than a uniform guess."""
    fit = fits.get("qid")
    sources = compare_sources(LAWS["ouyang2024.qid"], fit)
    sixteen_bit = LAWS["kaplan"].paper_params["ouyang2024"]
    fig, axes = new_figure(len(sizes), 1, width=3.4, height=3.2, sharey=True)
    tokens, limits = np.logspace(9, 14, 100), (1e-3, 30)
    fit_lowest = []  # per panel and bit width, the least QiD this run's fit predicts on the axes
    for ax, model in zip(axes[0], sizes):
        N = np.full_like(tokens, law.MODELS[model])
        random_gap = np.log(PYTHIA_VOCAB) - LAWS["kaplan"](sixteen_bit, {"N": N, "D": tokens})
        ax.fill_between(tokens, random_gap, 100, color="0.85", label="worse than random")
        for label, params in sources:
            for color, bits in zip(sns.color_palette(), (2, 3, 4)):
                qid = law.qid(params, {"N": N, "D": tokens, "P": bits})
                on_axes = (qid >= limits[0]) & (qid <= limits[1])
                if label == "this run":
                    fit_lowest.append(qid.min())
                if on_axes.any():
                    ax.plot(tokens, qid, _STYLE[label], color=color, label=f"{bits}-bit" if label == "paper" else None)
        ax.set(xscale="log", yscale="log", ylim=limits, xlabel="training tokens", title=model)
    axes[0][0].set_ylabel("QiD (Δ loss)")
    # Beside the panels, not on them: a fit's curves can fill any corner of the first panel.
    handles, labels = axes[0][0].get_legend_handles_labels()
    if fit is not None and min(fit_lowest) <= limits[1]:
        handles.append(Line2D([], [], ls="--", color="0.3", label=f"this run's fit ({EXTRAPOLATED})"))
        labels.append(handles[-1].get_label())
    axes[0][-1].legend(handles, labels, fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1))
    sized = [law.MODELS[model] for model in sizes]
    drawn = {"N": (min(sized), max(sized)), "D": (tokens[0], tokens[-1])}
    add_footer(
        fig,
        "Constants: Ouyang et al. 2024, unified law and 16-bit Kaplan-form loss" + _fit_note(fit, fit_lowest, drawn),
    )
    flag_bounds(fig, {"this run's QiD fit": fit})
    return fig


def _fit_note(fit, lowest_predictions, drawn) -> str:
    """Where this run's fit lies on Fig. 1, and that it is extrapolated there: it was fitted far below the sizes
    and token counts drawn (`drawn`: their ranges)."""
    if fit is None:
        return ""
    beyond = extrapolation_note(fit, drawn)
    if min(lowest_predictions) <= 30:
        return "; dashed: this run's fit, where it falls on the axes" + (f" ({beyond})" if beyond else "")
    p = fit.params
    return (
        f"\nThis run's fit (k = {p['k']:.3g}, α = {p['alpha']:.3f}, β = {p['beta']:.3f}, γ = {p['gamma']:.3f}; "
        f"{beyond}) is not drawn:\nit predicts QiD ≥ {min(lowest_predictions):.3g} everywhere on these axes "
        f"(their top is 30). Its β is {p['beta'] / law.UNIFIED_CONSTANTS['beta']:.1f}× the paper's."
    )


# Table 1, three ways beside the printed values (papers.md holds only its Δ = 0.2 row, 2- and 4-bit blocks).
TABLE1_PRINTED, TABLE1_UNIFIED = "paper Table 1 (printed)", "paper unified law"
TABLE1_PER_BITS, TABLE1_THIS_RUN = "paper per-bit-width law", "this run's fit"
TABLE1_UNBOUNDED = "β's CI reaches 0: no token count is bounded"
_TABLE1_RELABEL = {"paper Table 1": TABLE1_PRINTED, "unified law": TABLE1_UNIFIED, "per-bit-width law": TABLE1_PER_BITS}


def table1_frame(tables, fits):
    """Table 1 as a tidy frame: trillions of tokens to reach each QiD per model and bit width, from the paper's
    unified law, its per-bit-width laws, this run's unified fit (given `fits["qid"]`) and the printed values.
    D = (…)^(1/β) is unbounded where β's CI reaches 0: this run's rows are then NaN, with a note saying so."""
    paper = law.table1().assign(source=lambda f: f["source"].map(_TABLE1_RELABEL), note="")
    grid = paper[paper["source"] == TABLE1_UNIFIED].drop(columns="tokens_T")
    missing_3bit = grid[grid["bits"] == 3].assign(
        source=TABLE1_PER_BITS, tokens_T=np.nan, note="3-bit per-bit-width law: k not reported"
    )
    frames = [paper, missing_3bit]
    fit = fits.get("qid")
    if _beta_unbounded(fit):
        frames.append(grid.assign(source=TABLE1_THIS_RUN, tokens_T=np.nan, note=TABLE1_UNBOUNDED))
    elif fit is not None:
        tokens = law.tokens_to_reach(dict(fit.params), grid["delta"], grid["N"], grid["bits"]) / 1e12
        frames.append(grid.assign(source=TABLE1_THIS_RUN, tokens_T=np.asarray(tokens, dtype=float)))
    order = {
        source: rank for rank, source in enumerate((TABLE1_PRINTED, TABLE1_UNIFIED, TABLE1_PER_BITS, TABLE1_THIS_RUN))
    }
    frame = pd.concat(frames, ignore_index=True)
    frame = frame.assign(model_rank=frame["model"].map(list(law.MODELS).index), rank=frame["source"].map(order))
    return frame.sort_values(["bits", "model_rank", "rank", "delta"]).drop(columns=["model_rank", "rank"])


def table1_agreement(frame) -> dict:
    """Largest relative gap to the printed value, per (source, bits), over the printed entries."""
    printed = frame[frame["source"] == TABLE1_PRINTED].set_index(["bits", "model", "delta"])["tokens_T"]
    gaps = {}
    for (source, bits), rows in frame[frame["source"] != TABLE1_PRINTED].groupby(["source", "bits"]):
        rows = rows.set_index(["bits", "model", "delta"])["tokens_T"].reindex(printed.index).dropna()
        if len(rows):
            gaps[(source, bits)] = float((rows / printed[rows.index] - 1).abs().max())
    return gaps


def _beta_unbounded(fit) -> bool:
    """Whether this run's β CI reaches 0, where D = (…)^(1/β) has no bound."""
    return fit is not None and fit.ci["beta"][0] <= 0


def _unbounded_note(fit) -> str:
    if not _beta_unbounded(fit):
        return ""
    low, high = fit.ci["beta"]
    return f"\nThis run's fit: β = {fit.params['beta']:.3g} [{low:.3g}, {high:.3g}]; {TABLE1_UNBOUNDED}."


@figure(fits="ouyang2024/qid", law_only=True, frame=True)
def table1(tables, fits):
    """Table 1 rendered: trillions of tokens to reach each QiD, per source (the CSV holds the same rows)."""
    frame = table1_frame(tables, fits)
    rows_in_order = list(dict.fromkeys(zip(frame["bits"], frame["model"], frame["source"])))
    wide = frame.set_index(["bits", "model", "source", "delta"])["tokens_T"].unstack("delta").reindex(rows_in_order)
    fig, axes = new_figure(width=7.5, height=0.18 * len(wide) + 0.8)
    ax = axes[0][0]
    ax.axis("off")
    cells = [["—" if np.isnan(value) else f"{value:.4g}" for value in row] for row in wide.to_numpy()]
    rows = [f"{bits}-bit {model} · {source}" for bits, model, source in wide.index]
    table = ax.table(cellText=cells, rowLabels=rows, colLabels=[f"QiD {d}" for d in wide.columns], bbox=[0, 0, 1, 1])
    table.auto_set_font_size(False)
    table.set_fontsize(6)
    ax.set_title("Tokens (trillions) to reach a QiD — Ouyang et al. 2024, Table 1")
    gaps = table1_agreement(frame)
    paper_gaps = ", ".join(
        f"{source} {bits}-bit {gap:.1%}" for (source, bits), gap in sorted(gaps.items()) if source != TABLE1_THIS_RUN
    )
    run_gaps = ", ".join(
        f"{bits}-bit {gap:.1%}" for (source, bits), gap in sorted(gaps.items()) if source == TABLE1_THIS_RUN
    )
    add_footer(
        fig,
        f"Largest gap to the printed Δ = 0.2 entries: {paper_gaps}"
        + (f"; this run's fit {run_gaps}" if run_gaps else "")
        + ".\nPer-bit-width laws: 3/4-bit exponents as reported, 2-bit ones recovered by inverting the table; k "
        "fitted here to those printed entries,\nso Δ = 0.2 agrees partly by construction; 3-bit k not reported. "
        "—: not held (papers.md records only the Δ = 0.2 row of the 2- and 4-bit blocks).\n"
        "This run's fit comes from models under 1M parameters: at 1B–405B it extrapolates 4–7 decades in N."
        + _unbounded_note(fits.get("qid")),
    )
    flag_bounds(fig, {"this run's QiD fit": fits.get("qid")})
    return fig


# Study figures: read the ouyang2024 QiD table (`tables["evals"]`), one-factor fits (`tables["one_factor"]`),
# weight changes (`tables["weight_changes"]`) and the fitted laws (`fits["qid"]`, `fits["kaplan"]`, …).


def _gptq(tables, split="val", positive=True):
    table = tables["evals"]
    rows = table[(table["method"] == "gptq") & (table["split"] == split)]
    return rows[rows["delta"] > 0] if positive else rows


def _panels(count, **kwargs):
    return new_figure(count, 1, width=3.0, height=2.9, **kwargs)


# What every data-driven figure reads: the QiD table, the one-factor fits, the weight changes and the fitted laws.
study_figure = figure(
    tables={
        "evals": "ouyang2024",
        "one_factor": "ouyang2024/one_factor",
        "weight_changes": "ouyang2024/weight_changes",
    },
    fits="ouyang2024",
)


@study_figure
def fig2(tables, fits):
    """Post-quantization loss across training, one column per size: the QiD gap of GPTQ 2/3/4-bit to 16-bit on
    top, the losses themselves below (on a loss scale the quantized curves cover the 16-bit one, and an inset over
    the gaps would hide some of their points)."""
    table = tables["evals"]
    rows = table[(table["split"] == "val") & table["method"].isin(["gptq", "none"])]
    gaps = _gptq(tables)
    sizes = sorted(rows["N"].unique())
    fig, axes = new_figure(len(sizes), 2, width=3.0, height=2.5, sharex="col", sharey="row")
    palette = dict(zip((2, 3, 4, 16), sns.color_palette("mako", 4)))
    for column, n in enumerate(sizes):
        top, bottom = axes[0][column], axes[1][column]
        for bits, group in gaps[gaps["N"] == n].groupby("bits"):
            top.plot(group["D"], group["delta"], "o-", color=palette[bits], label=f"{bits}-bit")
        for bits, group in rows[rows["N"] == n].groupby("bits"):
            bottom.plot(group["D"], group["loss"], "o-", ms=3, lw=1, color=palette.get(bits, "0.5"),
                        label="16-bit" if bits == 16 else f"{bits}-bit")  # fmt: skip
        top.set(xscale="log", yscale="log", title=f"N = {n:,}", ylabel="QiD (Δ loss)" if column == 0 else "")
        bottom.set(xscale="log", xlabel="training tokens", ylabel="validation loss" if column == 0 else "")
    axes[0][0].legend(fontsize=6, loc="lower right")
    axes[1][0].legend(fontsize=6, loc="upper right")
    dropped = len(_gptq(tables, positive=False)) - len(gaps)
    add_footer(
        fig,
        "This run: intermediate (not annealed) trunk checkpoints, GPTQ weight-only; top: QiD = quantized − 16-bit loss"
        + (f" ({dropped} points with QiD ≤ 0 cannot be drawn on a log axis)" if dropped else "")
        + "; bottom: the losses, 16-bit included",
    )
    return fig


def _one_factor(tables, fits, factor, panel_by, hue, law_name, guide=None):
    """Figs. 3–5: QiD against one factor, panels and colours by the other two, lines = one-factor fits."""
    rows, fitted, law = _gptq(tables), tables["one_factor"], LAWS[f"ouyang2024.{law_name}"]
    fitted = fitted[fitted["law"] == law_name] if len(fitted) else fitted
    panels = sorted(rows[panel_by].unique())
    fig, axes = _panels(len(panels), sharey=True)
    for ax, value in zip(axes[0], panels):
        subset = rows[rows[panel_by] == value]
        palette = dict(zip(sorted(subset[hue].unique()), sns.color_palette("viridis", subset[hue].nunique())))
        sns.scatterplot(subset, x=factor, y="delta", hue=hue, palette=palette, ax=ax, legend=value == panels[0])
        x = np.geomspace(subset[factor].min(), subset[factor].max(), 40)
        for record in fitted[fitted[panel_by] == value].itertuples() if len(fitted) else []:
            key = getattr(record, hue)
            if key in palette:
                ax.plot(x, law({p: getattr(record, p) for p in law.param_names}, {factor: x}), color=palette[key])
        if guide is not None:
            # Anchored at the panel's geometric centre: only the slope is the paper's (its scale is not reported).
            centre = np.exp(np.log(subset[[factor, "delta"]]).mean())
            ax.plot(x, centre["delta"] * (x / centre[factor]) ** guide, ":", color="0.3", label=GUIDE_LABEL)
        ax.set(xscale="log", yscale="log", title=f"{panel_by} = {value:,}", ylabel="QiD")
        if factor == "P":
            _label_every_value(ax.xaxis, sorted(rows[factor].unique()))
    guide_note = (
        f"; dotted: the paper's slope {factor}^{guide:.2f}, a guide through the panel's centre" if guide else ""
    )
    add_footer(fig, f"This run, GPTQ; lines: {law.formula} fitted per group{guide_note}")
    return fig


def _label_every_value(axis, values) -> None:
    """Bit widths span under a decade: label each on the log axis (a log axis would label only 2)."""
    axis.set_major_locator(FixedLocator(values))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


@study_figure
def fig3(tables, fits):
    """QiD against training tokens, per size (panels) and bits (colours), beside the paper's slope."""
    return _one_factor(tables, fits, "D", "N", "bits", "qid_tokens", guide=law.TOKENS_EXPONENT)


@study_figure
def fig4(tables, fits):
    """QiD against model size, per bits (panels) and training tokens (colours)."""
    return _one_factor(tables, fits, "N", "bits", "D", "qid_size")


@study_figure
def fig5(tables, fits):
    """QiD against bit width, per size (panels) and training tokens (colours)."""
    return _one_factor(tables, fits, "P", "N", "D", "qid_bits")


@study_figure
def fig6(tables, fits):
    """The unified law k·D^β/(N^α·P^γ): measured QiD and the fit, per bit width."""
    rows, fit = _gptq(tables), fits.get("qid")
    bits = sorted(rows["bits"].unique())
    fig, axes = _panels(len(bits), sharey=True)
    for ax, b in zip(axes[0], bits):
        subset = rows[rows["bits"] == b]
        palette = dict(zip(sorted(subset["N"].unique()), sns.color_palette("viridis", subset["N"].nunique())))
        sns.scatterplot(subset, x="D", y="delta", hue="N", palette=palette, ax=ax, legend=b == bits[0])
        if fit is not None:
            x = np.geomspace(subset["D"].min(), subset["D"].max(), 40)
            for n, color in palette.items():
                ax.plot(x, fit.predict({"N": np.full_like(x, n), "D": x, "P": np.full_like(x, b)}), color=color)
        ax.set(xscale="log", yscale="log", title=f"{b}-bit", ylabel="QiD")
    add_footer(fig, "This run; lines: unified QiD fit" + (f", R² = {fit.r2:.2f}" if fit else " (no fit)"))
    flag_bounds(fig, {"this run's QiD fit": fit})
    return fig


@study_figure
def fig7(tables, fits):
    """Predicted quantized loss (Kaplan-form 16-bit law + unified QiD) against the measured one, and the QiD part
    alone: on the loss scale the 16-bit law's spread hides the quantization gap."""
    rows, qid, kaplan = _gptq(tables, positive=False), fits.get("qid"), fits.get("kaplan")
    fig, axes = new_figure(2, 1, width=4.0, height=3.6)
    if qid is None or kaplan is None:
        axes[0][0].text(0.5, 0.5, "no fit available", ha="center", transform=axes[0][0].transAxes)
        return fig
    rows = rows.assign(predicted_qid=qid.predict(rows.assign(P=rows["bits"])))
    rows = rows.assign(predicted=kaplan.predict(rows) + rows["predicted_qid"])
    loss_ax, gap_ax = axes[0]
    bits = sorted(rows["bits"].unique())
    palette = dict(zip(bits, series_palette("rocket", len(bits))))
    sns.scatterplot(rows, x="predicted", y="loss", hue="bits", style="size", palette=palette, ax=loss_ax, legend=False)
    positive = rows[rows["delta"] > 0]
    sns.scatterplot(positive, x="predicted_qid", y="delta", hue="bits", style="size", palette=palette, ax=gap_ax)
    for ax, (low, high) in (
        (loss_ax, (rows["loss"].min(), rows["loss"].max())),
        (gap_ax, (positive[["delta", "predicted_qid"]].min().min(), positive[["delta", "predicted_qid"]].max().max())),
    ):
        ax.plot([low, high], [low, high], color="0.5", lw=1)
    loss_ax.set(xlabel="predicted quantized loss", ylabel="measured quantized loss", title="16-bit law + QiD law")
    gap_ax.set(xscale="log", yscale="log", xlabel="predicted QiD", ylabel="measured QiD", title="the QiD part alone")
    add_footer(
        fig,
        "This run: Kaplan-form fit to the unquantized losses plus the unified QiD fit"
        f"; right: {len(positive)} of {len(rows)} points (QiD > 0, drawable on log axes)",
    )
    flag_bounds(fig, {"this run's QiD fit": qid, "this run's Kaplan-form fit": kaplan})
    return fig


@study_figure
def fig8(tables, fits):
    """QiD on the in-domain held-out set and on out-of-domain technical English."""
    rows = pd.concat([_gptq(tables, "val"), _gptq(tables, "ood")])
    fig, axes = _panels(2, sharey=True)
    bits = sorted(rows["bits"].unique())
    palette = dict(zip(bits, series_palette("mako", len(bits))))
    for ax, split in zip(axes[0], ("val", "ood")):
        subset = rows[rows["split"] == split]
        sns.lineplot(
            subset,
            x="D",
            y="delta",
            hue="bits",
            style="size",
            marker="o",
            ax=ax,
            legend=split == "val",
            palette=palette,
        )
        ax.set(
            xscale="log",
            yscale="log",
            title={"val": "in-domain (held-out classics)", "ood": "out-of-domain (Django docs)"}[split],
            ylabel="QiD",
        )
    add_footer(fig, "This run, GPTQ weight-only")
    return fig


@study_figure
def fig9(tables, fits):
    """GPTQ vs AWQ vs bitsandbytes-style FP4 at 4 bits, with a k·D^β/N^α fit per method."""
    table = tables["evals"]
    rows = table[(table["split"] == "val") & (table["bits"] == 4) & (table["method"] != "none")]
    rows = rows[rows["delta"] > 0].assign(quantizer=lambda f: f["method"] + " " + f["spec"])
    sizes = sorted(rows["N"].unique())
    fig, axes = _panels(len(sizes), sharey=True)
    palette = dict(zip(sorted(rows["quantizer"].unique()), sns.color_palette(n_colors=rows["quantizer"].nunique())))
    for ax, n in zip(axes[0], sizes):
        subset = rows[rows["N"] == n]
        sns.scatterplot(subset, x="D", y="delta", hue="quantizer", palette=palette, ax=ax, legend=n == sizes[0])
        x = np.geomspace(rows["D"].min(), rows["D"].max(), 40)
        for quantizer, color in palette.items():
            fit = fits.get("compare_" + quantizer.replace(" ", "_").replace(":", "_"))
            if fit is not None:
                ax.plot(x, fit.predict({"N": np.full_like(x, n), "D": x}), color=color)
        ax.set(xscale="log", yscale="log", title=f"N = {n:,}", ylabel="QiD")
    add_footer(fig, "This run; lines: k·D^β/N^α fitted per method (GPTQ line: from the compare fits when listed)")
    names = ["compare_" + quantizer.replace(" ", "_").replace(":", "_") for quantizer in palette]
    flag_bounds(fig, {f"this run's {name} fit": fits.get(name) for name in names})
    return fig


@study_figure
def fig11(tables, fits):
    """Every (N, D) point, coloured by bit width, marker size = QiD."""
    rows = _gptq(tables)
    fig, axes = new_figure(width=4.6, height=3.4)
    ax = axes[0][0]
    bits = sorted(rows["bits"].unique())
    palette = dict(zip(bits, series_palette("mako", len(bits))))
    sns.scatterplot(rows, x="D", y="N", hue="bits", size="delta", sizes=(10, 300), palette=palette, alpha=0.8, ax=ax)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="training tokens D",
        ylabel="non-embedding parameters N",
        title="QiD over (N, D)",
    )
    add_footer(fig, "This run, GPTQ")
    return fig


@study_figure
def fig12(tables, fits):
    """Relative weight change ‖W_t+1 − W_t‖/‖W_t‖ between adjacent checkpoints, per size."""
    changes = tables["weight_changes"]
    fig, axes = new_figure(width=5.4, height=3.4)
    ax = axes[0][0]
    changes = changes.assign(
        interval=changes["D_from"].map("{:,.0f}".format) + "→" + changes["D_to"].map("{:,.0f}".format)
    )
    sns.boxplot(changes, x="interval", y="relative_change", hue="size", ax=ax, fliersize=1)
    ax.set(yscale="log", xlabel="checkpoint interval (tokens)", ylabel="relative weight change")
    ax.tick_params(axis="x", rotation=30, labelsize=6)
    add_footer(fig, "This run: every weight matrix of each trunk, adjacent checkpoints")
    return fig


# Fig. 13 reads public facts only: each model's training tokens as its model card or paper states them.
OPEN_7B_MODELS = resources.files("qscaling.studies.ouyang2024") / "data" / "open_7b_models_tokens.csv"


def fig13_frame(tables, fits):
    """Training tokens of 7B-class open models by release year, one row per model with its source."""
    with resources.as_file(OPEN_7B_MODELS) as path:
        return pd.read_csv(path)


@figure(law_only=True, frame=True)
def fig13(tables, fits):
    """Training tokens of 7B-class open models by release year (bars, log scale); hatched: value not verified."""
    models = fig13_frame(tables, fits).sort_values(["year", "tokens_T"], kind="stable")
    fig, axes = new_figure(width=6.4, height=3.4)
    ax = axes[0][0]
    palette = dict(zip(sorted(models["year"].unique()), sns.color_palette("mako", models["year"].nunique())))
    for position, row in enumerate(models.itertuples()):
        ax.bar(position, row.tokens_T, color=palette[row.year], hatch="" if row.verified else "///", edgecolor="0.2")
        ax.text(position, row.tokens_T * 1.1, f"{row.tokens_T:g}", ha="center", fontsize=5)
    ax.set_xticks(range(len(models)), [f"{m} ({y})" for m, y in zip(models["model"], models["year"])])
    ax.tick_params(axis="x", rotation=60, labelsize=6)
    ax.set(yscale="log", ylabel="training tokens (trillions)", title="7B-class open models: training tokens by year")
    fig.subplots_adjust(bottom=0.32)  # the rotated model names stay inside the figure, above the footer
    add_footer(
        fig,
        "Values from each model's card or paper; the source of every bar is in fig13.csv beside this figure "
        "(src/qscaling/studies/ouyang2024/data/open_7b_models_tokens.csv); hatched: not verified against a stored copy.",
    )
    return fig


_PRECISION_STYLE = {"fp32": ("full precision (fp32)", "0.2"), "bitnet": ("BitNet b1.58 (ternary W, 8-bit A)", "C3")}


@figure(tables={"bitnet": "ouyang2024/bitnet"})
def fig14(tables, fits):
    """BitNet b1.58-style vs full-precision training loss over tokens, one column per size (top: the losses,
    averaged over equal token spans after warmup, ± their SE; bottom: the gap BitNet − fp32 for every seed)."""
    curves = tables["bitnet"]
    gaps = bitnet_gaps(curves)
    sizes = curves[["N", "size"]].drop_duplicates().sort_values("N")
    main_seed = curves.groupby("seed")["size"].nunique().idxmax()  # the recipe's seed: the one every size ran
    fig, axes = new_figure(len(sizes), 2, width=3.4, height=2.6, sharex="col")
    for column, (n, size) in enumerate(zip(sizes["N"], sizes["size"])):
        top, bottom = axes[0][column], axes[1][column]
        for precision, (label, color) in _PRECISION_STYLE.items():
            rows = curves[(curves["size"] == size) & (curves["precision"] == precision) & (curves["seed"] == main_seed)]
            top.errorbar(rows["D"], rows["loss"], yerr=rows["loss_se"], fmt="o-", ms=3, color=color, label=label)
        top.set(
            title=f"{size} (N = {compact_number(float(f'{n:.2g}'))})", ylabel="training loss" if column == 0 else ""
        )
        for seed, rows in gaps[gaps["size"] == size].groupby("seed"):
            style = "-" if seed == main_seed else "--"
            bottom.plot(rows["D"], rows["gap"], style, marker="o", ms=3, color="C3", label=f"seed {seed}")
            bottom.fill_between(
                rows["D"], rows["gap"] - rows["gap_se"], rows["gap"] + rows["gap_se"], color="C3", alpha=0.15
            )
        bottom.axhline(0, color="0.5", lw=0.8)
        bottom.set(xlabel="training tokens", ylabel="BitNet − fp32 loss" if column == 0 else "")
        bottom.xaxis.set_major_formatter(FuncFormatter(lambda value, _: compact_number(value)))
        bottom.legend(fontsize=6)
    axes[0][0].legend(fontsize=6)
    add_footer(
        fig,
        "This run: WSD trunks of one recipe, training loss per step averaged over equal token spans after warmup; "
        "BitNet: weights int2 per tensor, absmean scale, codes {−1, 0, 1}; activations int8 per token; identity STE "
        "(not its SubLN architecture). The paper (120M and 1.2B, Fig. 14) tabulates no values: none drawn.",
    )
    return fig
