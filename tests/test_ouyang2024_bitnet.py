"""Ouyang et al. 2024, Fig. 14: BitNet b1.58-style trunks beside the fp32 trunks of the same recipe, their training
loss binned over token spans, the gap's widening held to its seed noise, the figure, and the smoke workflow's runs."""

import numpy as np
import pandas as pd
import pytest
from test_figure_content import drawn

from qscaling.config import ConfigError, resolve_config
from qscaling.layout import Layout
from qscaling.noise import OWN_REPEATS_NOTE
from qscaling.plan import Planner
from qscaling.studies.ouyang2024 import STUDY, bitnet, figures, grid
from qscaling.studies.registry import study_settings


def typed(config) -> tuple:
    """(the study's settings, the shared sections) of a resolved config, the block checked as the DAG build does."""
    common = config.common()
    return study_settings(STUDY, config.studies[grid.STUDY], common), common


def test_each_size_gets_a_bitnet_trunk_and_the_fp32_trunk_of_the_same_recipe(default_config):
    settings, common = typed(default_config)
    planner = Planner(common, common.corpus_id)
    runs = grid.bitnet_runs(settings, common, planner)
    block, seed = settings.bitnet, common.training.seed
    expected = [(size, seed) for size in block.sizes] + [(block.sizes[0], s) for s in block.extra_seeds]
    assert [(run["size"], run["seed"]) for run in runs[::2]] == expected
    for bitnet_run, full in zip(runs[::2], runs[1::2]):
        assert (bitnet_run["precision"], full["precision"]) == (grid.BITNET, grid.FULL)
        bitnet_spec, full_spec = planner.runs[bitnet_run["run"]].spec, planner.runs[full["run"]].spec
        assert bitnet_spec.training_precision == block.precision and full_spec.training_precision is None
        # Only the precision tells them apart: schedule, warmup, LR and seed are the recipe's.
        same = ("schedule", "warmup_tokens", "lr", "seed", "shape")
        assert [getattr(bitnet_spec, name) for name in same] == [getattr(full_spec, name) for name in same]
        assert bitnet_spec.total_tokens == block.tokens <= full_spec.total_tokens
    # The job finds the same runs from a planner of its own.
    assert [run["run"] for run in grid.bitnet_runs(settings, common, Planner(common, "other"))] != [
        run["run"] for run in runs
    ]
    assert grid.bitnet_runs(settings, common, Planner(common, common.corpus_id)) == runs


def test_the_bitnet_precision_is_ternary_absmean_weights_and_8_bit_per_token_activations(default_config):
    settings, _ = typed(default_config)
    assert settings.bitnet.precision == {
        "weights": "int2:tensor:absmean:narrow",
        "activations": "int8:token",
        "ste": "identity",
    }


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda b: b.update(sizes=["N9M"]), r"bitnet\.sizes\.0: size 'N9M' is not in ladder"),
        (lambda b: b.update(extra_seeds=[0]), r"bitnet\.extra_seeds: repeats the recipe's seed 0"),
        (lambda b: b["precision"].update(weights="int2:tensor:asym:narrow"), r"bitnet\.precision: .*'narrow'"),
        (lambda b: b["precision"].update(ste="soft"), r"bitnet\.precision: training_precision\.ste"),
        (lambda b: b.update(bins=1), r"bitnet\.bins"),
    ],
)
def test_bad_bitnet_settings_name_their_config_key(raw_config, edit, message):
    edit(raw_config["studies"][grid.STUDY]["bitnet"])
    with pytest.raises(ConfigError, match=rf"config key studies\.{grid.STUDY}\.{message}") as error:
        typed(resolve_config(raw_config))
    assert "\n" not in str(error.value)


def test_no_bitnet_block_plans_no_runs_and_no_job(raw_config):
    raw_config["studies"][grid.STUDY]["bitnet"] = None
    settings, common = typed(resolve_config(raw_config))
    assert grid.bitnet_runs(settings, common, Planner(common, "corpus")) == []
    assert [job.name for job in grid.jobs(settings, common, [], Layout("corpus"))] == ["weight_changes"]


def _summary(losses, warmup=100, step_tokens=10, diverged=False):
    curve = [[step_tokens * (i + 1), loss] for i, loss in enumerate(losses)]
    return {"run_id": "r", "spec": {"warmup_tokens": warmup}, "train_loss_curve": curve, "diverged": diverged}


def test_the_curve_is_averaged_over_equal_token_spans_after_warmup():
    losses = np.arange(1, 51, dtype=float)  # tokens 10..500; warmup ends at 100
    frame = bitnet.bitnet_curves(_summary(losses), tokens=400, bins=3)
    # Spans (100, 200], (200, 300], (300, 400]: tokens 110..200 are losses 11..20, and so on; 410+ are cut.
    assert frame["D"].tolist() == [200.0, 300.0, 400.0]
    assert frame["loss"].tolist() == [15.5, 25.5, 35.5] and frame["points"].tolist() == [10, 10, 10]
    assert frame["loss_se"].iloc[0] == pytest.approx(np.std(np.arange(11, 21), ddof=1) / np.sqrt(10))
    assert bitnet.bitnet_curves(_summary(losses, diverged=True), tokens=400, bins=3).empty


