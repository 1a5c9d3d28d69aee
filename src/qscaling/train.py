"""Training: a run spec in, checkpoints at token milestones out; deterministic, resumable after kill -9.

A run is its spec: everything that changes the weights (shape, data, optimizer, schedule, seed, precision,
training precision, and for a branch the run and tokens it starts from) is hashed into the run id. Milestones,
logging and threads are not part of it. Batches are a pure function of (seed, step), so resuming needs only the
saved model, optimizer and RNG state — written atomically every `state_every_steps` steps.

Schedules (`schedule`): "cosine" — linear warmup then cosine to `min_lr_ratio`·lr at `total_tokens`;
"wsd" — warmup then constant (the stable trunk); a cooldown branch (`cooldown`) resumes from the trunk's state at
`cooldown.start_tokens` and decays linearly to `min_lr_ratio`·lr at `total_tokens` (Hägele et al. 2024). A run
with `start_from` begins from another run's saved state (weights, optimizer, RNG, step, losses) at
`start_from.tokens` and goes on under its own spec: a quantized-training run branched from its fp32 partner's trunk
after warmup shares that partner's initialisation and first steps, so a seed moves the two together.

Divergence: a run whose training loss turns non-finite stops there and is *recorded* as diverged — its
`run.json` carries a `diverged` record (step, tokens, loss, LR) and only the checkpoints saved before it — so one
diverged QAT run leaves the rest of a grid running. A branch whose trunk diverged before the branch point is
recorded as diverged too. Scoring a diverged run's missing checkpoint gives rows marked `diverged`
(`qscaling.studies.scoring.diverged_rows`), and each study states how it leaves them out of its fits.
"""

import json
import logging
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import yaml
from tqdm import tqdm

from qscaling.atomic import atomic_path, write_json
from qscaling.checkpoint import save_checkpoint
from qscaling.data import load_tokens
from qscaling.data.tokens import check_vocabulary
from qscaling.model import build_model, compute_loss
from qscaling.quant.precision import is_quantizer_parameter
from qscaling.quant.qat import apply_training_precision, restart_learned_quantizers
from qscaling.runspec import RunSpec

AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def lr_at(spec: RunSpec, tokens: int) -> float:
    """Learning rate for the step that starts after `tokens` tokens."""
    peak, floor = spec.lr, spec.lr * spec.min_lr_ratio
    if tokens < spec.warmup_tokens:
        return peak * (tokens + spec.tokens_per_step) / (spec.warmup_tokens + spec.tokens_per_step)
    if spec.schedule == "cosine":
        progress = min(1.0, (tokens - spec.warmup_tokens) / max(1, spec.total_tokens - spec.warmup_tokens))
        return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * progress))
    if spec.cooldown is None or tokens < spec.cooldown["start_tokens"]:
        return peak
    start = spec.cooldown["start_tokens"]
    return peak + (floor - peak) * min(1.0, (tokens - start) / (spec.total_tokens - start))


def batch_at(tokens: np.ndarray, spec: RunSpec, step: int) -> torch.Tensor:
    """The step's batch of windows (seq_len + 1 tokens each), a pure function of (seed, step)."""
    window = spec.shape.seq_len + 1
    if tokens.size < window:
        raise ValueError(f"training data has {tokens.size} tokens, fewer than one window of {window}")
    starts = np.random.default_rng([spec.seed, step]).integers(0, tokens.size - window + 1, spec.batch_size)
    return torch.from_numpy(np.stack([tokens[s : s + window] for s in starts]).astype(np.int64))


def _autocast(spec: RunSpec, device: torch.device):
    if spec.autocast is None:
        return torch.autocast(device.type, enabled=False)
    return torch.autocast(device.type, dtype=AUTOCAST_DTYPES[spec.autocast])


class NonFiniteLoss(RuntimeError):
    pass


