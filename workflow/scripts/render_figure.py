"""Render one figure: call `params.function` ("module:name") on the rule's tables and fits, save `output[0]`.

Named inputs ending in .parquet become `tables[name]`; those ending in .json become `fits[name]`
(loaded with `qscaling.laws.load_fit`). `params.kwargs` (a dict) is passed through to the function.
"""

import importlib

import pandas as pd

from qscaling.figures import save_figure
from qscaling.provenance import job_context


def load_inputs(named_inputs):
    tables, fits = {}, {}
    for name, path in named_inputs.items():
        if str(path).endswith(".parquet"):
            tables[name] = pd.read_parquet(path)
        elif str(path).endswith(".json"):
            from qscaling.laws import load_fit

            fits[name] = load_fit(path)
    return tables, fits


with job_context(snakemake):  # noqa: F821
    module_name, function_name = snakemake.params.function.split(":")  # noqa: F821
    function = getattr(importlib.import_module(module_name), function_name)
    tables, fits = load_inputs(dict(snakemake.input.items()))  # noqa: F821
    figure = function(tables, fits, **dict(getattr(snakemake.params, "kwargs", {}) or {}))  # noqa: F821
    save_figure(figure, snakemake.output[0])  # noqa: F821
