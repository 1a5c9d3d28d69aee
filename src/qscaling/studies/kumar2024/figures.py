"""Kumar et al. 2024 figures (figures/kumar2024/…). Law-only ones draw Table 2's constants and, where the
training-precision study runs, Table 2 with this run's precision sensitivities γ_x, n_x (`fits["neff_joint"]`) in
place of its own."""

import math

import numpy as np
import pandas as pd
import seaborn as sns

from qscaling.figures import add_footer, figure, new_figure
from qscaling.figures.caveats import extrapolation_note, flag_bounds, mark_extrapolation, seed_band, seed_band_note
from qscaling.laws import LAWS
from qscaling.laws import kumar2024 as law
from qscaling.studies.kumar2024.analysis import critical_tokens, fit_rows, schedule_ratio, seed_spread

PAPER = "kumar2024"
_STYLE = {"paper": "-", "this run": "--"}
_PTQ_PAPER = law.PTQ.paper_params["table2"]
_NEFF_PAPER = LAWS["kumar2024.neff"].default_paper_params()
_LLAMA3 = {"Llama-3 8B": (8e9, 15e12), "Llama-3 70B": (70e9, 15e12)}  # ~15T training tokens (Meta, 2024)
_JOINT_FIT = "kumar2024_training/neff_joint"
_SENSITIVITIES = [f"{name}_{tensor}" for tensor in law.TENSORS for name in ("gamma", "n")]
_GAPS = "; gaps in a dashed curve: no optimum between the lowest precision its γ_x, n_x allow and 64 bits"


def _sources(fits, drawn):
    """[(label, params)]: Table 2, then Table 2 with this run's joint fit's γ_x, n_x — the scale-free part of the
    law: its A, B, α, E come from models of ≤ 10⁵ parameters and are not carried to these N and D — and the note
    that says so, naming each γ_x, n_x the fit held at Table 2's value (`flag_joint_bounds` flags those on a
    bound) and where the figure draws them beyond the inputs the fit saw (`drawn`: {input: (low, high)})."""
    fit = fits.get("neff_joint")
    if fit is None:
        return [("paper", dict(_NEFF_PAPER))], "Constants: Kumar et al. 2024, Table 2"
    if fit.law.name != "kumar2024.neff":
        raise ValueError(f"fit for {fit.law.name!r} passed where a fit of 'kumar2024.neff' was expected")
    ours = {**_NEFF_PAPER, **{name: fit.params[name] for name in _SENSITIVITIES}}
    flags = [f"{name} held" for name in _SENSITIVITIES if fit.held_fixed(name)]
    flags += [beyond] if (beyond := extrapolation_note(fit, drawn)) else []
    fitted = ", ".join(f"{name} {fit.params[name]:.3g}" for name in _SENSITIVITIES)
    note = (
        "Solid: Kumar et al. 2024, Table 2; dashed: Table 2's A, B, α, E with this run's γ_x, n_x (neff_joint: "
        f"{fitted}{'; ' + ', '.join(flags) if flags else ''}"
        f"{'; ill-conditioned fit' if fit.ill_conditioned else ''})"
    )
    return [("paper", dict(_NEFF_PAPER)), ("this run", ours)], note


def flag_joint_bounds(fig, fits) -> None:
    """Flag the γ_x, n_x of this run's joint fit that sit on a bound: the law figures draw those alone."""
    flag_bounds(fig, {"this run's neff_joint fit": fits.get("neff_joint")}, drawn=_SENSITIVITIES)


@figure(law_only=True, fits=_JOINT_FIT)
def fig3_left(tables, fits):
    """N_eff/N against bits for weights, activations, KV cache, and all three at once (tied)."""
    bits = np.linspace(3, 12, 200)
    sources, note = _sources(fits, {f"P_{tensor}": (bits[0], bits[-1]) for tensor in law.TENSORS})
    fig, axes = new_figure(width=5.0, height=3.6)
    ax = axes[0][0]
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
    flag_joint_bounds(fig, fits)
    return fig