def training_step(model, optimizer, scaler, batch: torch.Tensor, spec: RunSpec) -> float:
    """One optimizer step on `batch`; returns the loss, or raises NonFiniteLoss before touching the weights."""
    with _autocast(spec, batch.device):
        loss = compute_loss(model, batch)
    value = float(loss.detach())
    if not math.isfinite(value):
        raise NonFiniteLoss(value)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    if spec.grad_clip:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip)
    scaler.step(optimizer)
    scaler.update()
    return value


def make_optimizer(model, spec: RunSpec) -> torch.optim.AdamW:
    # Weight decay on matrices only (not norm gains), as in nanoGPT and OLMo; nor on learned quantizer steps and
    # clipping logits, which decay would pull towards a zero step / half the absmax range.
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 and not is_quantizer_parameter(name) else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": spec.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=spec.lr, betas=spec.betas, eps=spec.eps, fused=True)


def save_state(path: Path, payload: dict) -> None:
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def load_state(path: Path, expected_run: str | None) -> dict:
    try:
        state = torch.load(path, weights_only=True)
    except Exception as error:
        raise ValueError(f"training state {path} cannot be read ({error}); delete it to restart the run") from error
    if expected_run is not None and state["run_id"] != expected_run:
        raise ValueError(f"training state {path} belongs to run {state['run_id']}, not {expected_run}")
    return state


def milestone_name(tokens: int) -> str:
    return f"tokens_{tokens:012d}"


def _checkpoint_dir(run_dir: Path, milestone: int) -> Path:
    return run_dir / "checkpoints" / milestone_name(milestone)


def _branch_state_path(run_dir: Path, branch_point: int) -> Path:
    return run_dir / "branches" / f"{milestone_name(branch_point)}.pt"


@dataclass
class _Training:
    """A run in progress: its model, optimizer and loss scaler, the steps taken and their training losses."""

    spec: RunSpec
    model: torch.nn.Module
    optimizer: torch.optim.AdamW
    scaler: torch.amp.GradScaler
    step: int = 0
    losses: list[float] = field(default_factory=list)

    @classmethod
    def start(cls, spec: RunSpec, device: torch.device) -> "_Training":
        """The freshly initialised model (with its training precision) and optimizer, at step 0."""
        model = build_model(spec.shape, seed=spec.seed, dropout=spec.dropout)
        if spec.training_precision:
            apply_training_precision(model, spec.training_precision)
        model.to(device).train()
        optimizer = make_optimizer(model, spec)
        return cls(spec, model, optimizer, torch.amp.GradScaler(device.type, enabled=spec.autocast == "fp16"))

    @property
    def tokens_seen(self) -> int:
        return self.step * self.spec.tokens_per_step

    def restore(self, state: dict | None) -> None:
        """Continue from a saved training state, or, with none, seed the run's RNG to start afresh."""
        if state is None:
            torch.manual_seed(self.spec.seed)
            return
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        self.step, self.losses = state["step"], state["losses"].tolist()

    def adopt(self, state: dict) -> None:
        """Continue from another run's saved state (`start_from`): its weights, optimizer moments, RNG, step and
        losses. A learned quantizer this run adds starts afresh from the weights it takes, as at step 0, its
        optimizer moments empty."""
        learned = {name for name, _ in self.model.named_parameters() if is_quantizer_parameter(name)}
        missing, unexpected = self.model.load_state_dict(state["model"], strict=False)
        if unexpected or set(missing) != learned:
            raise ValueError(
                f"run {self.spec.run_id}: the state of {state['run_id']} it starts from is of another model "
                f"({len(unexpected)} parameters it does not have, {len(set(missing) - learned)} it lacks)"
            )
        restart_learned_quantizers(self.model)
        self.optimizer.load_state_dict(_optimizer_state_for(self.optimizer, self.model, state["optimizer"]))
        torch.set_rng_state(state["torch_rng"])
        self.step, self.losses = state["step"], state["losses"].tolist()

    def state(self) -> dict:
        """The resumable training state: what `restore` needs to continue bit-identically."""
        return {
            "run_id": self.spec.run_id,
            "step": self.step,
            "tokens_seen": self.tokens_seen,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "losses": torch.tensor(self.losses, dtype=torch.float64),
        }

    def checkpoint_metadata(self, milestone: int) -> dict:
        return {
            "run_id": self.spec.run_id,
            "step": self.step,
            "tokens_seen": self.tokens_seen,
            "milestone_tokens": milestone,
            "train_loss": float(np.mean(self.losses[-20:])),
            "seed": self.spec.seed,
            "spec": self.spec.to_dict(),
        }


