"""Ahmadian et al. 2023's figures and tables (figures/ahmadian2023/…), from the study table (`tables["evals"]`:
one row per variant, checkpoint and method), the per-block proxies (`tables["proxies"]`) and one block's weights
(`tables["values"]`).

"% change" is the paper's headline: the mean over tasks of the relative accuracy change after quantization; error
bars are 95 % intervals of the paired per-item (accuracy) or per-window (loss) differences, evaluation noise; the
pale bars beside them are the seed band, ± 2 σ_seed over the final recipe's extra seeds, because every ablation
level is a run of its own.
"""

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import MaxNLocator

from qscaling.figures import add_footer, figure, new_figure
from qscaling.figures.caveats import SEED_BAND_LABEL, seed_band

PAPER = "ahmadian2023"

PROXIES = {
    "rmse": "W8A8 RMSE of QKV input",
    "act_std": "mean per-token activation std",
    "gain_std": "std of norm gains",
    "spectral_norm": "spectral norm of W_qkv",
}
# The one-factor ablations, in the paper's order (`factor` column of the study table).
FACTOR_TITLES = {
    "weight_decay": "weight decay",
    "dropout": "dropout",
    "grad_clip": "gradient clipping",
    "precision": "training precision",
}
FACTORS = tuple(FACTOR_TITLES)
METHOD_LABELS = {"none": "unquantized", "w8a8": "W8A8", "rtn": "W4"}
# The paper's ablation results: mean % change of zero-shot accuracy after W8A8 (6B, 75k steps), Sec. 3 / Figs. 2–3.
PAPER_ABLATIONS = {
    ("weight_decay", "0.001", ""): -1.36,
    ("weight_decay", "0.01", ""): -0.26,
    ("weight_decay", "0.1", ""): -0.09,
    ("dropout", "0", ""): 0.32,
    ("dropout", "0.1", ""): 0.31,
    ("dropout", "0.4", ""): -0.27,
    ("dropout", "0.8", ""): -0.57,
    ("grad_clip", "none", ""): -1.36,
    ("grad_clip", "1", ""): 0.41,
    ("precision", "bf16", "wd 0.1"): 0.32,
    ("precision", "fp16", "wd 0.1"): -0.76,
    ("precision", "bf16", "wd 0.01"): 0.77,
    ("precision", "fp16", "wd 0.01"): -1.73,
}
# Table 4: 8-task mean accuracy (%), unquantized / W8A8 / W4. (The text's 52B "0.24 %" contradicts the table.)
PAPER_TABLE4 = {
    "410M": (59.36, 58.85, 55.93),
    "6B": (72.67, 72.18, 66.74),
    "13B": (72.83, 72.59, 65.92),
    "52B": (77.31, 77.39, 73.72),
}


def _footer(fig, table: pd.DataFrame, extra: str = "") -> None:
    emulated = (
        "; bf16/fp16 emulated on CPU (Linear inputs and weights rounded in the forward pass)"
        if table["emulated"].any()
        else ""
    )
    fig.tight_layout()  # panels spaced so rotated tick labels and titles clear their neighbours
    add_footer(fig, f"This run, one seed per recipe{emulated}. {extra}".strip())


def seed_sd(table: pd.DataFrame, column: str, method: str = "w8a8") -> float:
    """σ_seed of `column` under `method`: its SD over the final recipe's runs at the size the extra seeds repeat —
    the runs the claims' seed noise (`claims.seed_noise`) spreads W8A8 δ over. NaN with fewer than two."""
    final = table[table["final"] & (table["method"] == method)]
    seeds = final[final["factor"] == "seed"]
    runs = pd.concat([seeds, final[(final["factor"] == "recipe") & final["size"].isin(seeds["size"])]])
    values = runs.drop_duplicates("run")[column].to_numpy(float)
    return float(np.std(values, ddof=1)) if len(values) >= 2 else math.nan


SEED_SOURCE = "the SD over the final recipe's seeds"
TASK_COLUMNS = ("acc_lastword", "acc_continuation", "acc_cloze")


