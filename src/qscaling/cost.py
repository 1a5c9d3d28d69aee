"""`qscaling plan [TARGET ...]`: what a config, or one of its targets, costs before it runs — the runs it trains
(shared specs and cooldown branches counted once), the tokens they train, their compute, and the time it takes.

    qscaling plan                               every run of the default preset and the compute its reuse saves
    qscaling plan kumar2024_fig2                what that figure alone needs (a rule name or an output path)
    qscaling plan --scale paper                 the paper-scale grid, with its GPU-hours
    qscaling plan --power --noise noise.json    each claim's expected effect beside the smallest one it resolves
"""

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from qscaling.config import ConfigError, deep_merge
from qscaling.layout import LEARNING_CURVES
from qscaling.noise import NOISE_PATH, ClaimNoise
from qscaling.pipeline import CONFIG_PATH, Pipeline
from qscaling.plan import Planner, compute_reuse, trained_tokens, training_flops

# A sustained training throughput to turn FLOPs into GPU-hours: ~40 % of an H100's 989 TFLOP/s dense bf16 (a
# typical model FLOP utilisation for 100M-parameter models; small ones reach less).
GPU_FLOPS = 400e12
# This CPU project's own rates, measured on the default grid (2-core AMD EPYC, make figures of 2026-12-05): 145.9M
# tokens trained in 3,915 s of job time, 280 checkpoints scored in 1,180 s.
CPU_TOKENS_PER_SECOND = 37_000
CPU_SECONDS_PER_CHECKPOINT = 4.2


