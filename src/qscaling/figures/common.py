"""Figures of no one study: the learning curves of the shared trunks (figures/common/learning_curves), every law
fitted on every study's runs (figures/common/law_comparison) and the laws' paper constants against published tables
of public models (figures/common/public_tables, and one figure per table: figures/common/public_<table>)."""

from pathlib import Path

import numpy as np
import seaborn as sns
from matplotlib.ticker import FixedLocator, NullFormatter

from qscaling.comparison import SCHEMES
from qscaling.figures import FigureSpec, add_footer, figure, new_figure, no_points
from qscaling.layout import PUBLIC_PREDICTIONS
from qscaling.public import beyond_rounding


@figure(tables={"curves": "learning_curves"})
def learning_curves(tables, fits):
    """Validation loss vs tokens seen, one line per model size, log-log."""
    curves = tables["curves"].sort_values(["N", "D"])
    fig, axes = new_figure(width=4.6, height=3.4)
    ax = axes[0][0]
    labels = {n: f"{size} (N={n:,})" for n, size in curves[["N", "size"]].drop_duplicates().itertuples(index=False)}
    sns.lineplot(
        data=curves.assign(model=curves["N"].map(labels)),
        x="D",
        y="loss",
        hue="model",
        marker="o",
        hue_order=[labels[n] for n in sorted(labels)],
        palette="viridis",
        ax=ax,
        errorbar=None,
    )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="training tokens D",
        ylabel="validation loss (nats/token)",
        title="Learning curves of the model ladder",
    )
    ax.legend(title="non-embedding params", fontsize=7, title_fontsize=7)
    # Losses span less than a decade: label a few log-spaced values instead of powers of ten.
    ticks = np.geomspace(curves["loss"].min(), curves["loss"].max(), 5)
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(lambda value, _: f"{value:.2f}")
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    add_footer(
        fig, f"{curves['run'].nunique()} runs, held-out tokens per point: {int(curves['eval_tokens'].iloc[0]):,}"
    )
    return fig


# The law comparison's held-out schemes and the paper constants' prediction, each a bar or marker per law.
COMPARISON_SERIES = {
    "leave one size out": ("this run's fit, sizes held out", "C0", "o"),
    "leave one budget out": ("this run's fit, budgets held out", "C2", "s"),
    "paper constants, no fit": ("paper constants (no fit)", "0.2", "D"),
}


@figure(tables={"comparison": "law_comparison"})
def law_comparison(tables, fits):
    """Every law fitted on the same runs: its error on held-out sizes (circle) and budgets (square) and the error of
    its paper's constants (diamond), one panel for laws of the loss and one for laws of a degradation δ."""
    table = tables["comparison"]
    kinds = [kind for kind in ("loss", "delta") if kind in set(table["kind"])]
    heights = [table[table["kind"] == kind]["law"].nunique() for kind in kinds]
    fig, axes = new_figure(1, len(kinds), width=6.4, height=0.3 * sum(heights) / len(kinds) + 1.0,
                           gridspec_kw={"height_ratios": [h + 2 for h in heights], "hspace": 0.5})  # fmt: skip
    for ax, kind in zip(axes[:, 0], kinds):
        rows = table[table["kind"] == kind]
        laws = list(dict.fromkeys(rows["law"]))
        for offset, (scheme, (label, colour, marker)) in zip((-0.2, 0.0, 0.2), COMPARISON_SERIES.items()):
            shown = rows[(rows["scheme"] == scheme) & (rows["relative_error"] > 0)]
            y = [laws.index(law) + offset for law in shown["law"]]
            ax.plot(shown["relative_error"], y, marker, ms=4, ls="none", color=colour, label=label)
        _seed_floors(ax, rows, laws)
        ax.set_yticks(range(len(laws)), [_law_label(rows, law) for law in laws], fontsize=7)
        ax.invert_yaxis()
        ax.set(xscale="log", xlabel=f"mean |predicted − observed| / observed {'loss' if kind == 'loss' else 'δ'}",
               title="laws of the loss" if kind == "loss" else "laws of a degradation δ")  # fmt: skip
    axes[0][0].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    add_footer(
        fig,
        "Each law fitted on the points of this run its inputs allow (every study's runs, shared runs once); held out: "
        "each size (budget) predicted by a fit without it. † a parameter at its bound; (not fitted): too few points "
        "or an input no study records. δ laws fitted on linear residuals are scored against the held-out mean |δ|. "
        "The line right of a circle: the gap in error that seed noise alone makes between two laws on that law's "
        "points (95 % t-floor of σ_seed over their mean loss); a law whose circle lies within it is not told apart.",
    )
    return fig


def _seed_floors(ax, rows, laws: list[str]) -> None:
    """From each size-held-out error, the gap seed noise alone makes between two laws (`seed_floor`), where the
    table has one."""
    if "seed_floor" not in rows.columns:
        return
    shown = rows[(rows["scheme"] == SCHEMES["N"]) & (rows["seed_floor"] > 0)]
    y = [laws.index(law) - 0.2 for law in shown["law"]]
    error = shown["relative_error"].to_numpy(float)
    ax.hlines(y, error, error + shown["seed_floor"].to_numpy(float), color="C0", lw=1.0, alpha=0.6,
              label="+ seed-noise floor of a difference (95 %)")  # fmt: skip


