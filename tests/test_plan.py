"""`qscaling plan`: how many tokens the planned runs train, and how much the cooldown branches and specs shared
between studies save against one from-scratch run per scored checkpoint."""

import subprocess
import sys

from qscaling.pipeline import plan_all
from qscaling.plan import compute_reuse, trained_tokens


def test_a_branch_trains_only_its_cooldown_and_the_reuse_ratio_counts_every_run_once(default_config):
    planner, evaluations = plan_all(default_config)
    branch = next(plan for plan in planner.runs.values() if plan.spec.cooldown)
    start, trunk = branch.spec.cooldown["start_tokens"], planner.runs[branch.spec.cooldown["trunk"]]
    assert trained_tokens(branch) == branch.spec.total_steps * branch.spec.tokens_per_step - start
    assert trained_tokens(trunk) == trunk.spec.total_steps * trunk.spec.tokens_per_step > start

    checkpoints = {study: {(e.run, e.tokens) for e in found} for study, found in evaluations.items()}
    *studies, total = compute_reuse(planner, checkpoints)
    assert total["trained"] == sum(trained_tokens(plan) for plan in planner.runs.values())
    assert total["from_scratch"] == sum(tokens for run, tokens in set().union(*checkpoints.values()))
    assert total["reuse"] == total["from_scratch"] / total["trained"] > 1
    # A run counts as a study's own only if no other study needs it (nor a trunk of it).
    assert sum(row["runs"] for row in studies) < total["runs"]
    chen = next(row for row in studies if row["study"] == "chen2025")
    assert chen["runs"] > 0 and all(row["trained"] >= 0 for row in studies)


def test_a_training_curve_a_study_reads_counts_as_one_from_scratch_run_of_its_length(default_config):
    planner, _ = plan_all(default_config)
    curves = planner.curves["ouyang2024"]  # Fig. 14: BitNet and fp32 trunks, each read to 4M tokens
    block = default_config.studies["ouyang2024"]["bitnet"]
    assert len(curves) == 2 * (len(block["sizes"]) + len(block["extra_seeds"]))
    assert {tokens for _, tokens in curves} == {block["tokens"]}
    *_, total = compute_reuse(planner, {"ouyang2024": curves})
    assert total["from_scratch"] == len(curves) * block["tokens"]


def test_the_plan_command_prints_the_reuse_ratio():
    result = subprocess.run(
        [sys.executable, "-m", "qscaling.cli", "plan", "--scale", "smoke"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("smoke: ") and "compute reuse " in result.stdout
    # Every row's columns line up under the header, the longest study name included.
    lines = result.stdout.splitlines()
    header, *rows = lines[1 : next(i for i, line in enumerate(lines) if line.startswith("all ")) + 1]
    assert {row.index(row.split()[-1]) + len(row.split()[-1]) for row in rows} == {len(header)}
    assert any(row.startswith("kumar2024_training ") for row in rows)
    assert lines[-1].startswith("training compute ") and "GPU-hours" in lines[-1]


def test_a_target_is_planned_with_only_what_it_needs(capsys):
    from qscaling.cli import main

    assert main(["plan", "--scale", "smoke", "kumar2024_fig2"]) == 0
    figure = capsys.readouterr().out
    assert main(["plan", "--scale", "smoke", "all"]) == 0
    everything = capsys.readouterr().out
    runs = [int(text.split(": ")[1].split(" runs")[0]) for text in (figure, everything)]
    assert 0 < runs[0] < runs[1] and "checkpoints to score" in figure and "min on 2 CPU cores" in figure
    assert main(["plan", "--scale", "smoke", "results/tables/learning_curves.parquet"]) == 0
    assert "0 checkpoints to score" in capsys.readouterr().out


def test_the_paper_scale_is_priced_in_gpu_hours():
    result = subprocess.run(
        [sys.executable, "-m", "qscaling.cli", "plan", "--scale", "paper"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    hours = float(result.stdout.rsplit("≈ ", 1)[1].split(" GPU-hours")[0])
    assert 100 < hours < 1000  # ~1e20-1e21 FLOP of 30M-220M models at 400 TFLOP/s
