"""From the configured studies to a set of unique runs and the checkpoints each study evaluates.

Principle 3 (spend compute once): every study asks the planner for what it needs, and the planner keeps one run
per spec. A WSD *trunk* per (size, recipe) is extended to the longest length anyone asks for (its length is not part
of its identity); annealed models at a budget D are *cooldown branches* that resume from the trunk's state at
(1 − f)·D and decay over the last f·D tokens; cosine-per-budget runs stay available for exact fidelity.
"""

import math
from dataclasses import dataclass, field

import numpy as np

from qscaling.config import Common
from qscaling.runspec import RunSpec

LOCAL = "local"  # the repo of a `HubRun` that stands for your own checkpoints on disk


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
# that turn a size into its peak LR and warmup (`Training.peak_lr`, `Training.warmup_tokens`).
RECIPE_KEYS = ("seq_len", "state_every_steps", "lr", "lr_reference_params", "lr_exponent", "warmup_tokens_per_param",
               "warmup_min_steps", "warmup_max_fraction")  # fmt: skip


def log_spaced_tokens(start: int, stop: int, count: int) -> list[int]:
    """`count` token counts from `start` to `stop`, evenly spaced in log, rounded to 3 significant digits."""
    values = np.geomspace(max(start, 1), stop, count)
    return sorted({int(float(f"{v:.3g}")) for v in values[:-1]} | {stop})


class Planner:
    """Collects runs; every method returns the run id to read checkpoints from."""

    def __init__(self, common: Common, data_id: str):
        self.common, self.data_id = common, data_id
        self.runs: dict[str, RunPlan] = {}
        self.hub_runs: dict[str, HubRun] = {}
        self.curves: dict[str, set[tuple[str, int]]] = {}  # study -> (run, tokens) whose training curve it reads

    def spec(self, size: str, total_tokens: int, **overrides) -> RunSpec:
        training, shape = self.common.training, self.common.shape(size)
        recipe = {k: v for k, v in training.model_dump().items() if k not in RECIPE_KEYS}
        fields = recipe | {"betas": tuple(training.betas)} | overrides
        n_params = shape.non_embedding_params
        fields.setdefault("lr", training.peak_lr(n_params))
        fields.setdefault("warmup_tokens", training.warmup_tokens(n_params, fields["schedule"], total_tokens))
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
        tokens_per_step = self.common.training.batch_size * self.common.training.seq_len
        start = math.floor(budget * (1 - fraction) / tokens_per_step) * tokens_per_step
        if start <= 0:
            raise ValueError(f"cooldown of {size} at {budget} tokens: the branch point falls before the first step")
        trunk = self.trunk(size, upto=start + tokens_per_step, branch_points=[start], **overrides)
        own = {key: value for key, value in overrides.items() if key != "start_from"}  # the trunk's, not the branch's
        branch = self.spec(size, budget, schedule="wsd", cooldown={"trunk": trunk, "start_tokens": start}, **own)
        return self._need(branch, milestones=[budget])

    def after_warmup(self, size: str, **overrides) -> dict:
        """`start_from` for a run that branches from the trunk of `size` (with `overrides`: its seed, its recipe) at
        the first step after that trunk's warmup: the trunk saves its state there."""
        tokens_per_step = self.common.training.batch_size * self.common.training.seq_len
        warmup = self.spec(size, tokens_per_step, schedule="wsd", **overrides).warmup_tokens
        tokens = math.ceil(warmup / tokens_per_step) * tokens_per_step
        trunk = self.trunk(size, upto=tokens + tokens_per_step, branch_points=[tokens], **overrides)
        return {"run": trunk, "tokens": tokens}

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
        run_id = f"local-{label}"
        plan = self.hub_runs.setdefault(run_id, HubRun(LOCAL, label))
        if plan.revisions.get(tokens, path) != path:
            raise ValueError(
                f"local models: '{label}' at {tokens} tokens names both {plan.revisions[tokens]} and {path}"
            )
        plan.revisions[tokens] = path
        return run_id

    def trunk_of(self, run_id: str) -> str | None:
        """The run whose saved state `run_id` starts from (a cooldown's trunk, a `start_from` run), if any."""
        plan = self.runs.get(run_id)
        return plan.spec.source if plan else None


def trained_tokens(plan: RunPlan) -> int:
    """Tokens a run trains itself: a branch only those after its branch point (its trunk trained the rest)."""
    spec = plan.spec
    return spec.total_steps * spec.tokens_per_step - spec.start_tokens


def training_flops(planner: Planner) -> float:
    """Training compute of every planned run, 6·N·D (Kaplan et al.: N non-embedding, D the tokens it trains)."""
    return sum(6.0 * plan.spec.shape.non_embedding_params * trained_tokens(plan) for plan in planner.runs.values())


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
