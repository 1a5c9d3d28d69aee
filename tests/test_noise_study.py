"""The seed study (qscaling.studies.noise): its runs, each quantized one with an fp32 partner of its own seed and
shared with the other studies' seed repeats; its noise model recovered from a table with known spread; its figure;
its config errors."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from test_figure_layout import layout_problems

from qscaling.config import ConfigError, resolve_config
from qscaling.figures import figure_data
from qscaling.noise import NOISE_PATH, mad_scale, read_noise_models
from qscaling.pipeline import Pipeline
from qscaling.plan import Planner
from qscaling.studies.chen2025 import STUDY as CHEN
from qscaling.studies.noise import STUDY, analysis, grid
from qscaling.studies.noise.figures import noise as noise_figure
from qscaling.studies.registry import study_settings

OVERLAY = Path(__file__).parents[1] / "workflow" / "overlays" / "noise.yaml"


@pytest.fixture
def noise_config(raw_config):
    raw_config["studies"]["noise"] = yaml.safe_load(OVERLAY.read_text())["studies"]["noise"]
    return raw_config


def settings_of(config):
    return study_settings(STUDY, config.studies["noise"], config.common())


def test_every_run_has_its_fp32_partner_of_the_same_seed_and_chens_seed_repeats_are_not_trained_twice(noise_config):
    config = resolve_config(noise_config)
    common = config.common()
    planner = Planner(common, common.corpus_id)
    settings = settings_of(config)
    evaluations = STUDY.plan(settings, common, planner)
    cells = {}
    for evaluation in evaluations:
        spec = planner.runs[evaluation.run].spec
        for labels in evaluation.label_records():
            quantized = labels["precision"] != grid.FULL
            assert (spec.training_precision is not None) == quantized
            cells.setdefault((spec.size, evaluation.tokens, spec.seed), set()).add(labels["precision"])
    assert len(cells) == len(settings.sizes) * len(settings.budgets) * len(settings.seeds)
    assert all(precisions == {grid.FULL, "W4A4-g8", "W4A4-g8 branched"} for precisions in cells.values())
    runs = set(planner.runs)
    chen = study_settings(CHEN, config.studies["chen2025"], common)
    CHEN.plan(chen, common, planner)
    seed_repeats = chen.seeds
    shared = {
        e.run
        for e in evaluations
        if planner.runs[e.run].spec.seed in seed_repeats.extra
        and planner.runs[e.run].spec.size == seed_repeats.size
        and e.tokens == seed_repeats.budget
    }
    assert shared and shared <= runs  # planning Chen after the seed study adds none of these again
    assert len(set(planner.runs) - runs) > 0  # Chen's own grid still adds runs of its own


def test_each_branched_run_starts_from_its_partners_trunk_after_warmup(noise_config):
    config = resolve_config(noise_config)
    common = config.common()
    planner = Planner(common, common.corpus_id)
    evaluations = STUDY.plan(settings_of(config), common, planner)
    tokens_per_step = common.training.batch_size * common.training.seq_len
    branched = 0
    for evaluation in evaluations:
        spec = planner.runs[evaluation.run].spec
        if not any(labels["precision"].endswith(" branched") for labels in evaluation.label_records()):
            assert spec.start_from is None
            continue
        branched += 1
        trunk = planner.runs[planner.trunk_of(evaluation.run)]  # the cooldown's own trunk, which starts from ...
        start = trunk.spec.start_from
        source = planner.runs[start["run"]]
        assert source.spec.training_precision is None and source.spec.seed == spec.seed and source.spec.is_trunk
        assert start["tokens"] in source.branch_points and start["tokens"] % tokens_per_step == 0
        assert 0 <= start["tokens"] - source.spec.warmup_tokens < tokens_per_step
        assert planner.trunk_of(trunk.spec.run_id) == source.spec.run_id  # the DAG trains the source first
    settings = settings_of(config)
    assert branched == len(settings.sizes) * len(settings.budgets) * len(settings.seeds)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda b: b.update(anneal="cosine"), "config key studies.noise.branched: .* set anneal: wsd"),
        (lambda b: b.update(seeds=[0, 1, 2]), "studies.noise.seeds"),
        (lambda b: b["precision"].update(label="fp32"), "config key studies.noise.precision.label: 'fp32'"),
        (lambda b: b["precision"].update(training_precision={"weights": "int4:g7x"}),
         "config key studies.noise.precision.training_precision"),
        (lambda b: b.update(sizes=["N9M"]), "studies.noise.sizes"),
    ],
)  # fmt: skip
def test_bad_values_name_their_config_key(noise_config, edit, message):
    edit(noise_config["studies"]["noise"])
    with pytest.raises(ConfigError, match=message):
        settings_of(resolve_config(noise_config))


def synthetic_table(rng, sigma_loss=0.01, sigma_delta=0.02, seeds=7, sigma_branched=None):
    rows = []
    for size, n in (("N21k", 20904), ("N83k", 83000)):
        for budget in (500_000, 1_000_000):
            for seed in range(seeds):
                full = 3.8 - 0.1 * (n > 50_000) + sigma_loss * rng.standard_normal()
                delta = 0.05 + sigma_delta * rng.standard_normal()
                common = {"size": size, "N": n, "budget": budget, "D": budget, "seed": seed, "diverged": False}
                rows.append({**common, "precision": grid.FULL, "loss": full, "delta": np.nan})
                rows.append({**common, "precision": "W4A4-g8", "loss": full + delta, "delta": delta})
                if sigma_branched is not None:
                    delta = 0.04 + sigma_branched * rng.standard_normal()
                    rows.append({**common, "precision": "W4A4-g8 branched", "loss": full + delta, "delta": delta})
    return pd.DataFrame(rows)


def test_the_noise_model_holds_each_cells_robust_sigma_and_leaves_out_diverged_runs(tmp_path):
    table = synthetic_table(np.random.default_rng(0))
    wild = table.index[(table["size"] == "N21k") & (table["budget"] == 500_000) & (table["seed"] == 0)]
    table.loc[wild, ["loss", "delta"]] = [[9.0, np.nan], [9.5, 0.5]]  # a diverged seed, marked so
    table.loc[wild, "diverged"] = True
    models = analysis.noise_models(table)
    full = table["precision"] == grid.FULL
    for quantity, rows in (("loss", table[full]), ("delta", table[~full])):
        for (size, budget), cell in rows[~rows["diverged"]].groupby(["size", "budget"]):
            sigma = models[quantity].sigma(size, budget)
            assert sigma.runs == len(cell) and sigma.estimator == "MAD"
            assert sigma.value == pytest.approx(float(mad_scale(cell[quantity].to_numpy())))
    assert models["loss"].sigma("N21k", 500_000).runs == 6  # the diverged seed is left out
    analysis.noise_model_job({"table": _written(table, tmp_path)}, {"noise": tmp_path / "noise.json"}, {})
    assert read_noise_models(tmp_path / "noise.json") == models


def test_the_noise_model_recovers_a_known_sigma_over_many_tables():
    rng = np.random.default_rng(1)
    estimates = [analysis.noise_models(synthetic_table(rng, seeds=9))["delta"].sigma("N83k", 1_000_000).value
                 for _ in range(200)]  # fmt: skip
    assert np.mean(estimates) == pytest.approx(0.02, rel=0.08)  # the MAD's finite-sample factor makes it unbiased


def test_branched_runs_get_a_noise_model_of_their_own():
    rng = np.random.default_rng(3)
    tables = [synthetic_table(rng, seeds=9, sigma_branched=0.005) for _ in range(100)]
    models = [analysis.noise_models(table) for table in tables]
    assert "delta_branched" not in analysis.noise_models(synthetic_table(rng))
    for name, sigma in (("delta", 0.02), ("delta_branched", 0.005)):
        estimates = [model[name].sigma("N21k", 500_000).value for model in models]
        assert np.mean(estimates) == pytest.approx(sigma, rel=0.1)
    assert "branched" in models[0]["delta_branched"].quantity and "branched" not in models[0]["delta"].quantity


def _written(table, tmp_path):
    path = tmp_path / "noise.parquet"
    table.to_parquet(path)
    return path


def test_the_figure_draws_every_seed_and_names_each_cells_sigma():
    table = synthetic_table(np.random.default_rng(2), seeds=5)
    fig = noise_figure({"noise": table}, {})
    data = figure_data(fig)
    footer = " ".join(data["texts"])
    assert "σ_seed" in footer and "5 seeds" in footer and "N83k / 1M tokens" in footer
    seeds = [line["y"] for panel in data["axes"] for line in panel["lines"] if len(line["y"]) == 5]
    assert sum(map(len, seeds)) == len(table) + len(table) // 2  # every loss, then every δ


def test_the_figure_is_legible():
    """The smoke reference does not run the seed study, so test_figure_layout's checks run here on its table."""
    for branched in (None, 0.005):
        fig = noise_figure({"noise": synthetic_table(np.random.default_rng(2), seeds=5, sigma_branched=branched)}, {})
        assert not layout_problems(fig)


def test_the_claims_read_the_noise_model_exactly_when_the_seed_study_runs(noise_config):
    """Pipeline.claim_inputs names results/fits/noise.json (collect_claims' "noise") only where a job makes it."""
    assert Pipeline.from_config(noise_config).claim_inputs()["noise"] == NOISE_PATH
    without = {**noise_config, "studies": {k: v for k, v in noise_config["studies"].items() if k != "noise"}}
    assert "noise" not in Pipeline.from_config(without).claim_inputs()