def _optimizer_state_for(optimizer: torch.optim.Optimizer, model, source: dict) -> dict:
    """`source`, the optimizer state of the same parameters without learned quantizers, laid out for `optimizer`,
    whose groups hold them in the same order with the learned quantizers' among them (theirs start empty)."""
    learned = {id(p) for name, p in model.named_parameters() if is_quantizer_parameter(name)}
    target, moments = optimizer.state_dict(), {}
    for group, indices, given in zip(optimizer.param_groups, target["param_groups"], source["param_groups"]):
        taken = [index for index, p in zip(indices["params"], group["params"]) if id(p) not in learned]
        for index, source_index in zip(taken, given["params"], strict=True):
            if source_index in source["state"]:
                moments[index] = source["state"][source_index]
    return {"state": moments, "param_groups": [group | {"params": indices["params"]} for group, indices in
                                                zip(source["param_groups"], target["param_groups"])]}  # fmt: skip


def _by_step(token_counts: list[int], tokens_per_step: int) -> dict[int, list[int]]:
    """Token counts by the step that reaches them. They round up to whole steps; several may land on the same step,
    and each keeps its own name."""
    by_step = {}
    for count in sorted(set(token_counts)):
        by_step.setdefault(math.ceil(count / tokens_per_step), []).append(count)
    return by_step


@dataclass(frozen=True)
class _Saves:
    """What a run saves under `run_dir`, and at which steps: milestone checkpoints, the branch points' states for
    WSD cooldowns, and its resumable state every `state_every_steps` steps and at the end."""

    run_dir: Path
    milestone_steps: dict[int, list[int]]
    branch_steps: dict[int, list[int]]
    state_every_steps: int

    @classmethod
    def plan(cls, spec: RunSpec, run_dir: Path, milestones, branch_points, state_every_steps: int) -> "_Saves":
        return cls(
            run_dir,
            _by_step([m for m in milestones if m <= spec.total_tokens], spec.tokens_per_step),
            _by_step([b for b in branch_points if b < spec.total_tokens], spec.tokens_per_step),
            state_every_steps,
        )

    @property
    def state_path(self) -> Path:
        return self.run_dir / "state.pt"

    def milestones_through(self, step: int) -> list[int]:
        return [m for s, ms in self.milestone_steps.items() if s <= step for m in ms]

    def unsaved_through(self, step: int) -> list[int]:
        """The milestones and branch points due by `step` whose checkpoint or state is not on disk."""
        missed = [m for m in self.milestones_through(step) if not _checkpoint_dir(self.run_dir, m).is_dir()]
        missed += [
            b
            for s, bs in self.branch_steps.items()
            if s <= step
            for b in bs
            if not _branch_state_path(self.run_dir, b).is_file()
        ]
        return missed

    def save_due(self, training: _Training) -> None:
        """Save what falls due at the step `training` has just finished."""
        for milestone in self.milestone_steps.get(training.step, ()):
            save_checkpoint(
                training.model, _checkpoint_dir(self.run_dir, milestone), training.checkpoint_metadata(milestone)
            )
        for branch_point in self.branch_steps.get(training.step, ()):
            (self.run_dir / "branches").mkdir(exist_ok=True)
            save_state(_branch_state_path(self.run_dir, branch_point), training.state())
        if training.step % self.state_every_steps == 0 or training.step == training.spec.total_steps:
            save_state(self.state_path, training.state())


