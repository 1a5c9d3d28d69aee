"""`branched` in the partnered studies (Chen, Sun, Kumar's training precisions): each quantized run starts from its
full-precision partner's trunk after warmup instead of from scratch (the default); off, no run starts from another."""

from pathlib import Path

import pytest
import yaml

from qscaling.config import ConfigError, resolve_config
from qscaling.plan import Planner
from qscaling.studies.registry import load_study, study_settings

PARTNERED = ["chen2025", "sun2025", "kumar2024_training"]


def planned(raw_config, study: str):
    config = resolve_config(raw_config)
    common = config.common()
    planner = Planner(common, common.corpus_id)
    plugin = load_study(study, f"qscaling.studies.{study}")
    evaluations = plugin.plan(study_settings(plugin, config.studies[study], common), common, planner)
    return planner, evaluations


@pytest.mark.parametrize("study", PARTNERED)
def test_a_branched_study_starts_every_quantized_run_from_its_partners_trunk(raw_config, study):
    raw_config["studies"][study]["branched"] = False
    planner, evaluations = planned(raw_config, study)
    assert not any(plan.spec.start_from for plan in planner.runs.values())  # the papers' runs: from scratch
    raw_config["studies"][study]["branched"] = True
    planner, evaluations = planned(raw_config, study)
    quantized = {e.run for e in evaluations if planner.runs[e.run].spec.training_precision}
    assert quantized
    for run in quantized:
        spec = planner.runs[run].spec
        trunk = planner.runs[planner.trunk_of(run)].spec  # the cooldown's trunk, quantized like its branch
        source = planner.runs[trunk.start_from["run"]]
        assert trunk.training_precision == spec.training_precision and trunk.seed == spec.seed
        assert source.spec.training_precision is None and source.spec.is_trunk and source.spec.seed == spec.seed
        assert source.spec.lr == spec.lr and trunk.start_from["tokens"] in source.branch_points
    partners = {e.run for e in evaluations} - quantized
    assert partners and not any(planner.runs[planner.trunk_of(run)].spec.start_from for run in partners)


@pytest.mark.parametrize("study", PARTNERED)
def test_branched_needs_the_wsd_trunk_it_starts_from(raw_config, study):
    raw_config["studies"][study] |= {"branched": True, "anneal": "cosine"}
    with pytest.raises(ConfigError, match=rf"config key studies\.{study}\.branched: .* set anneal: wsd"):
        planned(raw_config, study)


def test_the_default_branches_every_partnered_study_and_the_overlay_trains_them_from_scratch(raw_config):
    for study in PARTNERED:
        planner, _ = planned(raw_config, study)
        assert any(plan.spec.start_from for plan in planner.runs.values()), study
    overlay = yaml.safe_load((Path(__file__).parents[1] / "workflow" / "overlays" / "from_scratch.yaml").read_text())
    assert sorted(overlay["studies"]) == sorted(PARTNERED)
    for study, block in overlay["studies"].items():
        raw_config["studies"][study] |= block
    for study in PARTNERED:
        planner, _ = planned(raw_config, study)
        assert not any(plan.spec.start_from for plan in planner.runs.values()), study
