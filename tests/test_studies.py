"""Study plumbing: shared runs, the grids each study asks for, claims statistics, critical data size."""

import numpy as np
import pandas as pd
import pytest
import yaml

from qscaling.config import resolve_config
from qscaling.pipeline import learning_curve_runs, plan_all
from qscaling.plan import Planner
from qscaling.studies import kumar2024, ouyang2024
from qscaling.studies.claims import pooled_slope, slope_claim, verdict_from_interval
from qscaling.studies.kumar2024 import analysis as kumar_analysis
from qscaling.studies.kumar2024 import grid as kumar_grid
from qscaling.studies.kumar2024.settings import Kumar2024Settings
from qscaling.studies.ouyang2024 import analysis as ouyang_analysis
from qscaling.studies.ouyang2024 import grid as ouyang_grid
from qscaling.studies.registry import study_settings
from qscaling.studies.scoring import diverged_rows
from qscaling.studies.tables import build_study_table, split_diverged


@pytest.fixture(scope="module")
def default_config(repo_root):
    return resolve_config(yaml.safe_load((repo_root / "config.yaml").read_text()))


@pytest.fixture(scope="module")
def settings(default_config):
    """Kumar's and Ouyang's settings of the default config, and the shared sections."""
    common = default_config.common()
    typed = {
        s.name: study_settings(s, default_config.studies[s.name], common) for s in (kumar2024.STUDY, ouyang2024.STUDY)
    }
    return typed, common


@pytest.fixture(scope="module")
def planned(settings):
    """(planner, {study: evaluations}): the learning curves, Kumar's and Ouyang's grids planned together."""
    typed, common = settings
    planner = Planner(common, common.corpus_id)
    learning_curve_runs(common, planner)
    studies = (kumar2024.STUDY, ouyang2024.STUDY)
    return planner, {study.name: study.plan(typed[study.name], common, planner) for study in studies}


def test_every_study_shares_one_trunk_per_size(default_config, planned):
    planner, evaluations = planned
    default_recipe = {size: planner.trunk(size, upto=1) for size in default_config.ladder}
    trunks = {planner.runs[e.run].spec.size: e.run for e in evaluations["ouyang2024"]}
    assert trunks == default_recipe  # the learning curves, Ouyang and Kumar's branches: one trunk per size
    for evaluation in evaluations["kumar2024"]:
        spec = planner.runs[evaluation.run].spec
        if spec.cooldown and spec.seed == default_config.training.seed:  # the seed repeats have trunks of their own
            assert spec.cooldown["trunk"] == trunks[spec.size]
            assert spec.cooldown["start_tokens"] in planner.runs[trunks[spec.size]].branch_points
            assert planner.runs[trunks[spec.size]].spec.total_tokens > spec.cooldown["start_tokens"]


def test_kumar_grid_caps_compute_and_spans_tokens_per_parameter(settings, planned):
    planner, evaluations = planned
    study = settings[0]["kumar2024"]
    for evaluation in evaluations["kumar2024"]:
        n = planner.runs[evaluation.run].spec.shape.non_embedding_params
        assert n * evaluation.tokens <= study.max_ND and evaluation.tokens >= study.min_tokens_per_param * n
    smallest = min(planner.runs[e.run].spec.shape.non_embedding_params for e in evaluations["kumar2024"])
    ratios = [
        e.tokens / smallest
        for e in evaluations["kumar2024"]
        if planner.runs[e.run].spec.shape.non_embedding_params == smallest
    ]
    assert min(ratios) <= 25 and max(ratios) >= 450
    schedules = {planner.runs[e.run].spec.schedule for e in evaluations["kumar2024"]}
    assert any(planner.runs[e.run].spec.cooldown for e in evaluations["kumar2024"]) and "cosine" in schedules