@figure(law_only=True, fits=_JOINT_FIT)
def fig6_right(tables, fits, sizes=(1e9, 8e9, 70e9)):
    """Compute-optimal training precision P*(D) for a fixed model size; the joint optimum is flat at P*."""
    tokens = np.logspace(9, 14, 60)
    sources, note = _sources(fits, {"N": (min(sizes), max(sizes)), "D": (tokens[0], tokens[-1])})
    fig, axes = new_figure(width=5.0, height=3.6)
    ax = axes[0][0]
    for label, params in sources:
        for color, N in zip(sns.color_palette(), sizes):
            optimum = [law.optimum_or_nan(law.fixed_size_optimal_precision, params, N, D) for D in tokens]
            ax.plot(tokens, optimum, _STYLE[label], color=color, label=f"N = {N:.0e}" if label == "paper" else None)
        star = law.optimum_or_nan(law.compute_optimal_precision, params)
        if math.isfinite(star):
            ax.axhline(star, color="k", ls=_STYLE[label], lw=0.8)
        for name, (N, D) in _LLAMA3.items():
            optimum = law.optimum_or_nan(law.fixed_size_optimal_precision, params, N, D)
            if math.isfinite(optimum):
                ax.plot(D, optimum, "*", color="k", ms=8)
                ax.annotate(name, (D, optimum), fontsize=6, ha="right", va="bottom")
    ax.set(
        xscale="log",
        xlabel="training tokens D",
        ylabel="compute-optimal precision P* (bits)",
        title="P* for fixed N (black line: N, D, P all free)",
    )
    ax.legend(fontsize=7)
    add_footer(fig, note + (_GAPS if len(sources) > 1 else ""))
    flag_joint_bounds(fig, fits)
    return fig


def _inference_optimum(params, cost, served_tokens) -> tuple[float, float, float]:
    """`law.inference_aware_optimum`, NaNs where the parameters give no interior optimum (no precision range to
    search, or the optimum on the range's end)."""
    try:
        return law.inference_aware_optimum(params, cost, served_tokens)
    except ValueError:
        return (math.nan,) * 3


@figure(law_only=True, fits=_JOINT_FIT)
def fig9(tables, fits, served=(0.0, 1e12, 1e13)):
    """Optimal P*, N*, D* against total cost when serving tokens is part of the cost (assumed cost model)."""
    costs = np.logspace(21, 27, 13)
    sources, _ = _sources(fits, {})
    fig, axes = new_figure(3, 1, width=3.6, height=3.2)
    ours = []  # this run's (P*, N*, D*) rows: the sizes and budgets its γ_x, n_x are carried to
    for label, params in sources:
        for color, served_tokens in zip(sns.color_palette(), served):
            optima = np.array([_inference_optimum(params, c, served_tokens) for c in costs])
            ours += list(optima) if label == "this run" else []
            for ax, column in zip(axes[0], optima.T):
                ax.plot(
                    costs,
                    column,
                    _STYLE[label],
                    color=color,
                    label=f"{served_tokens:.0e} tokens served" if label == "paper" else None,
                )
    solved = np.array([row for row in ours if np.isfinite(row).all()]).reshape(-1, 3)
    _, note = _sources(fits, {name: (solved[:, i].min(), solved[:, i].max()) for i, name in ((1, "N"), (2, "D"))}
                       if len(solved) else {})  # fmt: skip
    for ax, name in zip(axes[0], ("P* (bits)", "N*", "D*")):
        ax.set(xscale="log", yscale="log", xlabel="total cost (FLOP-equivalents)", ylabel=name)
    axes[0][0].legend(fontsize=6, loc="upper left")
    fig.suptitle("Optimum with inference cost")
    add_footer(
        fig,
        note + (_GAPS if len(sources) > 1 else "") + "; assumed cost: (6/16)·N·D·P training + 2·N per token served "
        "in 16 bits",
    )
    flag_joint_bounds(fig, fits)
    return fig


# Study figures: read the kumar2024 PTQ table (`tables["ptq"]`) and the δ_PTQ fits (`fits["ptq_<method>"]`).


def _ptq_rows(tables, method="gptq", main=True):
    table = tables["ptq"]
    rows = table[(table["split"] == "val") & table["method"].isin([method, "none"]) & ~table["repeat"]]
    return rows[rows["main"]] if main else rows