def items_per_task(rows: pd.DataFrame) -> int:
    """How many items each task scored: the common denominator of every task accuracy (a count of right answers
    over the items), which the table keeps instead of the count itself."""
    values = rows[[c for c in TASK_COLUMNS if c in rows]].to_numpy(float).ravel()
    return math.lcm(*(Fraction(v).limit_denominator(100_000).denominator for v in values if np.isfinite(v)))


def accuracy_se(rows: pd.DataFrame, items: int) -> np.ndarray:
    """Binomial standard error of each row's mean task accuracy: √(Σ_t p_t(1 − p_t) / n) / T over its T tasks of
    n items."""
    tasks = rows[[c for c in TASK_COLUMNS if c in rows]].to_numpy(float)
    return np.sqrt((tasks * (1 - tasks)).sum(axis=1) / items) / tasks.shape[1]


def _not_measured(what: str):
    """A figure saying what this scale does not measure (released checkpoints have no training ablations)."""
    fig, axes = new_figure()
    axes[0][0].axis("off")
    axes[0][0].text(0.5, 0.5, f"{what}: not measured at this scale", ha="center", va="center")
    return fig


def _seed_note(table, columns=(("% change", "pct_change"), ("loss δ", "delta"))) -> str:
    """The footer's account of the error bars and of the seed band, in the units of each panel (`columns`: (name,
    column) of what the panels plot)."""
    spreads = [f"{seed_sd(table, column):.2g} of {name}" for name, column in columns]
    if not all(np.isfinite(seed_sd(table, column)) for _, column in columns):
        return "Error bars: 95 % evaluation intervals; one seed per recipe: no seed band."
    return f"Error bars: 95 % evaluation intervals; pale bars: {SEED_BAND_LABEL}, σ_seed {', '.join(spreads)} ({SEED_SOURCE})."


def _final(table, method=None, factors=FACTORS):
    rows = table[table["final"] & table["factor"].isin(factors)]
    return rows if method is None else rows[rows["method"] == method]


def _bars(ax, rows, value, se, sd, paper=None):
    """Bars per level (hue: group) with 95 % error bars and the seed band (`sd`: σ_seed of `value`), the paper's
    values as black diamonds."""
    labels = [f"{r.level}{' · ' + r.group if r.group else ''}" for r in rows.itertuples()]
    x = np.arange(len(rows))
    ax.bar(x, rows[value], yerr=1.96 * rows[se].fillna(0), color=sns.color_palette()[0], capsize=2, label="this run")
    seed_band(ax, x, rows[value], sd, sns.color_palette()[0])
    if paper is not None:
        ax.scatter(
            x,
            [PAPER_ABLATIONS.get((r.factor, r.level, r.group), np.nan) for r in rows.itertuples()],
            marker="D",
            color="black",
            zorder=3,
            label="paper (6B)",
        )
    ax.axhline(0, color="0.3", lw=0.8)
    ax.set_xticks(x, labels, rotation=30, ha="right")


# What every figure and table of the study reads.
STUDY_TABLES = {"evals": "ahmadian2023", "proxies": "ahmadian2023/proxies", "values": "ahmadian2023/values"}


# What Fig. 1 compares: this run's recipe against one prone to outliers, or at paper scale the released OPT models.
RECIPE_NAMES = {"recipe": "final recipe", "outlier_prone": "outlier-prone (OPT's stand-in)", "released": "OPT"}


def _recipes_panel(ax, rows, evals, column, yerr):
    """`column` against N per recipe and method (solid unquantized, dashed W8A8) with its 95 % error bars (`yerr`
    per row) and seed band."""
    colours = dict(zip(RECIPE_NAMES, sns.color_palette()))
    for (factor, method), group in rows.groupby(["factor", "method"], sort=False):
        chosen = group.sort_values("N")
        ax.errorbar(chosen["N"], chosen[column], yerr=yerr.loc[chosen.index], fmt="o-" if method == "none" else "x--",
                    ms=4, capsize=0, color=colours[factor], label=f"{RECIPE_NAMES[factor]}, {METHOD_LABELS[method]}")  # fmt: skip
    for (factor, method), group in rows.groupby(["factor", "method"], sort=False):
        seed_band(ax, group["N"], group[column], seed_sd(evals, column, method), colours[factor])
    ax.set(xscale="log", xlabel="non-embedding parameters N")
    ax.legend(fontsize=6)