def _curves(widening: dict, seeds: dict, bins: int = 4, noise: float = 0.0) -> pd.DataFrame:
    """Synthetic binned curves: fp32 loss 4 − 0.1·bin; BitNet above it by a gap growing linearly by `widening[size]`
    (plus `seeds[seed]` for each extra seed's run, at the first size)."""
    rows, sizes = [], list(widening)
    for size_index, size in enumerate(sizes):
        for seed, shift in seeds.items():
            if seed != 0 and size_index:
                continue
            for b in range(bins):
                base = 4 - 0.1 * b
                gap = 0.05 + (widening[size] + shift) * b / (bins - 1)
                common = {"size": size, "N": 1000 * (size_index + 1), "seed": seed, "bin": b, "D": 100.0 * (b + 1)}
                rows.append({**common, "precision": grid.FULL, "loss": base, "loss_se": noise, "points": 5})
                rows.append({**common, "precision": grid.BITNET, "loss": base + gap, "loss_se": noise, "points": 5})
    return pd.DataFrame(rows)


def test_a_gap_that_widens_beyond_the_seed_noise_at_every_size_is_reproduced():
    row = bitnet.bitnet_claim(_curves({"N3k": 0.3, "N7k": 0.2}, {0: 0.0, 1: 0.02}), recipe_seed=0)
    assert row["verdict"] == "reproduced" and "widening +0.300" in row["statistic"]
    assert "MAD of 2 seeds at N3k" in row["noise"] and OWN_REPEATS_NOTE in row["noise"]


@pytest.mark.parametrize(
    "widening, seeds, verdict",
    [
        ({"N3k": 0.03, "N7k": 0.2}, {0: 0.0, 1: 0.05}, "inconclusive"),  # one size within the t-floor of σ_seed
        ({"N3k": -0.3, "N7k": -0.2}, {0: 0.0, 1: 0.02}, "not reproduced"),  # the gap narrows
        ({"N3k": 0.3, "N7k": 0.2}, {0: 0.0}, "inconclusive"),  # no second seed: noise unmeasured
    ],
)
def test_a_widening_within_noise_or_unmeasured_noise_is_not_reproduced(widening, seeds, verdict):
    assert bitnet.bitnet_claim(_curves(widening, seeds), recipe_seed=0)["verdict"] == verdict


def test_the_span_noise_floors_the_widening_too():
    curves = _curves({"N3k": 0.3, "N7k": 0.2}, {0: 0.0, 1: 0.0}, noise=0.1)  # two seeds agree exactly
    assert bitnet.bitnet_claim(curves, recipe_seed=0)["verdict"] == "inconclusive"


def test_fig14_draws_both_losses_per_size_and_every_seeds_gap():
    curves = _curves({"N3k": 0.3, "N7k": 0.2}, {0: 0.0, 1: 0.02})
    axes = drawn(figures.fig14({"bitnet": curves}, {}))
    top, bottom = axes[:2], axes[2:]
    for panel, size in zip(top, ("N3k", "N7k")):
        assert panel["title"].startswith(size)
        rows = curves[(curves["size"] == size) & (curves["seed"] == 0)]
        drawn_losses = sorted(line["y"] for line in panel["lines"] if len(line["y"]) == 4)
        assert drawn_losses == sorted(rows.groupby("precision")["loss"].apply(list).tolist())
    assert top[0]["legend"] == [label for label, _ in figures._PRECISION_STYLE.values()]
    gaps = bitnet.bitnet_gaps(curves)
    first_size = [line for line in bottom[0]["lines"] if line["label"].startswith("seed")]
    assert [line["label"] for line in first_size] == ["seed 0", "seed 1"]
    assert first_size[0]["y"] == pytest.approx(gaps[(gaps["size"] == "N3k") & (gaps["seed"] == 0)]["gap"].tolist())
    assert [line["label"] for line in bottom[1]["lines"] if line["label"].startswith("seed")] == ["seed 0"]


def test_the_bitnet_runs_are_planned_whatever_the_checkpoint_source(raw_config):
    """At paper scale the QiD grid reads released checkpoints; Fig. 14's runs are still trained."""
    settings, common = typed(resolve_config({**raw_config, "scale": "paper"}))
    planner = Planner(common, common.corpus_id)
    STUDY.plan(settings, common, planner)
    assert settings.source == "hub"
    assert all(
        run["run"] in planner.runs for run in grid.bitnet_runs(settings, common, Planner(common, common.corpus_id))
    )