def _series(rows):
    return rows.assign(series=rows["bits"].map(lambda b: "no PTQ" if b == 16 else f"INT{b}"))


def _series_order(rows):
    return [f"INT{b}" for b in sorted(set(rows["bits"]) - {16})] + ["no PTQ"]


# What every data-driven figure reads: the PTQ table and the δ_PTQ fits.
study_figure = figure(tables={"ptq": "kumar2024"}, fits="kumar2024")


def seed_sd(table, method: str, bits: int) -> float:
    """`seed_spread`'s SD for (method, bits): relative for a δ, nats for the unquantized loss; NaN unmeasured."""
    spread = seed_spread(table)
    found = spread[(spread["method"] == method) & (spread["bits"] == bits)]
    return float(found["sd"].iloc[0]) if len(found) else math.nan


def seed_note(table, method: str, what: str) -> str:
    """The footer's account of the seed bands of `method` (`what` they are drawn on), or that none was measured."""
    spread = seed_spread(table)
    spread = spread[spread["method"] == method]
    if spread.empty:
        return seed_band_note(math.nan, "")
    first = spread.iloc[0]
    if method == "none":
        values = f"{first['sd']:.2g} nats"
    else:
        values = ", ".join(f"INT{int(row.bits)} {row.sd:.0%}" for row in spread.itertuples())
    return (
        f"pale bars: ± 2 σ_seed of {what} ({values}; MAD over {int(first['seeds'])} runs at {int(first['points'])} "
        f"point{'s' if first['points'] != 1 else ''} trained at other seeds, {first['dof']:.1f} dof)"
    )


def turn_ups(table, n) -> pd.DataFrame:
    """The formats of size `n` whose post-GPTQ loss is least before the largest budget (`critical_tokens`), with
    how much it rises from there to the largest budget (`rise`) and that rise's evaluation SE (`rise_se`)."""
    rows = _ptq_rows({"ptq": table})
    rows = rows[(rows["N"] == n) & (rows["bits"] < 16)]
    turns = critical_tokens(table)
    turns = turns[(turns["N"] == n) & (turns["bits"] < 16) & turns["turns_up"]]
    records = []
    for turn in turns.itertuples():
        group = rows[rows["bits"] == turn.bits].set_index("D").sort_index()
        best, last = group.loc[turn.D_best], group.iloc[-1]
        rise, rise_se = last["loss"] - best["loss"], float(np.hypot(last["loss_se"], best["loss_se"]))
        records.append({"bits": turn.bits, "D_best": turn.D_best, "loss_best": turn.loss_best, "rise": rise,
                        "rise_se": rise_se})  # fmt: skip
    return pd.DataFrame(records, columns=["bits", "D_best", "loss_best", "rise", "rise_se"])


@study_figure
def fig1_left(tables, fits):
    """Smallest model: post-PTQ loss against tokens per parameter, ± 2 s.e.; ★ marks each format's best budget
    where the loss then rises by more than twice that rise's SE (a critical data size), ☆ a rise within it."""
    rows = _ptq_rows(tables)
    rows = _series(rows[rows["N"] == rows["N"].min()])
    n = rows["N"].iloc[0]
    fig, axes = new_figure(width=4.6, height=3.4)
    ax = axes[0][0]
    order = _series_order(rows)
    for series, colour in zip(order, sns.color_palette("rocket", len(order))):
        points = rows[rows["series"] == series].sort_values("tokens_per_param")
        ax.errorbar(points["tokens_per_param"], points["loss"], yerr=2 * points["loss_se"], marker="o", ms=4,
                    capsize=0, color=colour, label=series)  # fmt: skip
        loss_sd = seed_sd(tables["ptq"], "none", 16)
        if series != "no PTQ":  # a post-PTQ loss moves with its checkpoint's loss and with its δ: both, at most
            loss_sd = loss_sd + seed_sd(tables["ptq"], "gptq", int(series[3:])) * (points["loss"] - points["base_loss"])
        seed_band(ax, points["tokens_per_param"], points["loss"], loss_sd, colour)
    turns = turn_ups(tables["ptq"], n)
    labels = {True: "critical data size (rise > 2 s.e.)", False: "rise within 2 s.e.: noise, not a turn"}
    for turn in turns.itertuples():
        clear = bool(turn.rise > 2 * turn.rise_se)
        ax.plot(turn.D_best / n, turn.loss_best, "*", color="black", markersize=11, zorder=3,
                markerfacecolor="black" if clear else "none", label=labels.pop(clear, None))  # fmt: skip
    if turns.empty:
        ax.text(0.03, 0.04, f"no format's loss turns up within the grid (D/N ≤ {rows['tokens_per_param'].max():.0f})",
                transform=ax.transAxes, fontsize=7)  # fmt: skip
    ax.set(xscale="log", xlabel="tokens per parameter D/N", ylabel="validation loss after GPTQ",
           title=f"Post-train quantization, N = {int(n):,}")  # fmt: skip
    ax.legend(fontsize=6)
    rises = "; ".join(f"INT{t.bits} rises {t.rise:.3g} ± {2 * t.rise_se:.2g}" for t in turns.itertuples())
    add_footer(
        fig,
        "This run; error bars: ± 2 s.e. over held-out windows. Each budget is a separately annealed run;\n"
        + seed_note(tables["ptq"], "none", "the unquantized loss")
        + ", plus that of δ after PTQ.\nA turn: loss at the largest budget less the least loss"
        + (f" ({rises} nats)" if rises else ""),
    )
    return fig