def train(
    spec: RunSpec,
    run_dir: str | os.PathLike,
    train_tokens: str | os.PathLike,
    *,
    milestones: list[int] = (),
    branch_points: list[int] = (),
    trunk_dir: str | os.PathLike | None = None,
    state_every_steps: int = 200,
    device: str = "cpu",
    progress: bool = True,
) -> dict:
    """Train `spec` to `total_tokens`, resuming from `run_dir/state.pt` if present.

    Saves an HF checkpoint at each milestone (tokens; rounded up to whole steps) under `run_dir/checkpoints/`, a
    resumable state at each branch point under `run_dir/branches/` (for WSD cooldowns), and `run_dir/run.json`.
    """
    run_dir, device = Path(run_dir), torch.device(device)
    run_dir.mkdir(parents=True, exist_ok=True)
    tokens = _load_training_tokens(train_tokens, spec)
    training = _Training.start(spec, device)
    saves = _Saves.plan(spec, run_dir, milestones, branch_points, state_every_steps)
    state = _own_state(spec, saves)
    if state is None and spec.source is not None:
        branch_state = _trunk_branch_state(spec, trunk_dir)
        trunk_divergence = _trunk_divergence(Path(trunk_dir), branch_state)
        if trunk_divergence is not None:
            return _record_divergence(run_dir, spec, trunk_divergence, milestones=[])
        state = load_state(branch_state, spec.source)
    if state is not None and spec.start_from is not None and state["run_id"] == spec.start_from["run"]:
        training.adopt(state)
    else:
        training.restore(state)
    diverged = _train_steps(training, tokens, device, saves, progress)
    saved = saves.milestones_through(training.step)
    if diverged is not None:
        return _record_divergence(run_dir, spec, diverged, milestones=saved)
    summary = _run_summary(spec, training.step, training.losses, saved)
    write_json(run_dir / "run.json", summary)
    return summary


def _load_training_tokens(path: str | os.PathLike, spec: RunSpec) -> np.ndarray:
    tokens = load_tokens(path)
    check_vocabulary(tokens, spec.shape.vocab_size, path)
    return tokens


def _own_state(spec: RunSpec, saves: _Saves) -> dict | None:
    """The run's saved state, unless there is none or it is past milestones asked for since it was saved."""
    if not saves.state_path.exists():
        return None
    state = load_state(saves.state_path, spec.run_id)
    missed = saves.unsaved_through(state["step"])
    if missed:
        # The saved state is past checkpoints asked for since: retrain from the start (same weights, seeded).
        logging.getLogger(__name__).warning(
            "run %s: state at step %d is past unsaved milestones %s; training again from the start",
            spec.run_id,
            state["step"],
            missed,
        )
        return None
    return state


def _trunk_branch_state(spec: RunSpec, trunk_dir: str | os.PathLike | None) -> Path:
    """Where the trunk `spec` branches from (a cooldown's trunk, a `start_from` run) saves the state it starts
    from."""
    if trunk_dir is None:
        raise ValueError(f"run {spec.run_id}: a branch needs the directory of {spec.source}, the run it starts from")
    return _branch_state_path(Path(trunk_dir), spec.start_tokens)


def _train_steps(
    training: _Training, tokens: np.ndarray, device: torch.device, saves: _Saves, progress: bool
) -> dict | None:
    """Train on to `total_steps`, saving as due; returns the divergence record if the loss turns non-finite."""
    spec = training.spec
    (saves.run_dir / "checkpoints").mkdir(exist_ok=True)
    with _progress_bar(spec, training.step, progress) as bar:
        started, start_step = time.perf_counter(), training.step
        while training.step < spec.total_steps:
            lr = lr_at(spec, training.tokens_seen)
            for group in training.optimizer.param_groups:
                group["lr"] = lr
            batch = batch_at(tokens, spec, training.step).to(device)
            try:
                loss = training_step(training.model, training.optimizer, training.scaler, batch, spec)
            except NonFiniteLoss as error:
                return _divergence_record(training, lr, error)
            training.step += 1
            training.losses.append(loss)
            bar.update(1)
            if bar.n % 10 == 0:
                tokens_per_s = (training.step - start_step) * spec.tokens_per_step / (time.perf_counter() - started)
                bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tokens_per_s:,.0f}")
            saves.save_due(training)
    return None


