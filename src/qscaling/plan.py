"""From the configured studies to a set of unique runs and the checkpoints each study evaluates.

Principle 3 (spend compute once): every study asks the planner for what it needs, and the planner keeps one run
per spec. A WSD *trunk* per (size, recipe) is extended to the longest length anyone asks for (its length is not part
of its identity); annealed models at a budget D are *cooldown branches* that resume from the trunk's state at
(1 − f)·D and decay over the last f·D tokens; cosine-per-budget runs stay available for exact fidelity.
"""

import math
from dataclasses import dataclass, field

import numpy as np

from qscaling.runspec import RunSpec
from qscaling.shape import ModelShape


@dataclass
class HubRun:
    """Released checkpoints of one model standing in for a trained run: milestone tokens -> hub revision."""

    repo: str
    size: str
    revisions: dict = field(default_factory=dict)


@dataclass
class RunPlan:
    spec: RunSpec
    milestones: set = field(default_factory=set)  # token counts to save HF checkpoints at
    branch_points: set = field(default_factory=set)  # token counts to save resumable state at (WSD cooldowns)


# Keys of the `training` section that are not RunSpec fields: the shape's context, checkpointing, and the rules
# that turn a size into its peak LR and warmup (`peak_lr`, `warmup_tokens`).
RECIPE_KEYS = ("seq_len", "state_every_steps", "lr", "lr_reference_params", "lr_exponent", "warmup_tokens_per_param",
               "warmup_max_fraction")  # fmt: skip


def peak_lr(training: dict, n_params: int) -> float:
    """The size's peak LR: `lr` at `lr_reference_params`, scaled as N^−lr_exponent (the power law `snakemake
    ladder_lr` fits to the per-size optima), rounded to 3 significant digits so run ids stay readable."""
    value = training["lr"] * (n_params / training["lr_reference_params"]) ** -training["lr_exponent"]
    return float(f"{value:.3g}")


def warmup_tokens(training: dict, n_params: int, schedule: str, total_tokens: int) -> int:
    """Linear warmup over `warmup_tokens_per_param`·N tokens, so it grows with the model and not with the budget
    (a WSD trunk serves every budget, so its warmup cannot depend on one); a cosine run's warmup is also capped at
    `warmup_max_fraction` of its tokens, so a short run is not mostly warmup."""
    tokens = round(training["warmup_tokens_per_param"] * n_params)
    if schedule == "cosine":
        tokens = min(tokens, math.floor(training["warmup_max_fraction"] * total_tokens))
    return tokens


def log_spaced_tokens(start: int, stop: int, count: int) -> list[int]:
    """`count` token counts from `start` to `stop`, evenly spaced in log, rounded to 3 significant digits."""
    values = np.geomspace(max(start, 1), stop, count)
    return sorted({int(float(f"{v:.3g}")) for v in values[:-1]} | {stop})


class Planner:
    """Collects runs; every method returns the run id to read checkpoints from."""

    def __init__(self, config: dict, data_id: str):
        self.config, self.data_id = config, data_id
        self.runs: dict[str, RunPlan] = {}
        self.hub_runs: dict[str, HubRun] = {}
        self.curves: dict[str, set[tuple[str, int]]] = {}  # study -> (run, tokens) whose training curve it reads

    def spec(self, size: str, total_tokens: int, **overrides) -> RunSpec:
        training = self.config["training"]
        shape = ModelShape(
            **self.config["ladder"][size], vocab_size=self.config["corpus"]["vocab_size"], seq_len=training["seq_len"]
        )
        fields = {k: v for k, v in training.items() if k not in RECIPE_KEYS} | {"betas": tuple(training["betas"])}
        fields |= overrides
        n_params = shape.non_embedding_params
        fields.setdefault("lr", peak_lr(training, n_params))
        fields.setdefault("warmup_tokens", warmup_tokens(training, n_params, fields["schedule"], total_tokens))
        return RunSpec(size=size, shape=shape, data=self.data_id, total_tokens=total_tokens, **fields)

    def _need(self, spec: RunSpec, milestones=(), branch_points=()) -> str:
        plan = self.runs.setdefault(spec.run_id, RunPlan(spec))
        if spec.total_tokens > plan.spec.total_tokens:
            plan.spec = spec
        plan.milestones.update(milestones)
        plan.branch_points.update(branch_points)
        return spec.run_id

    def trunk(self, size: str, *, upto: int, milestones=(), branch_points=(), **overrides) -> str:
        """The WSD trunk of `size`, run at least to `upto` tokens, checkpointed at `milestones`."""
        return self._need(self.spec(size, upto, schedule="wsd", **overrides), milestones, branch_points)

    def curve(self, study: str, size: str, tokens: int, **overrides) -> str:
        """A trunk whose training-loss curve up to `tokens` is `study`'s result (no checkpoint of it is scored)."""
        run = self.trunk(size, upto=tokens, **overrides)
        self.curves.setdefault(study, set()).add((run, tokens))
        return run

    def cooldown(self, size: str, budget: int, fraction: float, **overrides) -> str:
        """An annealed model at `budget` tokens: branch from the trunk at (1 − fraction)·budget, decay to budget."""
        tokens_per_step = self.config["training"]["batch_size"] * self.config["training"]["seq_len"]
        start = math.floor(budget * (1 - fraction) / tokens_per_step) * tokens_per_step
        if start <= 0:
            raise ValueError(f"cooldown of {size} at {budget} tokens: the branch point falls before the first step")
        trunk = self.trunk(size, upto=start + tokens_per_step, branch_points=[start], **overrides)
        branch = self.spec(size, budget, schedule="wsd", cooldown={"trunk": trunk, "start_tokens": start}, **overrides)
        return self._need(branch, milestones=[budget])

    def cosine(self, size: str, budget: int, **overrides) -> str:
        """A cosine run annealed exactly at `budget` (one run per budget)."""
        return self._need(self.spec(size, budget, schedule="cosine", **overrides), milestones=[budget])

    def annealed(self, size: str, budget: int, anneal: str, fraction: float, **overrides) -> str:
        if anneal == "wsd":
            return self.cooldown(size, budget, fraction, **overrides)
        return self.cosine(size, budget, **overrides)

    def hub(self, repo: str, size: str, revisions: dict[int, str]) -> str:
        """Released checkpoints of `repo` (tokens seen -> revision), imported instead of trained."""
        run_id = f"hub-{size}"
        plan = self.hub_runs.setdefault(run_id, HubRun(repo, size))
        if plan.repo != repo:
            raise ValueError(f"hub runs: size label '{size}' names both {plan.repo} and {repo}")
        plan.revisions.update(revisions)
        return run_id

    def local(self, label: str, tokens: int, path: str) -> str:
        """Your own HF-format checkpoint at `path`, trained on `tokens` tokens, imported as a checkpoint of `label`."""
        from qscaling.hub import LOCAL

        run_id = f"local-{label}"
        plan = self.hub_runs.setdefault(run_id, HubRun(LOCAL, label))
        if plan.revisions.get(tokens, path) != path:
            raise ValueError(
                f"local models: '{label}' at {tokens} tokens names both {plan.revisions[tokens]} and {path}"
            )
        plan.revisions[tokens] = path
        return run_id

    def trunk_of(self, run_id: str) -> str | None:
        plan = self.runs.get(run_id)
        return plan.spec.cooldown["trunk"] if plan and plan.spec.cooldown else None


