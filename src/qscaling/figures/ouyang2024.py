"""Ouyang et al. 2024 figures. Law-only ones draw the unified QiD law's constants and, given `fits["qid"]`
(an ouyang2024.qid fit), this run's fit."""

import numpy as np
import pandas as pd
import seaborn as sns

from qscaling.figures import add_footer, figure, new_figure
from qscaling.laws import LAWS, compare_sources
from qscaling.laws import ouyang2024 as law

_STYLE = {"paper": "-", "this run": "--"}
PYTHIA_VOCAB = 50277  # GPT-NeoX tokenizer: a uniform guess costs ln(50277) nats


@figure(fits="ouyang2024/qid", law_only=True)
def fig1(tables, fits, sizes=("7B", "70B", "405B")):
    """Predicted QiD against training tokens up to 1e14 per bit width; grey: worse than a uniform guess."""
    fit = fits.get("qid")
    sources = compare_sources(LAWS["ouyang2024.qid"], fit)
    sixteen_bit = LAWS["kaplan"].paper_params["ouyang2024"]
    fig, axes = new_figure(len(sizes), 1, width=3.4, height=3.2, sharey=True)
    tokens = np.logspace(9, 14, 100)
    for ax, model in zip(axes[0], sizes):
        N = np.full_like(tokens, law.MODELS[model])
        random_gap = np.log(PYTHIA_VOCAB) - LAWS["kaplan"](sixteen_bit, {"N": N, "D": tokens})
        ax.fill_between(tokens, random_gap, 100, color="0.85", label="worse than random")
        for label, params in sources:
            for color, bits in zip(sns.color_palette(), (2, 3, 4)):
                qid = law.qid(params, {"N": N, "D": tokens, "P": bits})
                ax.plot(tokens, qid, _STYLE[label], color=color, label=f"{bits}-bit" if label == "paper" else None)
        ax.set(xscale="log", yscale="log", ylim=(1e-3, 30), xlabel="training tokens", title=model)
    axes[0][0].set_ylabel("QiD (Δ loss)")
    axes[0][0].legend(fontsize=6)
    add_footer(
        fig,
        "Constants: Ouyang et al. 2024, unified law and 16-bit Kaplan-form loss"
        + ("; dashed: this run's fit" if fit else ""),
    )
    return fig


def table1_frame(tables, fits):
    """Table 1 as a tidy frame; with `fits["qid"]` the unified law uses this run's constants."""
    fit = fits.get("qid")
    return law.table1(unified=dict(fit.params) if fit else None)


