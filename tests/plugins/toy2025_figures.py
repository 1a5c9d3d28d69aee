"""The toy plug-in study's one figure: RTN loss δ against bits, one line per size."""

import seaborn as sns

from qscaling.figures import figure, new_figure

PAPER = "toy2025"


@figure(tables={"rows": "toy2025"}, caption="toy2025_fig1.rst")
def fig1(tables, fits):
    rows = tables["rows"][tables["rows"]["method"] == "rtn"]
    fig, axes = new_figure()
    sns.lineplot(data=rows, x="bits", y="delta", hue="size", marker="o", ax=axes[0][0], errorbar=None)
    axes[0][0].set(yscale="log", xlabel="RTN bits", ylabel="loss δ (nats)")
    return fig