def _law_label(rows, law: str) -> str:
    """The law's name with its number of points, † where its fit has a parameter at its bound, or why not fitted."""
    mine = rows[(rows["law"] == law) & (rows["source"] == "this run's fit")]
    first = mine.iloc[0] if len(mine) else None
    if first is None or str(first["note"]).startswith("not fitted"):
        return f"{law} (not fitted)"
    bound = "†" if mine["note"].astype(str).str.contains("at its bound").any() else ""
    return f"{law}{bound} ({int(first['n_points'])} pts)"


# Each law and paper variant of `qscaling.public.PUBLIC_LAWS`: (colour, marker); others fall back to grey circles.
PUBLIC_SERIES = {
    ("kumar2024.ptq", "table2"): ("C0", "o"),
    ("kumar2024.ptq", "table2_offset"): ("C9", "s"),
    ("ouyang2024.qid", "eq4"): ("C3", "D"),
}


PUBLIC_FOOTER = (
    "δ = ln(perplexity / 16-bit perplexity); predictions from each paper's constants, no fit. The papers fitted these "
    "laws to GPTQ; these tables are round-to-nearest, which degrades more, so a law that transfers predicts at most "
    "the measured δ."
)


@figure(tables={"predictions": "public_predictions"})
def public_tables(tables, fits):
    """One panel per published table of data/public: each PTQ law's prediction from its paper's constants against
    the measured δ = ln(perplexity ratio), with the line where they agree and factors of two either side; rows whose
    δ the published digits' rounding could account for are left out, the rounding's reach shaded."""
    predictions = tables["predictions"]
    names = list(dict.fromkeys(predictions["table"]))
    fig, axes = new_figure(max(len(names), 1), width=3.4, height=3.4, gridspec_kw={"wspace": 0.35})
    if not names:
        no_points(axes[0][0], "no published tables in data/public")
        return fig
    left_out = [_public_panel(ax, predictions[predictions["table"] == name], name) for ax, name in zip(axes[0], names)]
    axes[0][-1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    add_footer(
        fig,
        "Published measurements of public models (data/public/<table>.csv, each with a note naming its source and "
        f"licence): {PUBLIC_FOOTER} Left out: " + "; ".join(left_out) + ".",
    )
    return fig


def public_table(tables, fits, table: str):
    """One published table of data/public (`table`, its file's stem), drawn as a panel of `public_tables`."""
    predictions = tables["predictions"]
    rows = predictions[predictions["table"] == table]
    fig, axes = new_figure(width=3.8, height=3.8)
    if rows.empty:
        no_points(axes[0][0], f"no predictions for data/public/{table}.csv")
        return fig
    left_out = _public_panel(axes[0][0], rows, table)
    axes[0][0].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    add_footer(
        fig,
        f"Published measurements of public models: data/public/{table}.csv (source and licence in "
        f"data/public/{table}.md). {PUBLIC_FOOTER} Left out: {left_out}.",
    )
    return fig


def public_table_figures(paths) -> list[FigureSpec]:
    """A figure per published table (`paths`: data/public's CSVs), each drawn by `public_table` from the
    predictions of every table: figures/common/public_<stem>.png."""
    return [
        FigureSpec(
            "common",
            f"public_{Path(path).stem}",
            f"{__name__}:public_table",
            {"predictions": PUBLIC_PREDICTIONS},
            caption="workflow/report/common_public_table.rst",
            options=(("table", Path(path).stem),),
        )
        for path in paths
    ]


def _public_panel(ax, rows, name: str) -> str:
    """One table's predicted against measured δ on `ax`; what it leaves out (rows within the published digits'
    rounding), in words."""
    resolved = rows[beyond_rounding(rows)]
    for (law, variant), series in resolved.groupby(["law", "variant"], sort=False):
        colour, marker = PUBLIC_SERIES.get((law, variant), ("0.5", "o"))
        ax.plot(series["measured_delta"], series["predicted_delta"], marker, ms=3.5, ls="none", color=colour,
                alpha=0.85, label=f"{law} {variant}")  # fmt: skip
    values = np.concatenate([resolved["measured_delta"], resolved["predicted_delta"]])
    low, high = values.min() / 2, values.max() * 2
    diagonal = np.array([low, high])
    ax.plot(diagonal, diagonal, "-", color="0.2", lw=0.8, label="prediction = measurement")
    for factor in (0.5, 2.0):
        ax.plot(diagonal, factor * diagonal, ":", color="0.4", lw=0.7, label="factor 2" if factor > 1 else None)
    reach = rows["rounding_bound"].max()
    ax.axvspan(low, reach, color="0.9", zorder=0, label="within rounding of the published digits")
    ax.set(xscale="log", yscale="log", xlim=(low, high), ylim=(low, high), title=name,
           xlabel="measured δ (nats)", ylabel="predicted δ (nats), paper constants")  # fmt: skip
    models = rows[["model", "format"]].drop_duplicates()
    unresolved = rows[~beyond_rounding(rows)][["model", "format"]].drop_duplicates()
    return f"{name}: {len(unresolved)} of {len(models)} rows within rounding"