def _progress_bar(spec: RunSpec, step: int, shown: bool) -> tqdm:
    return tqdm(
        total=spec.total_steps,
        initial=step,
        desc=spec.run_id,
        unit="step",
        disable=not shown,
        file=sys.stderr,
        mininterval=2.0,
    )


def _divergence_record(training: _Training, lr: float, loss: NonFiniteLoss) -> dict:
    step, tokens_seen = training.step, training.tokens_seen
    return {
        "step": step,
        "tokens_seen": tokens_seen,
        "loss": str(loss),
        "lr": lr,
        "reason": f"training loss is {loss} at step {step} ({tokens_seen} tokens)",
    }


def _run_summary(
    spec: RunSpec, steps: int, losses: list[float], milestones: list[int], diverged: dict | None = None
) -> dict:
    """What `run.json` holds: the run, how far it got, its checkpoints and its training-loss curve (at most ~200
    points); a diverged run also holds its `diverged` record."""
    summary = {
        "run_id": spec.run_id,
        "spec": spec.to_dict(),
        "steps": steps,
        "tokens_seen": steps * spec.tokens_per_step,
        "final_train_loss": float(np.mean(losses[-20:])) if losses else None,
    }
    if diverged is not None:
        summary["diverged"] = diverged
    summary["checkpoints"] = {str(m): f"checkpoints/{milestone_name(m)}" for m in milestones}
    curve = [[(i + 1) * spec.tokens_per_step, loss] for i, loss in enumerate(losses)]
    summary["train_loss_curve"] = curve[:: max(1, len(losses) // 200)]
    return summary


def _record_divergence(run_dir: Path, spec: RunSpec, diverged: dict, *, milestones: list[int]) -> dict:
    """Write the run.json of a run that diverged: its `diverged` record and the checkpoints saved before it; no
    training loss."""
    logging.getLogger(__name__).warning("run %s diverged: %s", spec.run_id, diverged["reason"])
    summary = _run_summary(spec, diverged.get("step", 0), [], milestones, diverged)
    write_json(run_dir / "run.json", summary)
    return summary


def _trunk_divergence(trunk_dir: Path, branch_state: Path) -> dict | None:
    """A branch's divergence record when its trunk diverged before writing the branch's starting state."""
    summary_path = trunk_dir / "run.json"
    if branch_state.is_file() or not summary_path.is_file():
        return None
    trunk = json.loads(summary_path.read_text())
    if "diverged" not in trunk:
        return None
    return {"trunk": trunk["run_id"], "reason": f"its trunk {trunk['run_id']} diverged: {trunk['diverged']['reason']}"}


def add_arguments(parser) -> None:
    parser.add_argument("spec", help="run spec YAML (keys of qscaling.train.RunSpec)")
    parser.add_argument("--data", required=True, help="training token shard (train.bin)")
    parser.add_argument("--out", required=True, help="run directory (resumes if it holds state.pt)")
    parser.add_argument("--milestones", default="", help="comma-separated token counts to checkpoint at")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--state-every", type=int, default=200, help="steps between resumable-state saves")


def run(args) -> int:
    torch.set_num_threads(args.threads)
    spec = RunSpec.from_dict(yaml.safe_load(Path(args.spec).read_text()))
    milestones = [int(float(m)) for m in args.milestones.split(",") if m] or [spec.total_tokens]
    summary = train(
        spec, args.out, args.data, milestones=milestones, device=args.device, state_every_steps=args.state_every
    )
    print(
        json.dumps(
            {k: summary[k] for k in ("run_id", "steps", "tokens_seen", "final_train_loss", "diverged") if k in summary}
        )
    )
    return 1 if "diverged" in summary else 0