def _paper_panel(ax):
    """Table 4's W8A8 change of the 8-task mean accuracy, per size of the paper's recipe."""
    changes = [100 * (w8a8 / base - 1) for base, w8a8, _ in PAPER_TABLE4.values()]
    ax.bar(range(len(changes)), changes, color="0.35", label="paper, Table 4")
    ax.set_xticks(range(len(changes)), list(PAPER_TABLE4))
    ax.axhline(0, color="0.3", lw=0.8)
    ax.set(xlabel="model size (their recipe)", ylabel="% change of mean accuracy", title="paper: W8A8, Table 4")


@figure(tables=STUDY_TABLES)
def fig1(tables, fits):
    """Mean task accuracy against size, unquantized and W8A8, and the % change W8A8 makes: this run's recipe beside
    the outlier-prone one standing in for OPT (the released OPT models at paper scale), and the paper's Table 4."""
    evals = tables["evals"]
    rows = _final(evals, factors=list(RECIPE_NAMES))
    rows = rows[rows["method"].isin(["none", "w8a8"])]
    fig, axes = new_figure(3, 1, width=3.6, height=3.2)
    accuracy, change, paper = axes[0]
    items = items_per_task(rows)
    _recipes_panel(accuracy, rows, evals, "mean_acc", pd.Series(1.96 * accuracy_se(rows, items), rows.index))
    accuracy.set(ylabel=f"mean accuracy ({len(TASK_COLUMNS)} tasks)", title="accuracy")
    quantized = rows[rows["method"] == "w8a8"]
    _recipes_panel(change, quantized, evals, "pct_change", 1.96 * quantized["pct_change_se"].fillna(0))
    change.axhline(0, color="0.3", lw=0.8)
    change.set(ylabel="% change after W8A8", title="this run: W8A8")
    _paper_panel(paper)
    columns = (("mean accuracy", "mean_acc"), ("% change", "pct_change"))
    _footer(
        fig,
        rows,
        f"Tasks built from held-out text, {items} items each, scored by lm-evaluation-harness; accuracy: binomial "
        f"errors over the items, % change: paired per item. {_seed_note(evals, columns)}\nThe paper's Fig. 1 sets its "
        "recipe against OPT, whose W8A8 accuracy drops beyond 6B; it prints no OPT numbers, so the outlier-prone "
        "recipe (low weight decay, no clipping, fp16) stands in for OPT here.",
    )
    return fig


@figure(tables=STUDY_TABLES)
def fig2(tables, fits):
    """% accuracy change (top) and loss δ (bottom) after W8A8 for weight decay, dropout and clipping."""
    rows = _final(tables["evals"], "w8a8", ("weight_decay", "dropout", "grad_clip"))
    factors = [f for f in ("weight_decay", "dropout", "grad_clip") if f in set(rows["factor"])]
    if not factors:
        return _not_measured("training-choice ablations")
    fig, axes = new_figure(len(factors), 2, width=3.0, height=2.6)
    for column, factor in enumerate(factors):
        subset = rows[rows["factor"] == factor]
        _bars(axes[0][column], subset, "pct_change", "pct_change_se", seed_sd(tables["evals"], "pct_change"), True)
        _bars(axes[1][column], subset, "delta", "delta_se", seed_sd(tables["evals"], "delta"))
        axes[0][column].set(title=FACTOR_TITLES[factor], ylabel="% change (W8A8)" if column == 0 else "")
        axes[1][column].set(ylabel="loss δ W8A8 (nats)" if column == 0 else "")
    axes[0][0].legend(fontsize=6)
    _footer(fig, rows, _seed_note(tables["evals"]))
    return fig


