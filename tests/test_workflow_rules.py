"""Every rule of the parsed workflow (loop-generated ones included) declares a log, a benchmark and resources.

The rules are enumerated by Snakemake itself, loading the Snakefile at the repository root with its default
config, not by reading .smk files: a rule made in a loop (`for figure in …: rule: name: …`) or through `use
rule` is invisible to text, and it is the rule Snakemake will run.
"""

import json
import subprocess
import sys

import pytest
from conftest import REPO_ROOT

# Run in a child process: loading a workflow changes the working directory and sets up Snakemake's logging.
DESCRIBE_RULES = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ResourceSettings

snakefile, workdir = map(Path, sys.argv[1:])
with SnakemakeApi() as api:
    workflow = api.workflow(ResourceSettings(cores=1), snakefile=snakefile, workdir=workdir)._workflow
    rules = [
        {
            "name": rule.name,
            "outputs": [str(path) for path in rule.output],
            "logs": [str(path) for path in rule.log],
            "benchmark": None if rule.benchmark is None else str(rule.benchmark),
            "resources": sorted(name for name in rule.resources if not name.startswith("_")),
        }
        for rule in workflow.rules
    ]
print(json.dumps(rules))
"""


def parsed_rules(snakefile, workdir) -> list[dict]:
    """Every rule of the workflow `snakefile` as Snakemake parses it: name, outputs, logs, benchmark, resources."""
    result = subprocess.run(
        [sys.executable, "-c", DESCRIBE_RULES, str(snakefile), str(workdir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def undeclared(rules: list[dict]) -> list[str]:
    """'rule: what it lacks' for each rule that writes files without a log under logs/, a benchmark under
    benchmarks/ or its memory and runtime (the STYLE rule: logs and timings live there, ignored by git)."""
    problems = []
    for rule in rules:
        if not rule["outputs"]:
            continue  # a target rule such as `all` runs nothing
        if not rule["logs"] or not all(path.startswith("logs/") for path in rule["logs"]):
            problems.append(f"{rule['name']}: no log under logs/ (has {rule['logs']})")
        if not (rule["benchmark"] or "").startswith("benchmarks/"):
            problems.append(f"{rule['name']}: no benchmark under benchmarks/ (has {rule['benchmark']!r})")
        missing = {"mem_mb", "runtime"} - set(rule["resources"])
        if missing:
            problems.append(f"{rule['name']}: declares no {', '.join(sorted(missing))}")
    return problems


@pytest.fixture(scope="module")
def workflow_rules(tmp_path_factory) -> list[dict]:
    return parsed_rules(REPO_ROOT / "Snakefile", tmp_path_factory.mktemp("workflow"))


def test_every_rule_of_the_parsed_workflow_declares_log_benchmark_and_resources(workflow_rules, tmp_path):
    listed = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"), "-d", str(tmp_path), "--list-rules"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr[-3000:]
    names = [rule["name"] for rule in workflow_rules]
    assert sorted(names) == sorted(line.split()[0] for line in listed.stdout.splitlines() if line.strip())
    # Made in loops (figures.smk, ahmadian2023.smk): the rules a text split of the .smk files never saw.
    assert {"kumar2024_fig2", "ouyang2024_fig3", "ahmadian2023_fig2", "ahmadian2023_table4"} <= set(names)
    producing = [rule for rule in workflow_rules if rule["outputs"]]
    print(f"{len(names)} rules parsed, {len(producing)} write files")
    assert len(producing) == len(names) - 1  # all but `all`
    assert undeclared(workflow_rules) == []


def test_a_rule_added_without_log_or_benchmark_is_caught(workflow_rules, tmp_path):
    # The root Snakefile reads config.yaml beside the main Snakefile, here the one in tmp_path.
    (tmp_path / "config.yaml").symlink_to(REPO_ROOT / "config.yaml")
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(
        f'include: "{REPO_ROOT / "Snakefile"}"\n\n\n'
        "rule count_tokens:\n"
        '    output:\n        "results/token_count.txt",\n'
        "    resources:\n        mem_mb=100,\n        runtime=1,\n"
        '    shell:\n        "echo 0 > {output}"\n'
    )
    rules = parsed_rules(snakefile, tmp_path / "work")
    assert len(rules) == len(workflow_rules) + 1
    assert undeclared(rules) == [
        "count_tokens: no log under logs/ (has [])",
        "count_tokens: no benchmark under benchmarks/ (has None)",
    ]
