"""Kumar et al. 2024 figures. Law-only ones draw Table 2's constants and, given `fits["neff"]` (a
kumar2024.neff fit), this run's fit."""

import numpy as np
import seaborn as sns

from qscaling.figures import add_footer, figure, new_figure
from qscaling.laws import LAWS, compare_sources
from qscaling.laws import kumar2024 as law

_STYLE = {"paper": "-", "this run": "--"}
_LLAMA3 = {"Llama-3 8B": (8e9, 15e12), "Llama-3 70B": (70e9, 15e12)}  # ~15T training tokens (Meta, 2024)


def _sources(fits):
    fit = fits.get("neff")
    note = "Constants: Kumar et al. 2024, Table 2" + ("; dashed: this run's fit" if fit else "")
    return compare_sources(LAWS["kumar2024.neff"], fit), note


@figure(law_only=True)
def fig3_left(tables, fits):
    """N_eff/N against bits for weights, activations, KV cache, and all three at once (tied)."""
    sources, note = _sources(fits)
    fig, axes = new_figure(width=5.0, height=3.6)
    ax = axes[0][0]
    bits = np.linspace(3, 12, 200)
    for label, params in sources:
        curves = {f"P_{t}": law.precision_fraction(params, bits, t) for t in law.TENSORS}
        curves["tied (w, a, kv)"] = np.prod(list(curves.values()), axis=0)
        for color, (name, curve) in zip(sns.color_palette(), curves.items()):
            ax.plot(bits, curve, _STYLE[label], color=color, label=name if label == "paper" else None)
    ax.set(
        xlabel="training precision (bits)",
        ylabel="N_eff / N",
        ylim=(0, 1.02),
        title="Effective parameters per quantized tensor",
    )
    ax.legend()
    add_footer(fig, note)
    return fig


@figure(law_only=True)
def fig6_right(tables, fits, sizes=(1e9, 8e9, 70e9)):
    """Compute-optimal training precision P*(D) for a fixed model size; the joint optimum is flat at P*."""
    sources, note = _sources(fits)
    fig, axes = new_figure(width=5.0, height=3.6)
    ax = axes[0][0]
    tokens = np.logspace(9, 14, 60)
    for label, params in sources:
        for color, N in zip(sns.color_palette(), sizes):
            optimum = [law.fixed_size_optimal_precision(params, N, D) for D in tokens]
            ax.plot(tokens, optimum, _STYLE[label], color=color, label=f"N = {N:.0e}" if label == "paper" else None)
        ax.axhline(law.compute_optimal_precision(params), color="k", ls=_STYLE[label], lw=0.8)
        for name, (N, D) in _LLAMA3.items():
            ax.plot(D, law.fixed_size_optimal_precision(params, N, D), "*", color="k", ms=8)
            ax.annotate(name, (D, law.fixed_size_optimal_precision(params, N, D)), fontsize=6, ha="right", va="bottom")
    ax.set(
        xscale="log",
        xlabel="training tokens D",
        ylabel="compute-optimal precision P* (bits)",
        title="P* for fixed N (black line: N, D, P all free)",
    )
    ax.legend(fontsize=7)
    add_footer(fig, note)
    return fig


@figure(law_only=True)
def fig9(tables, fits, served=(0.0, 1e12, 1e13)):
    """Optimal P*, N*, D* against total cost when serving tokens is part of the cost (assumed cost model)."""
    sources, note = _sources(fits)
    fig, axes = new_figure(3, 1, width=3.6, height=3.2)
    costs = np.logspace(21, 27, 13)
    for label, params in sources:
        for color, served_tokens in zip(sns.color_palette(), served):
            optima = np.array([law.inference_aware_optimum(params, c, served_tokens) for c in costs])
            for ax, column in zip(axes[0], optima.T):
                ax.plot(
                    costs,
                    column,
                    _STYLE[label],
                    color=color,
                    label=f"{served_tokens:.0e} tokens served" if label == "paper" else None,
                )
    for ax, name in zip(axes[0], ("P* (bits)", "N*", "D*")):
        ax.set(xscale="log", yscale="log", xlabel="total cost (FLOP-equivalents)", ylabel=name)
    axes[0][0].legend(fontsize=6)
    fig.suptitle("Optimum with inference cost")
    add_footer(fig, note + "; assumed cost: (6/16)·N·D·P training + 2·N per token served in 16 bits")
    return fig


# Study figures: read the kumar2024 PTQ table (`tables["ptq"]`) and the δ_PTQ fits (`fits["ptq_<method>"]`).


def _ptq_rows(tables, method="gptq", main=True):
    table = tables["ptq"]
    rows = table[(table["split"] == "val") & table["method"].isin([method, "none"])]
    return rows[rows["main"]] if main else rows


def _series(rows):
    return rows.assign(series=rows["bits"].map(lambda b: "no PTQ" if b == 16 else f"INT{b}"))


def _series_order(rows):
    return [f"INT{b}" for b in sorted(set(rows["bits"]) - {16})] + ["no PTQ"]


@figure(tables={"ptq": "kumar2024"}, fits="kumar2024")
def fig1_left(tables, fits):
    """Smallest model: post-PTQ loss against tokens per parameter; ★ marks each format's best budget."""
    rows = _ptq_rows(tables)
    rows = _series(rows[rows["N"] == rows["N"].min()])
    fig, axes = new_figure(width=4.6, height=3.4)
    ax = axes[0][0]
    sns.lineplot(
        rows,
        x="tokens_per_param",
        y="loss",
        hue="series",
        hue_order=_series_order(rows),
        marker="o",
        palette="rocket",
        ax=ax,
    )
    for _, group in rows[rows["bits"] < 16].groupby("bits"):
        best = group.loc[group["loss"].idxmin()]
        if best["D"] < group["D"].max():
            ax.plot(best["tokens_per_param"], best["loss"], "*", color="black", markersize=10)
    ax.set(
        xscale="log",
        xlabel="tokens per parameter D/N",
        ylabel="validation loss after GPTQ",
        title=f"Post-train quantization, N = {int(rows['N'].iloc[0]):,}",
    )
    add_footer(fig, "This run; ★ = critical data size (more data makes the quantized model worse)")
    return fig


