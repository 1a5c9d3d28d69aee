"""Tables the HTML report (`snakemake --report`) shows beside the studies' own: every fitted law of a run."""

import json
from pathlib import Path

import pandas as pd

from qscaling.laws.result import is_fit_dict


def fits_table(paths) -> pd.DataFrame:
    """Every fitted law as rows (one per parameter, with its CI and the fit's R²): the report's law table.

    A fit file holding `{"error": ...}` (the fit could not run at this scale) becomes one row with the reason.
    """
    rows = []
    for path in paths:
        doc = json.loads(Path(path).read_text())
        fit_name = f"{Path(path).parent.name}/{Path(path).stem}"
        if not is_fit_dict(doc):
            rows.append(
                {
                    "fit": fit_name,
                    "law": None,
                    "parameter": None,
                    "value": None,
                    "ci_low": None,
                    "ci_high": None,
                    "r2": None,
                    "n_points": None,
                    "note": doc.get("error", "not a fit"),
                }
            )
            continue
        for name, value in doc["params"].items():
            low, high = doc.get("ci", {}).get(name) or (None, None)
            rows.append(
                {
                    "fit": fit_name,
                    "law": doc["law"],
                    "parameter": name,
                    "value": value,
                    "ci_low": low,
                    "ci_high": high,
                    "r2": doc.get("r2"),
                    "n_points": doc.get("n_points"),
                    "note": "; ".join(doc.get("notes", [])),
                }
            )
    return pd.DataFrame(
        rows, columns=["fit", "law", "parameter", "value", "ci_low", "ci_high", "r2", "n_points", "note"]
    )
