"""Config validation: every malformed config fails before any job, with one line naming the key."""

import subprocess
import sys

import pytest
import yaml
from conftest import REPO_ROOT

from qscaling.config import ConfigError, deep_merge, resolve_config
from qscaling.pipeline import plan_all, resolve
from qscaling.plan import Planner, log_spaced_tokens


@pytest.fixture(scope="module")
def raw_config(repo_root):
    return yaml.safe_load((repo_root / "config.yaml").read_text())


@pytest.mark.parametrize("scale", ["default", "smoke"])
def test_committed_presets_are_valid(raw_config, scale):
    config, studies = resolve({**raw_config, "scale": scale})
    assert config.scale == scale and list(studies) == list(raw_config["studies"])
    planner, evaluations = plan_all(config, studies)
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
    ({"ladder": {"N21k": {"d_model": 25}}}, r"config key ladder\.N21k: model shape: d_model=25 is not divisible"),
    ({"ladder": {"N21k": {"n_layers": 2.5}}}, r"config key ladder\.N21k\.n_layers"),
    ({"ladder": {"N21k": {"d_model": 36, "n_heads": 4}}}, r"config key ladder\.N21k: .*head dim 9 must be even"),
    ({"learning_curves": {"sizes": ["N1G"]}}, r"config key learning_curves\.sizes\.0: size 'N1G' is not in ladder"),
    ({"learning_curves": {"first_milestone": 10**9}}, r"config key learning_curves\.first_milestone"),
    ({"scale": "huge"}, r"config key scale: 'huge' is not a preset"),
    ({"device": "tpu"}, r"config key device"),
    ({"corpus": {"kind": "local", "local_files": []}}, r"config key corpus\.local_files"),
    ({"ptq": {"gptq_damp": 0}}, r"config key ptq\.gptq_damp"),
]