def _paper_exponent_guide(ax, x, y, span):
    """The paper's δ ∝ D^γ_D (Table 2) through the geometric centre of the (x, y) points, over `span` of x.
    Within one size, D/N ∝ D, so the same exponent holds against D/N."""
    centre_x, centre_y = np.exp(np.mean(np.log(x))), np.exp(np.mean(np.log(y)))
    grid = np.geomspace(*span, 50)
    gamma = _PTQ_PAPER["gamma_D"]
    ax.plot(grid, centre_y * (grid / centre_x) ** gamma, ":", color="black", lw=1.2, label=f"paper D^{gamma:.2f}")


def _ptq_grid(tables, fits, method):
    """Top: δ_PTQ on a linear axis with ±2 paired SE, every point; bottom: δ_PTQ > 0 on log axes, with this
    run's fitted law and the paper's exponent as a guide."""
    rows = _series(_ptq_rows(tables, method))
    quantized_rows = rows[rows["bits"] < 16]
    fit = fits.get(f"ptq_{method}")
    sizes = sorted(rows["N"].unique())
    fig, axes = new_figure(len(sizes), 2, width=3.0, height=2.8, sharex=True)
    order = _series_order(rows)[:-1]
    palette = dict(zip(order, sns.color_palette("rocket", len(order) + 1)))
    for column, n in enumerate(sizes):
        size_rows = quantized_rows[quantized_rows["N"] == n]
        top, bottom = axes[0][column], axes[1][column]
        for series in order:
            points = size_rows[size_rows["series"] == series]
            x, y = points["tokens_per_param"], points["delta"]
            top.plot(x, y, marker="o", ms=3, color=palette[series], label=series)
            top.errorbar(x, y, yerr=2 * points["delta_se"], fmt="none", color=palette[series])
            relative = seed_sd(tables["ptq"], method, int(series[3:]))
            seed_band(top, x, y, relative * y.abs(), palette[series])
        top.axhline(0, color="0.5", lw=0.8)
        top.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))  # short labels in narrow panels
        positive = size_rows[size_rows["delta"] > 0]
        sns.scatterplot(
            positive, x="tokens_per_param", y="delta", hue="series", palette=palette, ax=bottom, legend=False
        )
        span = (size_rows["tokens_per_param"].min(), size_rows["tokens_per_param"].max())
        if fit is not None:
            grid = np.geomspace(size_rows["D"].min(), size_rows["D"].max(), 50)
            for bits in sorted(positive["bits"].unique()):
                curve = fit.predict({"N": np.full_like(grid, n), "D": grid, "P_post": np.full_like(grid, bits)})
                bottom.plot(grid / n, curve, color=palette[f"INT{bits}"], label=f"this run's fit, INT{bits}")
        if len(positive):
            _paper_exponent_guide(bottom, positive["tokens_per_param"], positive["delta"], span)
        top.set(xscale="log", title=f"N = {n:,}", ylabel="δ_PTQ (nats, ±2 SE)" if column == 0 else "")
        bottom.set(xscale="log", yscale="log", xlabel="D / N", ylabel="δ_PTQ (log, > 0 only)" if column == 0 else "")
        if fit is not None:
            mark_extrapolation(bottom, fit, "D", (span[0], span[1]), to_axis=lambda D, n=n: D / n)
    axes[0][0].legend(fontsize=6, loc="upper left")
    # Beside the last panel, not in the first: a point of every size can sit wherever a legend inside would go.
    entries = {label: handle for ax in axes[1] for handle, label in zip(*ax.get_legend_handles_labels())}
    axes[1][-1].legend(entries.values(), entries.keys(), fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1),
                       borderaxespad=0)  # fmt: skip
    add_footer(
        fig,
        f"Points: this run, {method.upper()} per-channel. Solid lines: this run's fitted δ_PTQ = C_T·D^γD/N^γN·e^(−P/γ)"
        + ("" if fit else " (no fit: too few points above the noise floor)")
        + f";\ndotted: the paper's exponent γ_D = {_PTQ_PAPER['gamma_D']} (Kumar et al. Table 2), drawn through"
        " the points' geometric centre (a slope guide, not a prediction).\nError bars: ± 2 s.e. over held-out"
        " windows. Each (N, D) is a separately trained run: " + seed_note(tables["ptq"], method, "δ, relative") + ".",
    )
    flag_bounds(fig, {f"this run's {method.upper()} δ_PTQ fit": fit})
    return fig


