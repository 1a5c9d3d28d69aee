"""Your own models in the PTQ studies: HF-format directories named in the config (`source: local`) are imported,
scored and fitted like the workflow's own runs — the worked example of docs/your-own-models.md, on checkpoints
the smoke run trained."""

import copy
import shutil

import pandas as pd
import pytest
import yaml
from conftest import REPO_ROOT, run_snakemake

from qscaling.config import ConfigError, resolve_config
from qscaling.plan import Planner
from qscaling.studies import kumar2024, ouyang2024
from qscaling.studies.registry import study_settings

MATCH = ["D", "method", "spec", "split"]
SCORES = ["N", "loss", "base_loss", "delta", "delta_se"]


def smoke_config() -> dict:
    return {**yaml.safe_load((REPO_ROOT / "config.yaml").read_text()), "scale": "smoke"}


def checked(raw: dict, study):
    """(`study`'s settings, the shared sections) of `raw`, its block checked as the DAG build checks it."""
    config = resolve_config(raw)
    return study_settings(study, config.studies[study.name], config.common()), config.common()


def local_block(run_dir, label: str) -> list[dict]:
    """Every checkpoint of one of the smoke run's Ouyang trunks, as `local` entries."""
    table = pd.read_parquet(run_dir / "results" / "tables" / "ouyang2024.parquet")
    runs = table[table["size"] == label]
    run = runs["run"].iloc[0]
    return [
        {"label": f"my-{label}", "path": str(run_dir / "results" / "runs" / run / "checkpoints" / milestone), "tokens": int(d)}
        for milestone, d in sorted(
            {(f"tokens_{m:012d}", d) for m, d in runs[["milestone", "D"]].itertuples(index=False)}, key=lambda x: x[1]
        )
    ]  # fmt: skip


def test_local_entries_are_checked_before_any_job(tmp_path):
    config = smoke_config()
    config["studies"]["ouyang2024"].update(
        source="local", local=[{"label": "mine", "path": str(tmp_path), "tokens": 10}]
    )
    with pytest.raises(ConfigError, match=r"studies.ouyang2024.local.0.path: .* is not an HF-format model directory"):
        checked(config, ouyang2024.STUDY)
    (tmp_path / "config.json").write_text("{}")
    twice = copy.deepcopy(config)
    twice["studies"]["ouyang2024"]["local"] *= 2
    with pytest.raises(ConfigError, match="studies.ouyang2024.local.1: mine at 10 tokens is also entry 0"):
        checked(twice, ouyang2024.STUDY)
    config["studies"]["kumar2024"].update(source="local", local=None)
    with pytest.raises(ConfigError, match="studies.kumar2024.local: source 'local' needs at least one"):
        checked(config, kumar2024.STUDY)
    config["studies"]["kumar2024"]["local"] = [{"label": "mine", "path": str(tmp_path), "repo": "org/m", "tokens": 10}]
    with pytest.raises(ConfigError, match=r"studies.kumar2024.local.0: give either path .* or repo"):
        checked(config, kumar2024.STUDY)
    config["studies"]["kumar2024"]["local"] = [
        {"label": "mine", "path": str(tmp_path), "tokens": 10},
        {"label": "theirs", "repo": "org/model", "revision": "step9", "tokens": 20},
    ]
    checked(config, ouyang2024.STUDY)  # its entry's directory now holds a config.json
    settings, common = checked(config, kumar2024.STUDY)
    planner = Planner(common, common.corpus_id)
    evaluations = kumar2024.STUDY.plan(settings, common, planner)
    assert [(e.run, e.tokens) for e in evaluations] == [("local-mine", 10), ("hub-theirs", 20)]
    assert planner.hub_runs["local-mine"].revisions == {10: str(tmp_path)}
    assert planner.hub_runs["hub-theirs"].repo == "org/model" and planner.hub_runs["hub-theirs"].revisions == {
        20: "step9"
    }


@pytest.mark.slow
def test_your_own_checkpoints_score_like_the_runs_they_are(smoke_run, tmp_path):
    """The smoke run's own trunk checkpoints, imported as `my-N3k` / `my-N7k`, give bit-identical QiD rows."""
    workdir = tmp_path / "run"
    shutil.copytree(smoke_run, workdir, symlinks=True, ignore=shutil.ignore_patterns("tables", "fits", "figures"))
    source = smoke_run
    entries = local_block(source, "N3k") + local_block(source, "N7k")
    configfile = tmp_path / "mine.yaml"
    configfile.write_text(yaml.safe_dump({"studies": {"ouyang2024": {"source": "local", "local": entries}}}))
    result = run_snakemake(
        workdir, "--configfile", str(REPO_ROOT / "config.yaml"), str(configfile), "--",
        "results/tables/ouyang2024.parquet", "ouyang2024_fig3",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    mine = pd.read_parquet(workdir / "results" / "tables" / "ouyang2024.parquet")
    ours = pd.read_parquet(source / "results" / "tables" / "ouyang2024.parquet")
    assert set(mine["size"]) == {"my-N3k", "my-N7k"} and set(mine["run"]) == {"local-my-N3k", "local-my-N7k"}
    for label in ("N3k", "N7k"):
        theirs = ours[ours["size"] == label].sort_values(MATCH).reset_index(drop=True)
        imported = mine[mine["size"] == f"my-{label}"].sort_values(MATCH).reset_index(drop=True)
        pd.testing.assert_frame_equal(imported[MATCH + SCORES], theirs[MATCH + SCORES])
    assert (workdir / "figures" / "ouyang2024" / "fig3.png").is_file()