# A malformed value in every key that holds a quantization spec, a precision, a size or a recipe value: each
# must stop the parse, naming the key, rather than a job hours later.
SPECS = "studies.{}".format
MALFORMED_SPECS = [
    (
        {"studies": {"ouyang2024": {"compare": ["awq:int9:g32"]}}},
        SPECS(r"ouyang2024\.compare\.0: .*bits must be 2\.\.8"),
    ),
    (
        {"studies": {"ouyang2024": {"compare": ["rtn:int4:g8", "gptq:fp:e2m1:unscaled"]}}},
        SPECS(r"ouyang2024\.compare\.1: gptq needs tensor, channel, group granularity"),
    ),
    (
        {"studies": {"ouyang2024": {"compare": ["w8a8:int8:channel"]}}},
        SPECS(r"ouyang2024\.compare\.0: 'w8a8:int8:channel' does not match"),
    ),
    (
        {"studies": {"ouyang2024": {"compare": ["awq:int4:g{groups}"]}}},
        SPECS(r"ouyang2024\.compare\.0: .*unknown placeholder 'groups'"),
    ),
    (
        {"studies": {"ouyang2024": {"compare": ["rtn:fp:e9m2:b32"]}}},
        SPECS(r"ouyang2024\.compare\.0: quant spec 'fp:e9m2:b32'"),
    ),
    ({"studies": {"ouyang2024": {"gptq_bits": [9]}}}, SPECS(r"ouyang2024\.gptq_bits\.0")),
    ({"studies": {"ouyang2024": {"first_checkpoint": 10**8}}}, SPECS(r"ouyang2024\.first_checkpoint: must be below")),
    (
        {"studies": {"ouyang2024": {"sizes": ["N21k", "N9M"]}}},
        SPECS(r"ouyang2024\.sizes\.1: size 'N9M' is not in ladder"),
    ),
    ({"studies": {"kumar2024": {"weight_format": "int{bits}:g0"}}}, SPECS(r"kumar2024\.weight_format: .*group size")),
    (
        {"studies": {"kumar2024": {"sizes": ["N21k", "N83k"], "seeds": {"sizes": ["N201k"]}}}},
        SPECS(r"kumar2024\.seeds\.sizes: N201k is not one of"),
    ),
    ({"studies": {"kumar2024": {"seeds": {"budget": 3000000}}}}, SPECS(r"kumar2024\.seeds\.budget: 3000000 is not")),
    ({"studies": {"kumar2024": {"seeds": {"extra": [0]}}}}, SPECS(r"kumar2024\.seeds\.extra: repeats the recipe's")),
    (
        {"studies": {"kumar2024": {"weight_format": "int{bits}:token"}}},
        SPECS(r"kumar2024\.weight_format: gptq needs tensor, channel, group granularity, got 'int3:token'"),
    ),
    (
        {"studies": {"kumar2024": {"weight_format": "int{bits}:channel:asym:gptq"}}},
        SPECS(r"kumar2024\.weight_format: quant spec 'int3:channel:asym:gptq'"),
    ),
    ({"studies": {"kumar2024": {"weight_format": "int{bits}:chanel"}}}, SPECS(r"kumar2024\.weight_format: .*'chanel'")),
    ({"studies": {"kumar2024": {"methods": ["gptq", "hqq"]}}}, SPECS(r"kumar2024\.methods\.1")),
    ({"studies": {"kumar2024": {"sizes": ["N1G"]}}}, SPECS(r"kumar2024\.sizes\.0: size 'N1G' is not in ladder")),
    (
        {"studies": {"kumar2024": {"schedule_ablation": {"size": "N1M"}}}},
        SPECS(r"kumar2024\.schedule_ablation\.size: size 'N1M' is not in ladder"),
    ),
    ({"studies": {"ahmadian2023": {"w4": "int4:chanel"}}}, SPECS(r"ahmadian2023\.w4: quant spec 'int4:chanel'")),
    ({"studies": {"ahmadian2023": {"w8a8_weights": "int16:channel"}}}, SPECS(r"ahmadian2023\.w8a8_weights: .*bits")),
    ({"studies": {"ahmadian2023": {"w8a8_weights": 8}}}, SPECS(r"ahmadian2023\.w8a8_weights")),
    ({"studies": {"ahmadian2023": {"recipe": {"precision": "fp8"}}}}, SPECS(r"ahmadian2023\.recipe\.precision")),
    (
        {"studies": {"ahmadian2023": {"outlier_prone": {"precision": "int8"}}}},
        SPECS(r"ahmadian2023\.outlier_prone\.precision"),
    ),
    (
        {"studies": {"ahmadian2023": {"ablations": {"precision": {"values": ["bf16", "fp8"]}}}}},
        SPECS(r"ahmadian2023\.ablations\.precision\.values\.1: precision 'fp8'"),
    ),
    (
        {"studies": {"ahmadian2023": {"ablations": {"dropout": {"values": [0.0, 1.5]}}}}},
        SPECS(r"ahmadian2023\.ablations\.dropout\.values\.1: dropout 1\.5"),
    ),
    (
        {
            "studies": {
                "ahmadian2023": {"ablations": {"grad_clip": {"values": [None, 1.0], "with": {"weight_decay": -1}}}}
            }
        },
        SPECS(r"ahmadian2023\.ablations\.grad_clip\.with\.weight_decay: weight_decay -1"),
    ),
    (
        {
            "studies": {
                "ahmadian2023": {
                    "ablations": {"precision": {"values": ["bf16", "fp16"], "across": {"weight_decay": [0.1, -0.5]}}}
                }
            }
        },
        SPECS(r"ahmadian2023\.ablations\.precision\.across\.weight_decay\.1: weight_decay -0\.5"),
    ),
    ({"studies": {"ahmadian2023": {"size": "N6B"}}}, SPECS(r"ahmadian2023\.size: size 'N6B' is not in ladder")),
    ({"studies": {"ahmadian2023": {"sizes": ["N21k", "N6B"]}}}, SPECS(r"ahmadian2023\.sizes\.1: size 'N6B'")),
    ({"training": {"autocast": "fp8"}}, r"config key training\.autocast"),
]