@study_figure
def fig2(tables, fits):
    """δ_PTQ against D/N for every size (GPTQ): linear with noise bars, and log with the fitted law."""
    return _ptq_grid(tables, fits, "gptq")


@study_figure
def fig10(tables, fits):
    """Fig. 2 with AWQ."""
    return _ptq_grid(tables, fits, "awq")


@study_figure
def fig11(tables, fits):
    """Fig. 2 with round-to-nearest."""
    return _ptq_grid(tables, fits, "rtn")


@study_figure
def fig12(tables, fits):
    """Annealing-schedule ablation, WSD cooldown against cosine (the paper's Fig. 12 uses linear decay instead):
    δ_PTQ against D under both, and the ratio of their mean δ."""
    table = tables["ptq"]
    ablated = table[(table["anneal"] != table.loc[table["main"], "anneal"].iloc[0]) & ~table["repeat"]]
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
        title=f"Annealing schedule: WSD cooldown vs cosine, N = {int(rows['N'].iloc[0]):,}",
    )
    ratio = schedule_ratio(table)
    summary = (
        f"\nmean δ {ratio['other']}/{ratio['main']} = {ratio['ratio']:.2f}, 95 % CI [{ratio['low']:.2f}, "
        f"{ratio['high']:.2f}] over {ratio['cells']} matched (D, bits) cells"
        if ratio
        else ""
    )
    add_footer(
        fig,
        "This run's ablation, not the paper's linear-decay one: wsd = constant LR, then a linear cooldown\n"
        "branched from the stable trunk; cosine = one run per budget" + summary,
    )
    return fig


@study_figure
def fig19(tables, fits):
    """Predicted against measured δ_PTQ for every (N, D, bits) point the GPTQ law was fitted on."""
    quantized = _ptq_rows(tables)
    quantized = quantized[quantized["bits"] < 16]
    rows = fit_rows(tables["ptq"], "gptq")
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
    ax.legend(loc="lower right", fontsize=7)  # points lie along the diagonal: that corner stays empty
    low, high = rows["delta"].min(), rows["delta"].max()
    ax.plot([low, high], [low, high], color="0.5", lw=1)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="predicted δ_PTQ",
        ylabel="measured δ_PTQ",
        title=f"δ_PTQ fit, R² = {fit.r2:.2f} (log space)",
    )
    left_out = len(quantized) - len(rows)
    add_footer(
        fig,
        f"This run, GPTQ; {left_out} of {len(quantized)} points, at or below twice their paired noise,"
        " are neither shown nor fitted",
    )
    flag_bounds(fig, {"this run's GPTQ δ_PTQ fit": fit})
    return fig