def read_yaml(path: str | Path) -> dict:
    """A config file's mapping; ConfigError naming the file and line of a YAML error."""
    try:
        loaded = yaml.safe_load(Path(path).read_text())
    except OSError as error:
        raise ConfigError(f"config file {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"config file {where}: invalid YAML ({getattr(error, 'problem', None) or error})") from None
    if not isinstance(loaded, dict | None):
        raise ConfigError(f"config file {path}: expected a mapping of config keys, got {type(loaded).__name__}")
    return loaded or {}


def load_config(configfiles=(), scale: str = "default") -> dict:
    """The embedded config.yaml with each of `configfiles` merged over it, as Snakemake's --configfile does,
    and `scale` chosen."""
    raw = read_yaml(CONFIG_PATH)
    for path in configfiles:
        raw = deep_merge(raw, read_yaml(path))
    return {**raw, "scale": scale}


def add_arguments(parser) -> None:
    parser.add_argument("targets", nargs="*", metavar="TARGET", help="rules or output paths (default: everything)")
    parser.add_argument("--scale", default="default", help="config preset (default: default)")
    parser.add_argument(
        "--configfile",
        nargs="+",
        default=[],
        metavar="FILE",
        help="config files merged over the embedded config.yaml, in order, as Snakemake's --configfile merges them",
    )
    parser.add_argument("--cores", type=int, default=2, help="cores the time estimate assumes (default: 2)")
    parser.add_argument(
        "--power",
        action="store_true",
        help="per claim between trained runs: the effect the paper's law predicts on this grid beside the smallest "
        "effect the seed noise lets it resolve",
    )
    parser.add_argument(
        "--noise",
        metavar="FILE",
        help=f"the seed study's noise model the power reads σ_seed from (default: {NOISE_PATH} if it exists)",
    )


def run(args) -> int:
    """`qscaling plan`: the runs a config (or TARGET) trains, their tokens and compute, and what reuse saves."""
    pipeline = Pipeline.from_config(load_config(args.configfile, args.scale))
    if args.power:
        print_power(pipeline, args.noise or (NOISE_PATH if Path(NOISE_PATH).exists() else None))
        return 0
    if args.targets:
        print_target(pipeline, args.targets, args.cores)
        return 0
    planner = pipeline.planner
    # What each study reads of the runs: scored checkpoints and training curves, each one from-scratch run's worth.
    checkpoints = {
        study: {(e.run, e.tokens) for e in found} | planner.curves.get(study, set())
        for study, found in pipeline.evaluations.items()
    }
    checkpoints["learning curves"] = {
        (run, tokens) for run in pipeline.learning_curve_runs for tokens in planner.runs[run].milestones
    }
    print_reuse(args.scale, planner, checkpoints)
    return 0


def print_reuse(scale: str, planner: Planner, checkpoints: dict) -> None:
    branches = sum(1 for plan in planner.runs.values() if plan.spec.cooldown)
    started = sum(1 for plan in planner.runs.values() if plan.spec.start_from)
    from_scratch = len(planner.runs) - branches - started
    others = f", {started} started from another run's state" if started else ""
    print(f"{scale}: {len(planner.runs)} runs ({from_scratch} from scratch, {branches} cooldown branches{others}), "
          f"{len(planner.hub_runs)} imported")  # fmt: skip
    *studies, total = compute_reuse(planner, checkpoints)
    width = max(len("shared by several"), *(len(row["study"]) for row in studies))
    print(f"{'':<{width}} {'checkpoints':>11} {'own runs':>8} {'tokens they train':>18}")
    for row in studies:
        print(f"{row['study']:<{width}} {row['checkpoints']:>11} {row['runs']:>8} {row['trained'] / 1e6:>17.1f}M")
    print(f"{'shared by several':<{width}} {'':>11} {total['runs'] - sum(r['runs'] for r in studies):>8} "
          f"{(total['trained'] - sum(r['trained'] for r in studies)) / 1e6:>17.1f}M")  # fmt: skip
    print(f"{'all':<{width}} {total['checkpoints']:>11} {total['runs']:>8} {total['trained'] / 1e6:>17.1f}M")
    print(f"compute reuse {total['reuse']:.2f}x: one from-scratch run per scored checkpoint or training curve (N, D, "
          f"precision, recipe) would train {total['from_scratch'] / 1e6:.1f}M tokens")  # fmt: skip
    flops = training_flops(planner)
    print(f"training compute {flops:.3g} FLOP (6·N·D); at {GPU_FLOPS / 1e12:.0f} TFLOP/s sustained (about 40 % of one "
          f"H100's dense bf16) ≈ {flops / GPU_FLOPS / 3600:.3g} GPU-hours")  # fmt: skip


@dataclass
class Needs:
    """What a set of outputs needs: the runs it trains (trunks included) and the checkpoints it scores."""

    runs: set
    checkpoints: set


def producers(pipeline: Pipeline) -> dict[str, list[str]]:
    """Each output path of the workflow -> the paths it is made from (runs appear as their run.json)."""
    layout, made = pipeline.layout, {}
    for run in pipeline.runs:
        trunk = pipeline.planner.trunk_of(run)
        made[layout.run_summary(run)] = [layout.run_summary(trunk)] if trunk else []
    for run in pipeline.learning_curve_runs:
        made[layout.evaluations(run)] = [layout.run_summary(run)]
    made[layout.table(LEARNING_CURVES)] = [layout.evaluations(run) for run in pipeline.learning_curve_runs]
    for study, evaluations in pipeline.evaluations.items():
        scored = []
        for e in evaluations:
            outputs = ["table", *pipeline.scoring[study].outputs]
            for output in outputs:
                made[layout.scored(study, output, e.run, e.tokens)] = [layout.run_summary(e.run)]
            scored.append(layout.scored(study, "table", e.run, e.tokens))
        made[layout.table(study)] = scored
        for job in pipeline.jobs[study]:
            made |= dict.fromkeys(_paths(job.outputs), _paths(job.inputs))
        fit_sources = [layout.table(study), *pipeline.fit_inputs(study).values()]
        made |= {path: fit_sources for path in [*pipeline.fits[study].values(), *pipeline.fit_tables[study].values()]}
    for spec, inputs in pipeline.figures:
        made |= {path: list(inputs.values()) for path in spec.outputs.values()}
    made["results/claims.csv"] = list(pipeline.claim_inputs().values())
    return made


def _paths(named: dict) -> list[str]:
    """The paths of a rule's named inputs or outputs, each a path or a list of them."""
    return [path for value in named.values() for path in ([value] if isinstance(value, str) else value)]


def target_paths(pipeline: Pipeline, target: str) -> list[str]:
    """A rule name (a figure's, `all`, `collect_claims`) or an output path -> the paths it makes."""
    figures = {spec.target: list(spec.outputs.values()) for spec, _ in pipeline.figures}
    if target in figures:
        return figures[target]
    if target == "all":
        return [*(path for paths in figures.values() for path in paths), "results/claims.csv"]
    if target == "collect_claims":
        return ["results/claims.csv"]
    if target in producers(pipeline):
        return [target]
    raise ValueError(f"target {target!r}: neither a figure rule, all, collect_claims, nor an output of this config")


def needs(pipeline: Pipeline, targets: list[str]) -> Needs:
    made, found = producers(pipeline), Needs(set(), set())
    pending = [path for target in targets for path in target_paths(pipeline, target)]
    seen = set()
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        parts = Path(path).parts
        if path.endswith("run.json") and parts[-2] in pipeline.runs:
            found.runs.add(parts[-2])
        if len(parts) == 5 and parts[1] == "scores":
            found.checkpoints.add(path)
        pending += made.get(path, [])
    return found


def print_target(pipeline: Pipeline, targets: list[str], cores: int) -> None:
    found = needs(pipeline, targets)
    plans = [pipeline.runs[run] for run in found.runs]
    tokens = sum(trained_tokens(plan) for plan in plans)
    flops = sum(6.0 * plan.spec.shape.non_embedding_params * trained_tokens(plan) for plan in plans)
    seconds = (tokens / CPU_TOKENS_PER_SECOND + len(found.checkpoints) * CPU_SECONDS_PER_CHECKPOINT) / cores
    print(f"{' '.join(targets)}: {len(plans)} runs to train ({tokens / 1e6:.1f}M tokens, {flops:.3g} FLOP), "
          f"{len(found.checkpoints)} checkpoints to score")  # fmt: skip
    print(f"≈ {seconds / 60:.0f} min on {cores} CPU cores at this project's measured rates (an empty directory; "
          f"finished outputs are reused), ≈ {flops / GPU_FLOPS / 3600:.2g} GPU-hours of training")  # fmt: skip


def planned_rows(pipeline: Pipeline, study: str) -> pd.DataFrame:
    """Each checkpoint `study` plans to score, as the row its table will have before anything is measured: its
    variant labels, run, size, N (non-embedding parameters), D = budget (the tokens it is scored at), and not
    diverged."""
    records = []
    for evaluation in pipeline.evaluations[study]:
        plan = pipeline.planner.runs.get(evaluation.run)
        if plan is None:  # an imported checkpoint: nothing to plan
            continue
        base = {"run": evaluation.run, "size": plan.spec.size, "N": plan.spec.shape.non_embedding_params,
                "D": evaluation.tokens, "budget": evaluation.tokens, "diverged": False}  # fmt: skip
        records += [{**base, **labels} for labels in evaluation.label_records() or [{}]]
    return pd.DataFrame(records)


POWER_COLUMNS = ["study", "claim", "expected_effect", "min_detectable", "resolves", "noise"]


def power_table(pipeline: Pipeline, noise: ClaimNoise) -> pd.DataFrame:
    """Every study's `power` rows (`qscaling.studies.study.Study.power`) with `resolves`: whether the effect the
    paper's law predicts on the planned grid exceeds the smallest effect σ_seed resolves there."""
    rows = []
    for name, configured in pipeline.studies.items():
        if configured.study.power is None or not pipeline.evaluations.get(name):
            continue
        rows += configured.study.power(planned_rows(pipeline, name), configured.settings, noise)
    table = pd.DataFrame(rows, columns=[c for c in POWER_COLUMNS if c != "resolves"])
    return table.assign(resolves=[_resolves(e, m) for e, m in zip(table["expected_effect"], table["min_detectable"])])[
        POWER_COLUMNS
    ]


def _resolves(expected: str, floor: str) -> str:
    if not floor:
        return "unknown: no σ_seed"
    if not expected:
        return "unknown: no paper prediction"
    return "yes" if abs(float(expected)) > float(floor) else "no: expected below the floor"


def print_power(pipeline: Pipeline, noise_path: str | None) -> None:
    """`qscaling plan --power`: each claim between trained runs with its expected effect and its floor, then
    how many the design can resolve."""
    noise = ClaimNoise.read(noise_path)
    table = power_table(pipeline, noise)
    source = noise_path or "none: min_detectable needs the seed study's noise model (--noise FILE)"
    print(f"power of the claims between trained runs (nats; σ_seed from {source})")
    width = min(90, max((len(text) for text in table["claim"]), default=10))
    for study, rows in table.groupby("study", sort=False):
        print(study)
        for row in rows.itertuples():
            text = row.claim if len(row.claim) <= width else row.claim[: width - 1] + "…"
            print(f"  {text:<{width}}  expected {row.expected_effect or '–':>8}  floor {row.min_detectable or '–':>8}"
                  f"  {row.resolves}")  # fmt: skip
    resolvable = int((table["resolves"] == "yes").sum())
    print(f"{resolvable} of {len(table)} claims expect an effect above their floor")
