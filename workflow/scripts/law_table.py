"""Render a table target: `params.table` ("module:name") gives the CSV rows, `params.function` the image.

Both are called as `function(tables, fits)`; inputs are loaded like render_figure.py does (.parquet tables,
.json fits).
"""

import importlib
import logging
import sys

import pandas as pd

from qscaling.figures import save_figure

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)  # noqa: F821
sys.stderr = open(snakemake.log[0], "a")  # noqa: F821


def resolve(spec):
    module_name, function_name = spec.split(":")
    return getattr(importlib.import_module(module_name), function_name)


def load_inputs(named_inputs):
    tables, fits = {}, {}
    for name, path in named_inputs.items():
        if str(path).endswith(".parquet"):
            tables[name] = pd.read_parquet(path)
        elif str(path).endswith(".json"):
            from qscaling.laws import load_fit

            fits[name] = load_fit(path)
    return tables, fits


tables, fits = load_inputs(dict(snakemake.input.items()))  # noqa: F821
frame = resolve(snakemake.params.table)(tables, fits)  # noqa: F821
frame.to_csv(snakemake.output.csv, index=False, float_format="%.6g", lineterminator="\n")  # noqa: F821
save_figure(resolve(snakemake.params.function)(tables, fits), snakemake.output.png)  # noqa: F821
logging.info("wrote %s and %s", snakemake.output.csv, snakemake.output.png)  # noqa: F821