@pytest.mark.parametrize("override, message", MALFORMED_SPECS, ids=[m for _, m in MALFORMED_SPECS])
def test_malformed_spec_fails_at_parse_naming_the_key(raw_config, override, message):
    with pytest.raises(ConfigError, match=message) as caught:
        resolve(deep_merge(raw_config, override))
    assert str(caught.value).startswith("config key ") and "\n" not in str(caught.value)


def test_every_committed_preset_parses_every_spec(raw_config):
    for scale in raw_config["presets"]:
        resolve({**raw_config, "scale": scale})


@pytest.mark.parametrize("override, message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_config_names_the_key(raw_config, override, message):
    with pytest.raises(ConfigError, match=message) as caught:
        resolve(deep_merge(raw_config, override))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "override, key",
    [
        ("device: tpu", "config key device"),
        ("studies: {ouyang2024: {compare: ['awq:int9:g32']}}", "config key studies.ouyang2024.compare.0"),
        ("studies: {kumar2024: {weight_format: 'int{bits}:g0'}}", "config key studies.kumar2024.weight_format"),
    ],
)
def test_malformed_config_stops_snakemake_before_any_job(repo_root, tmp_path, override, key):
    overrides = tmp_path / "override.yaml"
    overrides.write_text(override + "\n")
    workdir = tmp_path / "run"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(repo_root / "Snakefile"),
            "--directory",
            str(workdir),
            "--cores",
            "1",
            "--configfile",
            str(overrides),
            "--config",
            "scale=smoke",
            "--dry-run",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert key in result.stdout + result.stderr
    assert not (workdir / "results").exists()


def test_runs_are_shared_and_identified_by_spec(raw_config):
    config = resolve_config({**raw_config, "scale": "smoke"})
    planner = Planner(config.common(), config.corpus_id)
    a = planner.spec("N3k", 40960)
    assert a.run_id == planner.spec("N3k", 40960).run_id
    assert a.run_id != planner.spec("N3k", 40960, seed=1).run_id
    assert a.run_id != planner.spec("N3k", 40960, weight_decay=0.01).run_id
    assert a.run_id.startswith("N3k-")
    first = planner.cosine("N3k", 40960)
    assert planner.cosine("N3k", 40960) == first and len(planner.runs) == 1


def test_log_spaced_milestones():
    assert log_spaced_tokens(1000, 1_000_000, 4) == [1000, 10000, 100000, 1_000_000]


def test_the_dag_is_planned_without_importing_torch(tmp_path):
    """Building the default DAG — the config check with its spec grammar, every study's plan, jobs and artifacts,
    the declared figures — imports no torch (~1 s of every rerun, a no-op one included)."""
    command = [sys.executable, "-X", "importtime", "-m", "snakemake", "--snakefile", str(REPO_ROOT / "Snakefile")]
    command += ["--directory", str(tmp_path), "--config", "scale=default", "--cores", "1", "-n", "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    imported = {
        line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time")
    }
    assert "snakemake" in imported and "qscaling.studies.registry" in imported
    assert not imported & {"torch", "transformers"}


@pytest.mark.parametrize(
    ("version_py", "built_for_a_gpu"),
    [
        ("cuda: Optional[str] = None\nhip: Optional[str] = None\n", False),
        ("cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n", True),
        ("cuda = None\nhip = '6.2'\n", True),
        ("cuda = None\n", True),  # unreadable: torch itself is asked
        (None, True),
    ],
)
def test_auto_device_reads_the_torch_build_without_importing_torch(monkeypatch, tmp_path, version_py, built_for_a_gpu):
    import importlib.util
    from types import SimpleNamespace

    from qscaling import device

    if version_py is not None:
        (tmp_path / "version.py").write_text(version_py)
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: SimpleNamespace(submodule_search_locations=[tmp_path])
    )
    assert device._torch_built_for_a_gpu() is built_for_a_gpu