def trained_tokens(plan: RunPlan) -> int:
    """Tokens a run trains itself: a cooldown branch only those after its branch point (its trunk trained the rest)."""
    spec = plan.spec
    start = spec.cooldown["start_tokens"] if spec.cooldown else 0
    return spec.total_steps * spec.tokens_per_step - start


def compute_reuse(planner: Planner, checkpoints: dict[str, set[tuple[str, int]]]) -> list[dict]:
    """Per study: its scored checkpoints (and training curves, as (run, tokens) too), and the runs only it needs (its
    checkpoints' runs and the trunks they branch from, less those another study needs too) with the tokens they
    train; then "all": every run, against one from-scratch run per scored checkpoint or curve (N, D, precision,
    recipe) — the reuse ratio."""

    def lineage(run_id: str) -> set[str]:
        trunk = planner.trunk_of(run_id)
        return {run_id, *(lineage(trunk) if trunk else ())} if run_id in planner.runs else set()

    needs = {study: set().union(*(lineage(run) for run, _ in points)) for study, points in checkpoints.items()}
    rows = []
    for study, points in checkpoints.items():
        own = needs[study].difference(*(runs for other, runs in needs.items() if other != study))
        rows.append(dict(study=study, checkpoints=len(points), runs=len(own),
                         trained=sum(trained_tokens(planner.runs[run]) for run in own)))  # fmt: skip
    every = set().union(*checkpoints.values())
    trained = sum(trained_tokens(plan) for plan in planner.runs.values())
    from_scratch = sum(tokens for run, tokens in every if run in planner.runs)
    rows.append(dict(study="all", checkpoints=len(every), runs=len(planner.runs), trained=trained,
                     from_scratch=from_scratch, reuse=from_scratch / trained if trained else float("nan")))  # fmt: skip
    return rows


def add_arguments(parser) -> None:
    parser.add_argument("--scale", default="default", help="config preset (default: default)")
    parser.add_argument("--configfile", default=None, help="config YAML (default: the embedded config.yaml)")


def run(args) -> int:
    """`qscaling plan`: the runs a config trains and how much training its cooldown branches and shared specs save."""
    from pathlib import Path

    import yaml

    from qscaling.config import corpus_id, resolve_config
    from qscaling.studies import learning_curve_runs, plan_all

    path = Path(args.configfile or Path(__file__).resolve().parents[2] / "config.yaml")
    config = resolve_config({**yaml.safe_load(path.read_text()), "scale": args.scale})
    planner, evaluations = plan_all(config, corpus_id(config))
    # What each study reads of the runs: scored checkpoints and training curves, each one from-scratch run's worth.
    checkpoints = {
        study: {(e.run, e.tokens) for e in found} | planner.curves.get(study, set())
        for study, found in evaluations.items()
    }
    checkpoints["learning curves"] = {
        (run, tokens) for run in learning_curve_runs(config, planner) for tokens in planner.runs[run].milestones
    }
    branches = sum(1 for plan in planner.runs.values() if plan.spec.cooldown)
    print(f"{args.scale}: {len(planner.runs)} runs ({len(planner.runs) - branches} from scratch, {branches} cooldown "
          f"branches), {len(planner.hub_runs)} imported")  # fmt: skip
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
    return 0