def _ptq_grid(tables, fits, method):
    """Top: post-PTQ loss vs D/N per size; bottom: δ_PTQ (log) with the fitted law as lines."""
    rows = _series(_ptq_rows(tables, method))
    fit = fits.get(f"ptq_{method}")
    sizes = sorted(rows["N"].unique())
    fig, axes = new_figure(len(sizes), 2, width=3.0, height=2.8, sharex=True)
    palette = dict(zip(_series_order(rows), sns.color_palette("rocket", len(_series_order(rows)))))
    for column, n in enumerate(sizes):
        size_rows = rows[rows["N"] == n]
        top, bottom = axes[0][column], axes[1][column]
        sns.lineplot(
            size_rows,
            x="tokens_per_param",
            y="loss",
            hue="series",
            palette=palette,
            marker="o",
            ax=top,
            legend=column == 0,
        )
        quantized = size_rows[(size_rows["bits"] < 16) & (size_rows["delta"] > 0)]
        sns.scatterplot(
            quantized, x="tokens_per_param", y="delta", hue="series", palette=palette, ax=bottom, legend=False
        )
        if fit is not None:
            grid = np.geomspace(size_rows["D"].min(), size_rows["D"].max(), 50)
            for bits in sorted(quantized["bits"].unique()):
                curve = fit.predict({"N": np.full_like(grid, n), "D": grid, "P_post": np.full_like(grid, bits)})
                bottom.plot(grid / n, curve, color=palette[f"INT{bits}"])
        top.set(xscale="log", title=f"N = {n:,}", ylabel="val loss" if column == 0 else "")
        bottom.set(xscale="log", yscale="log", xlabel="D / N", ylabel="δ_PTQ" if column == 0 else "")
    add_footer(
        fig,
        f"This run, {method.upper()} per-channel; lines: fitted δ_PTQ = C_T·D^γD/N^γN·e^(−P/γ)"
        + ("" if fit else " (no fit: too few points above the noise floor)"),
    )
    return fig


@figure(tables={"ptq": "kumar2024"}, fits="kumar2024")
def fig2(tables, fits):
    """Post-PTQ loss and δ_PTQ against D/N for every size (GPTQ)."""
    return _ptq_grid(tables, fits, "gptq")


@figure(tables={"ptq": "kumar2024"}, fits="kumar2024")
def fig10(tables, fits):
    """Fig. 2 with AWQ."""
    return _ptq_grid(tables, fits, "awq")


@figure(tables={"ptq": "kumar2024"}, fits="kumar2024")
def fig11(tables, fits):
    """Fig. 2 with round-to-nearest."""
    return _ptq_grid(tables, fits, "rtn")


@figure(tables={"ptq": "kumar2024"}, fits="kumar2024")
def fig12(tables, fits):
    """Schedule ablation: δ_PTQ still grows with D when the model is annealed by another schedule."""
    table = tables["ptq"]
    ablated = table[table["anneal"] != table.loc[table["main"], "anneal"].iloc[0]]
    rows = _ptq_rows(tables, main=False)
    rows = _series(rows[(rows["N"].isin(ablated["N"].unique())) & (rows["bits"] < 16) & (rows["delta"] > 0)])
    fig, axes = new_figure(width=4.6, height=3.4)
    ax = axes[0][0]
    sns.lineplot(rows, x="D", y="delta", hue="series", style="anneal", marker="o", palette="rocket", ax=ax)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="training tokens D",
        ylabel="δ_PTQ (GPTQ)",
        title=f"LR schedule ablation, N = {int(rows['N'].iloc[0]):,}",
    )
    add_footer(fig, "This run: wsd = cooldown branch from the stable trunk; cosine = one run per budget")
    return fig


@figure(tables={"ptq": "kumar2024"}, fits="kumar2024")
def fig19(tables, fits):
    """Predicted against measured δ_PTQ for every (N, D, bits), GPTQ."""
    rows = _ptq_rows(tables)
    rows = rows[(rows["bits"] < 16) & (rows["delta"] > 0)]
    fit = fits.get("ptq_gptq")
    fig, axes = new_figure(width=4.0, height=3.6)
    ax = axes[0][0]
    if fit is None:
        ax.text(0.5, 0.5, "no δ_PTQ fit (too few points above the noise floor)", ha="center", transform=ax.transAxes)
        return fig
    predicted = fit.predict({"N": rows["N"], "D": rows["D"], "P_post": rows["bits"]})
    sns.scatterplot(
        rows.assign(predicted=predicted, size_label=rows["size"]),
        x="predicted",
        y="delta",
        hue="size_label",
        style="bits",
        ax=ax,
    )
    low, high = rows["delta"].min(), rows["delta"].max()
    ax.plot([low, high], [low, high], color="0.5", lw=1)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="predicted δ_PTQ",
        ylabel="measured δ_PTQ",
        title=f"δ_PTQ fit, R² = {fit.r2:.2f} (log space)",
    )
    add_footer(fig, "This run, GPTQ; points at or below twice their paired noise are not shown nor fitted")
    return fig