def test_quantization_lists_follow_the_config(settings):
    typed, common = settings
    kumar = kumar_grid.quantizations(typed["kumar2024"])
    assert {q.label for q in kumar} >= {"gptq:int3:channel", "awq:int6:channel", "rtn:int4:channel"}
    ouyang = ouyang_grid.quantizations(typed["ouyang2024"], common)
    assert [q.spec for q in ouyang if q.method == "gptq"] == ["int2:g32:gptq", "int3:g32:gptq", "int4:g32:gptq"]
    assert all(q.splits == ("val", "ood") for q in ouyang if q.method == "gptq")
    assert ouyang_analysis.fit_names(typed["ouyang2024"])[2:] == [
        "compare_awq_int4_g32",
        "compare_rtn_fp_e2m1_b64",
    ]


def test_pooled_slope_recovers_a_known_exponent():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        [
            {"N": n, "D": d, "delta": 3e-4 * d**0.5 * n**-0.3 * np.exp(rng.normal(0, 0.01))}
            for n in (1e4, 1e5)
            for d in np.geomspace(1e5, 1e7, 6)
        ]
    )
    assert pooled_slope(frame, "D", "delta", "N") == pytest.approx(0.5, abs=0.02)
    row = slope_claim("test", "grows with D", frame, x="D", y="delta", by="N", expect="positive")
    assert row["verdict"] == "reproduced"
    assert (
        slope_claim("test", "falls with D", frame, x="D", y="delta", by="N", expect="negative")["verdict"]
        == "not reproduced"
    )


@pytest.mark.parametrize(
    "low, high, expect, verdict",
    [
        (0.1, 0.3, "positive", "reproduced"),
        (-0.3, -0.1, "positive", "not reproduced"),
        (-0.1, 0.3, "positive", "inconclusive"),
        (-0.3, -0.1, "negative", "reproduced"),
    ],
)
def test_verdicts(low, high, expect, verdict):
    assert verdict_from_interval(low, high, expect) == verdict


def test_critical_data_size_is_where_post_ptq_loss_turns_up():
    rows = [
        {"method": "gptq", "main": True, "split": "val", "N": 1000, "bits": 3, "D": d, "loss": loss}
        for d, loss in ((1e4, 5.0), (2e4, 4.8), (4e4, 4.9))
    ]
    rows += [
        {"method": "gptq", "main": True, "split": "val", "N": 1000, "bits": 6, "D": d, "loss": loss}
        for d, loss in ((1e4, 4.9), (2e4, 4.6), (4e4, 4.4))
    ]
    turns = kumar_analysis.critical_tokens(pd.DataFrame(rows)).set_index("bits")
    assert turns.loc[3, "turns_up"] and turns.loc[3, "D_best"] == 2e4
    assert not turns.loc[6, "turns_up"]


def test_a_diverged_checkpoint_scores_as_a_marked_row_and_a_study_without_a_rule_stops_at_it(default_config):
    from qscaling.studies.chen2025 import STUDY as chen

    planner, evaluations = plan_all(default_config)
    evaluation = next(e for e in evaluations["chen2025"] if e.labels and dict(e.labels[0])["precision"] == "W4A4")
    spec = planner.runs[evaluation.run].spec
    summary = {"run_id": evaluation.run, "spec": spec.to_dict(), "diverged": {"reason": "training loss is nan"}}
    rows = diverged_rows(summary, evaluation.tokens, evaluation.label_records())
    assert rows["diverged"].all() and (rows["N"] == spec.shape.non_embedding_params).all()
    assert (rows["D"] >= evaluation.tokens).all() and (rows["D"] % spec.tokens_per_step == 0).all()
    assert set(rows.columns) >= {"run", "size", "milestone", "precision", "G", "seed", "diverged_reason"}
    scored, diverged = split_diverged(rows)
    assert scored.empty and len(diverged) == len(rows)
    with pytest.raises(ValueError, match=rf"kumar2024: run\(s\) {evaluation.run} diverged and the study has no rule"):
        build_study_table(kumar2024.STUDY, rows, Kumar2024Settings.model_construct())
    assert chen.diverged_rule is not None
