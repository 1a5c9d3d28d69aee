"""Config validation: every malformed config fails before any job, with one line naming the key."""

import subprocess
import sys

import pytest
import yaml

from qscaling.config import ConfigError, corpus_id, deep_merge, resolve_config
from qscaling.plan import Planner, log_spaced_tokens
from qscaling.studies import plan_all


@pytest.fixture(scope="module")
def raw_config(repo_root):
    return yaml.safe_load((repo_root / "config.yaml").read_text())


@pytest.mark.parametrize("scale", ["default", "smoke"])
def test_committed_presets_are_valid(raw_config, scale):
    config = resolve_config({**raw_config, "scale": scale})
    assert config["scale"] == scale
    planner, evaluations = plan_all(config, corpus_id(config))
    assert planner.runs and all(evaluations.values())


MALFORMED = [
    ({"corpus": {"vocab_sizee": 512}}, r"config key corpus\.vocab_sizee: unknown key"),
    ({"trainng": {}}, r"config key trainng: unknown key"),
    ({"training": {"lr": "fast"}}, r"config key training\.lr: 'fast' is not of type 'number'"),
    ({"training": {"batch_size": 0}}, r"config key training\.batch_size"),
    ({"training": {"schedule": "linear"}}, r"config key training\.schedule"),
    ({"training": {"betas": [0.9]}}, r"config key training\.betas"),
    ({"corpus": {"sources": ["wikipedia"]}}, r"config key corpus\.sources\.0"),
    ({"corpus": {"val_fraction": 1.5}}, r"config key corpus\.val_fraction"),
    ({"corpus": {"vocab_size": 70000}}, r"config key corpus\.vocab_size"),
    ({"ladder": {"N25k": {"d_model": 33}}}, r"config key ladder\.N25k: model shape: d_model=33 is not divisible"),
    ({"ladder": {"N25k": {"n_layers": 2.5}}}, r"config key ladder\.N25k\.n_layers"),
    ({"ladder": {"N25k": {"d_model": 36, "n_heads": 4}}}, r"config key ladder\.N25k: .*head dim 9 must be even"),
    ({"learning_curves": {"sizes": ["N1G"]}}, r"config key learning_curves\.sizes\.0: size 'N1G' is not in ladder"),
    ({"learning_curves": {"first_milestone": 10**9}}, r"config key learning_curves\.first_milestone"),
    ({"scale": "huge"}, r"config key scale: 'huge' is not a preset"),
    ({"device": "tpu"}, r"config key device"),
    ({"corpus": {"kind": "local", "local_files": []}}, r"config key corpus\.local_files"),
]


@pytest.mark.parametrize("override, message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_config_names_the_key(raw_config, override, message):
    with pytest.raises(ConfigError, match=message) as caught:
        resolve_config(deep_merge(raw_config, override))
    assert "\n" not in str(caught.value)


def test_malformed_config_stops_snakemake_before_any_job(repo_root, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(repo_root / "Snakefile"), "--directory", str(tmp_path),
         "--cores", "1", "--config", "scale=smoke", "device=tpu"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0
    assert "config key device" in result.stdout + result.stderr
    assert not (tmp_path / "results").exists()


def test_runs_are_shared_and_identified_by_spec(raw_config):
    config = resolve_config({**raw_config, "scale": "smoke"})
    planner = Planner(config, corpus_id(config))
    a = planner.spec("N3k", 40960)
    assert a.run_id == planner.spec("N3k", 40960).run_id
    assert a.run_id != planner.spec("N3k", 40960, seed=1).run_id
    assert a.run_id != planner.spec("N3k", 40960, weight_decay=0.01).run_id
    assert a.run_id.startswith("N3k-")
    first = planner.cosine("N3k", 40960)
    assert planner.cosine("N3k", 40960) == first and len(planner.runs) == 1


def test_log_spaced_milestones():
    assert log_spaced_tokens(1000, 1_000_000, 4) == [1000, 10000, 100000, 1_000_000]