@figure(tables=STUDY_TABLES)
def fig3(tables, fits):
    """bf16 vs fp16: % accuracy change and loss δ at the end of training, and loss δ over the checkpoints."""
    evals = tables["evals"]
    final = _final(evals, "w8a8", ["precision"])
    if final.empty:
        return _not_measured("bf16 vs fp16 training")
    fig, axes = new_figure(3, 1, width=3.0, height=2.8)
    _bars(axes[0][0], final, "pct_change", "pct_change_se", seed_sd(evals, "pct_change"), paper=True)
    _bars(axes[0][1], final, "delta", "delta_se", seed_sd(evals, "delta"))
    axes[0][0].set(ylabel="% change (W8A8)")
    axes[0][0].legend(fontsize=6)
    axes[0][1].set(ylabel="loss δ W8A8 (nats)")
    tracked = evals[(evals["factor"] == "precision") & (evals["method"] == "w8a8")]
    sns.lineplot(
        tracked.assign(variant=tracked["level"] + " · " + tracked["group"]),
        x="D",
        y="delta",
        hue="variant",
        marker="o",
        ax=axes[0][2],
    )
    axes[0][2].set(xlabel="training tokens", ylabel="loss δ W8A8 (nats)", title="over training")
    _footer(fig, tracked, _seed_note(evals))
    return fig


@figure(tables=STUDY_TABLES)
def fig4(tables, fits):
    """Histograms of one block's QKV weights and norm gains, bf16 vs fp16 (first weight-decay group)."""
    values = tables["values"]
    rows = values[values["final"] & (values["factor"] == "precision")]
    if rows.empty:
        return _not_measured("bf16 vs fp16 weights")
    rows = rows[rows["group"] == sorted(rows["group"].unique())[0]]
    fig, axes = new_figure(2, 1, width=3.5)
    for ax, kind, title in zip(axes[0], ("qkv_weight", "norm_gain"), ("QKV weights", "norm gains")):
        subset = rows[rows["kind"] == kind]
        sns.histplot(subset, x="value", hue="level", element="step", stat="density", common_norm=False, ax=ax)
        ax.set(title=f"{title}, block {int(rows['block'].iloc[0])}")
    _footer(fig, values)
    return fig


def _proxy_panels(rows, x, hue, kind):
    fig, axes = new_figure(len(PROXIES), 1, width=2.8, height=2.8)
    for ax, (proxy, title) in zip(axes[0], PROXIES.items()):
        if kind == "bar":
            sns.barplot(rows, y=x, x=proxy, hue=hue, ax=ax, legend=False, errorbar=None)
            ax.tick_params(labelleft=proxy == "rmse")  # variant names once, on the first panel
        else:
            sns.lineplot(rows, x=x, y=proxy, hue=hue, marker="o", ax=ax, legend=proxy == "rmse")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # block indices, even for one
        ax.set(title=title, xlabel="" if kind == "bar" else "block", ylabel="")
    return fig


@figure(tables=STUDY_TABLES)
def fig5(tables, fits):
    """The four proxies (mean over blocks) per variant at the end of training."""
    proxies = tables["proxies"]
    ablations = proxies[proxies["final"] & proxies["factor"].isin(FACTORS)]
    if ablations.empty:
        return _not_measured("proxies per training choice")
    rows = proxies[proxies["final"] & proxies["factor"].isin([*FACTORS, "outlier_prone"])]
    rows = rows[rows["size"] == ablations["size"].iloc[0]]
    means = rows.groupby(["variant", "factor"], sort=False)[list(PROXIES)].mean().reset_index()
    fig = _proxy_panels(means, "variant", "factor", "bar")
    _footer(fig, rows)
    return fig


@figure(tables=STUDY_TABLES)
def fig10(tables, fits):
    """The proxies against depth for the weight-decay variants."""
    proxies = tables["proxies"]
    rows = proxies[proxies["final"] & (proxies["factor"] == "weight_decay")]
    fig = _proxy_panels(rows.assign(weight_decay=rows["level"]), "block", "weight_decay", "line")
    _footer(fig, proxies)
    return fig


