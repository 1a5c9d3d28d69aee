"""Published tables (data/public): each ships with a note naming its source and licence and reads cleanly; bad rows
stop with one line naming the file and the column or row; the laws' predictions are their paper constants' values;
the transfer summary and the README's lines are made from the reference's predictions."""

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from conftest import REPO_ROOT

from qscaling.figures import common
from qscaling.laws import LAWS
from qscaling.public import (
    PUBLIC_COLUMNS,
    PUBLIC_LAWS,
    law_predictions,
    public_tables,
    read_public_table,
    transfer,
)
from qscaling.report import PUBLIC_END, PUBLIC_START, with_public

PUBLIC = REPO_ROOT / "data" / "public"
TABLES = sorted(PUBLIC.glob("*.csv"))
HEADER = ",".join(PUBLIC_COLUMNS)


def test_at_least_two_tables_ship_each_with_its_source_and_licence():
    assert len(TABLES) >= 2
    for path in TABLES:
        note = path.with_suffix(".md").read_text()
        assert "**Source**" in note and "**Licence**" in note, path.name
        table = read_public_table(path)
        assert table["N"].nunique() >= 3 and table["bits"].nunique() >= 3, path.name  # a size and a bits axis


def write(tmp_path, *rows: str, header: str = HEADER):
    path = tmp_path / "table.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


GOOD = "m,fam,1e9,2e10,Q4,rtn,4,10.0,11.0,0.0005"


