"""A study is a plug-in: one registered from tests/plugins (config block only, no generic code edited) is
planned, scored, tabulated, claimed and drawn by the real workflow."""

import json
import os
import shutil

import pandas as pd
import pytest
import yaml
from conftest import REPO_ROOT, run_snakemake

from qscaling.config import ConfigError
from qscaling.pipeline import resolve

PLUGINS = REPO_ROOT / "tests" / "plugins"
PLUGIN_ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(PLUGINS), os.environ.get("PYTHONPATH")]))}


@pytest.fixture
def raw_config():
    return yaml.safe_load((REPO_ROOT / "config.yaml").read_text())


def with_toy_study(raw_config: dict) -> dict:
    config = json.loads(json.dumps(raw_config))
    config["studies"].update(yaml.safe_load((PLUGINS / "toy2025.yaml").read_text())["studies"])
    return config


def test_a_plugin_block_is_checked_by_its_own_module(raw_config, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    config = with_toy_study({**raw_config, "scale": "smoke"})
    assert list(resolve(config)[1]) == [
        "ladder",
        "kumar2024",
        "ouyang2024",
        "ahmadian2023",
        "chen2025",
        "sun2025",
        "kumar2024_training",
        "toy2025",
    ]
    config["studies"]["toy2025"]["sizes"] = ["N3k", "N9z"]
    with pytest.raises(ConfigError, match=r"studies.toy2025.sizes.1: size 'N9z' is not in ladder"):
        resolve(config)
    config["studies"]["toy2025"]["module"] = "no_such_study"
    with pytest.raises(ConfigError, match="studies.toy2025: no study module 'no_such_study'"):
        resolve(config)
    unregistered = with_toy_study({**raw_config, "scale": "smoke"})
    del unregistered["studies"]["toy2025"]["module"]
    with pytest.raises(ConfigError, match="config key studies.toy2025: not a built-in study"):
        resolve(unregistered)
    config["studies"]["toy2025"]["module"] = "toy2025"
    config["studies"]["toy2025"]["bitz"] = [4]
    with pytest.raises(ConfigError, match=r"config key studies.toy2025.bitz: unknown key \(valid here: bits,"):
        resolve(config)


@pytest.mark.slow
def test_the_workflow_builds_a_plugin_studys_figure(smoke_run, tmp_path):
    """On a copy of a finished smoke run, the plug-in's figure needs only its own jobs: its scoring of the shared
    trunks' checkpoints (nothing trained), its table and its figure; its claim joins the claims table."""
    workdir = tmp_path / "run"
    shutil.copytree(smoke_run, workdir, symlinks=True)
    configfile = ("--configfile", str(REPO_ROOT / "config.yaml"), str(PLUGINS / "toy2025.yaml"))
    planned = run_snakemake(workdir, "--dry-run", "--quiet", "rules", *configfile, "--", "toy2025_fig1", env=PLUGIN_ENV)
    assert planned.returncode == 0, planned.stderr[-3000:]
    jobs = dict(
        line.split() for line in planned.stdout.splitlines() if len(line.split()) == 2 and line.split()[1].isdigit()
    )
    assert jobs == {"score_toy2025": "2", "collect_study_table": "1", "toy2025_fig1": "1", "total": "4"}, planned.stdout

    built = run_snakemake(workdir, *configfile, "--", "figures/toy2025/fig1.png", "results/claims.csv", env=PLUGIN_ENV)
    assert built.returncode == 0, built.stderr[-3000:]
    table = pd.read_parquet(workdir / "results" / "tables" / "toy2025.parquet")
    assert set(table["variant"]) == {"toy"} and len(table) == 2 * (1 + 3)  # two sizes × (unquantized + 3 RTN)
    drawn = json.loads((workdir / "figures" / "toy2025" / "fig1.data.json").read_text())
    points = [point for axis in drawn["axes"] for series in axis["lines"] for point in series["x"]]
    assert len(drawn["axes"]) == 1 and sorted(points) == sorted(table.loc[table["method"] == "rtn", "bits"].tolist())
    claims = pd.read_csv(workdir / "results" / "claims.csv")
    [toy] = claims[claims["study"] == "toy2025"].to_dict("records")
    assert toy["verdict"] in ("reproduced", "inconclusive")