@figure(fits="ouyang2024/qid", law_only=True, frame=True)
def table1(tables, fits):
    """Table 1 rendered: trillions of tokens to reach each QiD, per source (the CSV holds the same rows)."""
    frame = table1_frame(tables, fits)
    wide = frame.pivot_table(index=["bits", "model", "source"], columns="delta", values="tokens_T", sort=False)
    fig, axes = new_figure(width=7.5, height=0.18 * len(wide) + 0.8)
    ax = axes[0][0]
    ax.axis("off")
    cells = [[f"{value:.4g}" for value in row] for row in wide.to_numpy()]
    rows = [f"{bits}-bit {model} · {source}" for bits, model, source in wide.index]
    table = ax.table(cellText=cells, rowLabels=rows, colLabels=[f"QiD {d}" for d in wide.columns], loc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(6)
    ax.set_title("Tokens (trillions) to reach a QiD — Ouyang et al. 2024, Table 1")
    add_footer(fig, law.TABLE1_NOTE)
    return fig


# Study figures: read the ouyang2024 QiD table (`tables["evals"]`), one-factor fits (`tables["one_factor"]`),
# weight changes (`tables["weight_changes"]`) and the fitted laws (`fits["qid"]`, `fits["kaplan"]`, …).


def _gptq(tables, split="val", positive=True):
    table = tables["evals"]
    rows = table[(table["method"] == "gptq") & (table["split"] == split)]
    return rows[rows["delta"] > 0] if positive else rows


def _panels(count, **kwargs):
    return new_figure(count, 1, width=3.0, height=2.9, **kwargs)


@figure(
    tables={
        "evals": "ouyang2024",
        "one_factor": "ouyang2024/one_factor",
        "weight_changes": "ouyang2024/weight_changes",
    },
    fits="ouyang2024",
)
def fig2(tables, fits):
    """Post-quantization loss across training, one panel per size: GPTQ 2/3/4-bit and 16-bit."""
    table = tables["evals"]
    rows = table[(table["split"] == "val") & table["method"].isin(["gptq", "none"])]
    rows = rows.assign(series=rows["bits"].map(lambda b: "16-bit" if b == 16 else f"{b}-bit"))
    sizes = sorted(rows["N"].unique())
    fig, axes = _panels(len(sizes))
    for ax, n in zip(axes[0], sizes):
        sns.lineplot(
            rows[rows["N"] == n], x="D", y="loss", hue="series", marker="o", palette="mako", ax=ax, legend=n == sizes[0]
        )
        ax.set(xscale="log", title=f"N = {n:,}", xlabel="training tokens")
    add_footer(fig, "This run: intermediate (not annealed) trunk checkpoints, GPTQ weight-only")
    return fig


def _one_factor(tables, fits, factor, panel_by, hue, law_name):
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
        ax.set(xscale="log", yscale="log", title=f"{panel_by} = {value:,}", ylabel="QiD")
    add_footer(fig, f"This run, GPTQ; lines: {law.formula} fitted per group")
    return fig


@figure(
    tables={
        "evals": "ouyang2024",
        "one_factor": "ouyang2024/one_factor",
        "weight_changes": "ouyang2024/weight_changes",
    },
    fits="ouyang2024",
)
def fig3(tables, fits):
    """QiD against training tokens, per size (panels) and bits (colours)."""
    return _one_factor(tables, fits, "D", "N", "bits", "qid_tokens")


@figure(
    tables={
        "evals": "ouyang2024",
        "one_factor": "ouyang2024/one_factor",
        "weight_changes": "ouyang2024/weight_changes",
    },
    fits="ouyang2024",
)
def fig4(tables, fits):
    """QiD against model size, per bits (panels) and training tokens (colours)."""
    return _one_factor(tables, fits, "N", "bits", "D", "qid_size")


@figure(
    tables={
        "evals": "ouyang2024",
        "one_factor": "ouyang2024/one_factor",
        "weight_changes": "ouyang2024/weight_changes",
    },
    fits="ouyang2024",
)
def fig5(tables, fits):
    """QiD against bit width, per size (panels) and training tokens (colours)."""
    return _one_factor(tables, fits, "P", "N", "D", "qid_bits")


@figure(
    tables={
        "evals": "ouyang2024",
        "one_factor": "ouyang2024/one_factor",
        "weight_changes": "ouyang2024/weight_changes",
    },
    fits="ouyang2024",
)
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
    return fig


@figure(
    tables={
        "evals": "ouyang2024",
        "one_factor": "ouyang2024/one_factor",
        "weight_changes": "ouyang2024/weight_changes",
    },
    fits="ouyang2024",
)
def fig7(tables, fits):
    """Predicted quantized loss (Kaplan-form 16-bit law + unified QiD) against the measured one."""
    rows, qid, kaplan = _gptq(tables, positive=False), fits.get("qid"), fits.get("kaplan")
    fig, axes = new_figure(width=4.0, height=3.6)
    ax = axes[0][0]
    if qid is None or kaplan is None:
        ax.text(0.5, 0.5, "no fit available", ha="center", transform=ax.transAxes)
        return fig
    predicted = kaplan.predict(rows) + qid.predict(rows.assign(P=rows["bits"]))
    sns.scatterplot(rows.assign(predicted=predicted), x="predicted", y="loss", hue="bits", style="size", ax=ax)
    low, high = rows["loss"].min(), rows["loss"].max()
    ax.plot([low, high], [low, high], color="0.5", lw=1)
    ax.set(xlabel="predicted quantized loss", ylabel="measured quantized loss", title="16-bit law + QiD law")
    add_footer(fig, "This run: Kaplan-form fit to the unquantized losses plus the unified QiD fit")
    return fig


@figure(
    tables={
        "evals": "ouyang2024",
        "one_factor": "ouyang2024/one_factor",
        "weight_changes": "ouyang2024/weight_changes",
    },
    fits="ouyang2024",
)
def fig8(tables, fits):
    """QiD on the in-domain held-out set and on out-of-domain technical English."""
    rows = pd.concat([_gptq(tables, "val"), _gptq(tables, "ood")])
    fig, axes = _panels(2, sharey=True)
    for ax, split in zip(axes[0], ("val", "ood")):
        subset = rows[rows["split"] == split]
        sns.lineplot(
            subset, x="D", y="delta", hue="bits", style="size", marker="o", ax=ax, legend=split == "val", palette="mako"
        )
        ax.set(
            xscale="log",
            yscale="log",
            title={"val": "in-domain (held-out classics)", "ood": "out-of-domain (Django docs)"}[split],
            ylabel="QiD",
        )
    add_footer(fig, "This run, GPTQ weight-only")
    return fig


@figure(
    tables={
        "evals": "ouyang2024",
        "one_factor": "ouyang2024/one_factor",
        "weight_changes": "ouyang2024/weight_changes",
    },
    fits="ouyang2024",
)
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
    return fig


@figure(
    tables={
        "evals": "ouyang2024",
        "one_factor": "ouyang2024/one_factor",
        "weight_changes": "ouyang2024/weight_changes",
    },
    fits="ouyang2024",
)
def fig11(tables, fits):
    """Every (N, D) point, coloured by bit width, marker size = QiD."""
    rows = _gptq(tables)
    fig, axes = new_figure(width=4.6, height=3.4)
    ax = axes[0][0]
    sns.scatterplot(rows, x="D", y="N", hue="bits", size="delta", sizes=(10, 300), palette="mako", alpha=0.6, ax=ax)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="training tokens D",
        ylabel="non-embedding parameters N",
        title="QiD over (N, D)",
    )
    add_footer(fig, "This run, GPTQ")
    return fig


@figure(
    tables={
        "evals": "ouyang2024",
        "one_factor": "ouyang2024/one_factor",
        "weight_changes": "ouyang2024/weight_changes",
    },
    fits="ouyang2024",
)
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
