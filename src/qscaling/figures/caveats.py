"""What a figure shows beside its data so that it claims no more than the run supports: the seed band of
separately trained runs, a fitted parameter left on its bound, and a fit drawn beyond the inputs it was fitted on.

Each mark carries fixed words or ids (`SEED_BAND_GID`, `BOUND_FLAG`, `EXTRAPOLATED`, `EXTRAPOLATED_GID`) so that
a reader, and a test, finds it the same way in every figure. None adds a legend entry: the footer explains them.
"""

import math

import numpy as np
from matplotlib.collections import LineCollection, PolyCollection

from qscaling.figures import add_footer, compact_number

# The pale bars `seed_band` draws: their id, and how the footer names them.
SEED_BAND_GID = "qscaling-seed-band"
SEED_BAND_LABEL = "± 2 σ_seed (separately trained runs)"
# Opens the footer line `flag_bounds` writes.
BOUND_FLAG = "At its bound"
# In every extrapolation mark: the notes' word, the hatch's id and its footer line.
EXTRAPOLATED = "extrapolated"
EXTRAPOLATED_GID = "qscaling-extrapolated"
EXTRAPOLATED_NOTE = f"Hatched: beyond the inputs this run's fit saw ({EXTRAPOLATED})."
# Dark red: a warning, and still 4.5:1 against white.
WARNING_COLOUR = "#a51c1c"
_GREEK = {"alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "nu": "ν", "iota": "ι"}


def parameter_symbol(name: str) -> str:
    """A law parameter as the figures write it: gamma_N → γ_N, nu → ν, k → k."""
    head, separator, tail = name.partition("_")
    return _GREEK.get(head, head) + separator + tail


def params_at_bound(fit) -> list[str]:
    """The fitted parameters of `fit` that sit on one of their bounds."""
    return [name for name in fit.params if fit.at_bound(name)]


def bound_flag_text(fit, label: str, drawn=None) -> str | None:
    """'At its bound in <label>: γ_N = 0, …' and what that means for the drawn curve, or None where no fitted
    parameter sits on a bound (of those `drawn`, where the figure uses only some)."""
    names = [name for name in params_at_bound(fit) if drawn is None or name in drawn]
    if not names:
        return None
    values = ", ".join(f"{parameter_symbol(name)} = {fit.params[name]:.3g}" for name in names)
    return (
        f"{BOUND_FLAG} in {label}: {values}. The optimum lies beyond the bound, so what is drawn follows the bound, "
        "not an estimate."
    )


def flag_bounds(fig, fits: dict, drawn=None) -> None:
    """A footer line per drawn fit with a parameter on its bound; `fits` maps how the figure names each fit
    ("this run's block fit") to the fit, or None where it is missing; `drawn`: the parameters the figure uses,
    where it uses only some."""
    lines = [text for label, fit in fits.items() if fit is not None and (text := bound_flag_text(fit, label, drawn))]
    if lines:
        add_footer(fig, "\n".join(lines), color=WARNING_COLOUR)


def fitted_range(fit, column: str) -> tuple[float, float] | None:
    """The least and greatest value of input `column` among the points `fit` was fitted on; None where the fit
    keeps no points."""
    values = [v for v in fit.points.get("inputs", {}).get(column, []) if v is not None and math.isfinite(v)]
    return (min(values), max(values)) if values else None


def _span_text(low: float, high: float) -> str:
    return compact_number(float(f"{low:.3g}")) + (f"–{compact_number(float(f'{high:.3g}'))}" if high > low else "")


def extrapolation_note(fit, drawn: dict) -> str:
    """'fitted on N 21k–201k, extrapolated to N 7B–405B' for each input whose `drawn` range ({column: (low, high)})
    leaves the range the fit saw; '' where none does."""
    beyond = []
    for column, (low, high) in drawn.items():
        seen = fitted_range(fit, column)
        if seen is not None and (low < seen[0] * (1 - 1e-9) or high > seen[1] * (1 + 1e-9)):
            beyond.append((column, seen, (low, high)))
    if not beyond:
        return ""
    fitted = ", ".join(f"{column} {_span_text(*seen)}" for column, seen, _ in beyond)
    shown = ", ".join(f"{column} {_span_text(*span)}" for column, _, span in beyond)
    return f"fitted on {fitted}, {EXTRAPOLATED} to {shown}"


def mark_extrapolation(ax, fit, column: str, drawn=None, *, to_axis=None) -> bool:
    """Hatch the parts of the x range where the fit is drawn (`drawn`: (low, high) on the axis, else the whole
    view) that lie beyond the range of input `column` it saw (`to_axis`: how the axis shows that input where it is
    not the input itself, e.g. D → D/N, an increasing function), and say so once in the figure's footer; True
    where any part is. Without `drawn`, call it once the x view is final. The hatch leaves the view as it is."""
    seen = fitted_range(fit, column)
    if seen is None:
        return False
    left, right = sorted(ax.get_xlim() if drawn is None else drawn)
    low, high = (float(to_axis(value)) for value in seen) if to_axis else seen
    spans = [(a, b) for a, b in ((left, min(low, right)), (max(high, left), right)) if b > a]
    for a, b in spans:
        hatch = PolyCollection([[(a, 0), (b, 0), (b, 1), (a, 1)]], transform=ax.get_xaxis_transform(),
                               facecolor="none", edgecolor="0.82", hatch="//", linewidth=0, zorder=0.5)  # fmt: skip
        hatch.set_gid(EXTRAPOLATED_GID)
        ax.add_collection(hatch, autolim=False)
    if spans and EXTRAPOLATED_NOTE not in [text.get_text() for text in ax.figure.texts]:
        add_footer(ax.figure, EXTRAPOLATED_NOTE)
    return bool(spans)


def seed_band(ax, x, y, sd, color) -> None:
    """A pale bar ± 2 `sd` around each point (x, y): where separately trained runs scatter, `sd` (one value, or
    one per point) being the between-run SD of the plotted value; the caller's footer says so (`seed_band_note`).
    Nothing where `sd` is unknown. The band leaves the view to the data: one larger than them runs off the axes."""
    y = np.asarray(y, float)
    sd = np.broadcast_to(np.asarray(sd, float), y.shape)
    if not len(y) or not (np.isfinite(sd) & (sd > 0)).all():
        return
    segments = [[(xi, yi - 2 * si), (xi, yi + 2 * si)] for xi, yi, si in zip(np.asarray(x, float), y, sd)]
    band = LineCollection(segments, colors=[color], alpha=0.22, linewidths=7, zorder=1, label="_nolegend_")
    band.set_gid(SEED_BAND_GID)
    ax.add_collection(band, autolim=False)


def seed_band_note(sd: float, source: str) -> str:
    """The footer's account of the seed band: its half-width and where σ_seed comes from, or that none was
    measured."""
    if not math.isfinite(sd) or sd <= 0:
        return "no seed repeats: the between-run noise (σ_seed) is not measured and not drawn"
    return f"pale bars: {SEED_BAND_LABEL}, ± {2 * sd:.2g} ({source})"