@pytest.mark.parametrize(
    ("rows", "header", "message"),
    [
        ((GOOD,), HEADER.replace(",perplexity_rounding", ""), "column 'perplexity_rounding' missing"),
        ((GOOD, "m,fam,1e9,2e10,Q8,rtn,8,10.0,-1,0.0005"), HEADER, "row 3: perplexity = '-1' is not a positive"),
        ((GOOD, "m,fam,1e9,,Q8,rtn,8,10.0,10.1,0.0005"), HEADER, "row 3: D = '' is not a positive number"),
        ((GOOD, GOOD), HEADER, "row 3: model 'm' with format 'Q4' is listed twice"),
        ((), HEADER, "no rows"),
    ],
)
def test_a_bad_table_is_refused_naming_the_file_and_the_column_or_row(tmp_path, rows, header, message):
    path = write(tmp_path, *rows, header=header)
    with pytest.raises(ValueError, match=message) as error:
        read_public_table(path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_predictions_are_each_papers_constants_and_delta_is_the_log_perplexity_ratio(tmp_path):
    path = write(tmp_path, GOOD, "m,fam,1e9,2e10,Q8,rtn,8,10.0,10.05,0.0005")
    predictions = law_predictions({"t": read_public_table(path)})
    assert len(predictions) == 2 * sum(len(LAWS[law].paper_params) for law in PUBLIC_LAWS)
    np.testing.assert_allclose(predictions["measured_delta"].iloc[:2], [math.log(1.1), math.log(1.005)])
    kumar = LAWS["kumar2024.ptq"].paper_params["table2"]
    row = predictions[(predictions["variant"] == "table2") & (predictions["bits"] == 4)].iloc[0]
    by_hand = kumar["C_T"] * 2e10 ** kumar["gamma_D"] / 1e9 ** kumar["gamma_N"] * math.exp(-4 / kumar["gamma_post"])
    assert row["predicted_delta"] == pytest.approx(by_hand, rel=1e-12)
    ouyang = LAWS["ouyang2024.qid"].paper_params["eq4"]
    row = predictions[(predictions["law"] == "ouyang2024.qid") & (predictions["bits"] == 8)].iloc[0]
    by_hand = ouyang["k"] * 2e10 ** ouyang["beta"] / (1e9 ** ouyang["alpha"] * 8 ** ouyang["gamma"])
    assert row["predicted_delta"] == pytest.approx(by_hand, rel=1e-12)


def test_transfer_leaves_out_rows_within_rounding_and_reads_ratios():
    rows = pd.DataFrame(
        {
            "table": "t", "law": "L", "variant": "v", "model": list("abcd"), "format": "Q4",
            "measured_delta": [0.01, 0.02, 0.04, 1e-4], "rounding_bound": 2e-4,
            "predicted_delta": [0.02, 0.01, 0.2, 5.0],
        }
    )  # fmt: skip
    [summary] = transfer(rows).to_dict("records")
    assert summary["n_rows"] == 4 and summary["n_resolved"] == 3  # the last is within rounding
    assert summary["median_ratio"] == pytest.approx(2.0) and summary["share_within_two"] == pytest.approx(2 / 3)


def test_the_readme_lines_are_generated_from_the_reference():
    predictions = pd.read_csv(REPO_ROOT / "reference" / "default" / "results" / "tables" / "public_predictions.csv")
    text = (REPO_ROOT / "README.md").read_text()
    assert PUBLIC_START in text and PUBLIC_END in text
    assert with_public(text, predictions) == text, "README's published-table lines are stale: run `make docs`"
    for path in TABLES:
        assert f"[`{path.stem}`](data/public/{path.stem}.md)" in text
    moved = predictions.assign(predicted_delta=predictions["predicted_delta"] * 3)
    assert with_public(text, moved) != text


def test_the_reference_predictions_are_what_the_shipped_tables_give_now():
    made = law_predictions({path.stem: read_public_table(path) for path in TABLES})
    committed = pd.read_csv(REPO_ROOT / "reference" / "default" / "results" / "tables" / "public_predictions.csv")
    pd.testing.assert_frame_equal(made.reset_index(drop=True), committed, check_dtype=False, rtol=1e-12)


def test_the_figure_draws_every_resolved_row_per_law_and_shades_the_rounding():
    predictions = pd.read_csv(REPO_ROOT / "reference" / "default" / "results" / "tables" / "public_predictions.csv")
    fig = common.public_tables({"predictions": predictions}, {})
    names = list(dict.fromkeys(predictions["table"]))
    assert [ax.get_title() for ax in fig.axes[: len(names)]] == names
    for ax, name in zip(fig.axes, names):
        rows = predictions[predictions["table"] == name]
        resolved = rows[rows["measured_delta"] > rows["rounding_bound"]]
        for (law, variant), series in resolved.groupby(["law", "variant"]):
            [line] = [line for line in ax.get_lines() if line.get_label() == f"{law} {variant}"]
            np.testing.assert_allclose(line.get_xdata(), series["measured_delta"])
            np.testing.assert_allclose(line.get_ydata(), series["predicted_delta"])
        [shade] = [patch for patch in ax.patches if patch.get_label().startswith("within rounding")]
        assert shade.get_x() + shade.get_width() == pytest.approx(rows["rounding_bound"].max())
    footer = " ".join(text.get_text() for text in fig.texts)
    assert "fitted these laws to GPTQ" in footer and "within rounding" in footer
    plt.close(fig)


def test_a_bad_table_stops_the_workflow_before_any_job(tmp_path):
    (tmp_path / "a.csv").write_text(HEADER + "\n" + GOOD + "\n")
    assert public_tables(tmp_path) == [str(tmp_path / "a.csv")]
    (tmp_path / "b.csv").write_text(HEADER + "\n" + GOOD.replace(",4,", ",four,") + "\n")
    with pytest.raises(ValueError, match=r"b\.csv, row 2: bits = 'four' is not a positive number"):
        public_tables(tmp_path)


def test_each_shipped_table_gets_a_figure_of_its_own_in_the_workflow():
    """Pipeline.from_config with data/public's tables: a figure target per table, reading the predictions and
    drawing that table alone, with the note that names its source in its footer."""
    import yaml

    from qscaling.figures import resolve_function
    from qscaling.pipeline import Pipeline

    raw = yaml.safe_load((REPO_ROOT / "config.yaml").read_text()) | {"scale": "smoke"}
    pipeline = Pipeline.from_config(raw, public_tables(PUBLIC))
    specs = {spec.target: (spec, inputs) for spec, inputs in pipeline.figures}
    assert {f"common_public_{path.stem}" for path in TABLES} <= set(specs)
    assert "common_public_tables" in specs
    assert not {target for target in specs if target.startswith("common_public_")} - {
        "common_public_tables",
        *(f"common_public_{path.stem}" for path in TABLES),
    }
    assert (REPO_ROOT / specs[f"common_public_{TABLES[0].stem}"][0].caption).is_file()
    predictions = pd.read_csv(REPO_ROOT / "reference" / "default" / "results" / "tables" / "public_predictions.csv")
    for path in TABLES:
        spec, inputs = specs[f"common_public_{path.stem}"]
        assert inputs == {"predictions": "results/tables/public_predictions.csv"}
        assert spec.outputs == {"png": f"figures/common/public_{path.stem}.png"}
        fig = resolve_function(spec.function)({"predictions": predictions}, {}, **dict(spec.options))
        [ax] = [ax for ax in fig.axes if ax.get_title()]
        assert ax.get_title() == path.stem
        rows = predictions[
            (predictions["table"] == path.stem) & (predictions["measured_delta"] > predictions["rounding_bound"])
        ]
        drawn = sum(len(line.get_xdata()) for line in ax.get_lines() if line.get_label().split()[0] in PUBLIC_LAWS)
        assert drawn == len(rows)
        assert f"data/public/{path.stem}.md" in " ".join(text.get_text() for text in fig.texts)
        plt.close(fig)
    assert not any(
        target.startswith("common_public_llama") for target in {s.target for s, _ in Pipeline.from_config(raw).figures}
    )