@figure(tables=STUDY_TABLES)
def fig11(tables, fits):
    """The proxies against depth for bf16 vs fp16."""
    proxies = tables["proxies"]
    rows = proxies[proxies["final"] & (proxies["factor"] == "precision")]
    fig = _proxy_panels(rows.assign(precision=rows["level"] + " · " + rows["group"]), "block", "precision", "line")
    _footer(fig, proxies)
    return fig


def _render(frame: pd.DataFrame, title: str, note: str):
    if frame.empty:
        return _not_measured(title)
    fig, axes = new_figure(width=8.0, height=0.2 * len(frame) + 0.8)
    ax = axes[0][0]
    ax.axis("off")
    cells = [[f"{v:.4g}" if isinstance(v, float) else str(v) for v in row] for row in frame.to_numpy()]
    table = ax.table(cellText=cells, colLabels=list(frame.columns), loc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(6)
    ax.set_title(title)
    add_footer(fig, note)
    return fig


def table_ablations_frame(tables, fits):
    """Our W8A8 results beside the paper's: % accuracy change and loss δ per ablation level (final checkpoints)."""
    rows = _final(tables["evals"], "w8a8")
    paper = [PAPER_ABLATIONS.get((r.factor, r.level, r.group), np.nan) for r in rows.itertuples()]
    return rows.assign(paper_pct_change=paper)[
        ["factor", "level", "group", "paper_pct_change", "pct_change", "pct_change_se", "delta", "delta_se"]
    ].reset_index(drop=True)


@figure(tables=STUDY_TABLES, frame=True)
def table_ablations(tables, fits):
    return _render(
        table_ablations_frame(tables, fits),
        "W8A8 % change by training choice: paper (6B) vs this run",
        "paper_pct_change: Ahmadian et al. 2023 Figs. 2–3; pct_change/loss_delta: this run (± se).",
    )


def table4_frame(tables, fits):
    """Mean accuracy unquantized / W8A8 / W4 by size for our recipes (or released models), then the paper's rows."""
    rows = _final(tables["evals"], factors=["recipe", "outlier_prone", "released"])
    wide = rows.pivot_table(index=["factor", "size", "N"], columns="method", values="mean_acc", aggfunc="first")
    wide = wide.rename(columns=METHOD_LABELS).reset_index().sort_values(["factor", "N"])
    paper = pd.DataFrame(
        [
            {
                "factor": "paper (Table 4)",
                "size": size,
                "N": np.nan,
                "unquantized": values[0] / 100,
                "W8A8": values[1] / 100,
                "W4": values[2] / 100,
            }
            for size, values in PAPER_TABLE4.items()
        ]
    )
    return pd.concat([wide, paper], ignore_index=True)[["factor", "size", "N", "unquantized", "W8A8", "W4"]]


@figure(tables=STUDY_TABLES, frame=True)
def table4(tables, fits):
    return _render(
        table4_frame(tables, fits),
        "Mean accuracy unquantized / W8A8 / W4 by size (Table 4)",
        "Paper rows: 8-task mean (fraction); this run: 3 held-out tasks.",
    )


def table5_frame(tables, fits):
    """Outlier-dimension counts by rule per variant (final checkpoints), beside the W8A8 loss δ."""
    rows = tables["evals"]
    rows = rows[rows["final"] & (rows["method"] == "w8a8")]
    columns = ["variant", "size", "outliers_llm_int8", "outliers_threshold_4.2", "outliers_zscore_4", "delta"]
    return rows[columns].rename(columns={"delta": "w8a8_loss_delta"}).reset_index(drop=True)


@figure(tables=STUDY_TABLES, frame=True)
def table5(tables, fits):
    return _render(
        table5_frame(tables, fits),
        "Outlier dimensions by rule (Table 5)",
        "LLM.int8 rule: |x| > 6 on ≥ 6 % of tokens in ≥ 25 % of layers; also 4.2 and |x − μ| > 4σ.",
    )
