"""A training run as data: everything that changes the weights, hashed into the run id (`RunSpec.run_id`).

Planning a grid builds these without torch; `qscaling.train` runs them.
"""

import dataclasses
import hashlib
import json
import math

from qscaling.quant.precision import canonical_training_precision
from qscaling.shape import ModelShape

SCHEDULES = ("cosine", "wsd")
AUTOCAST_FORMATS = ("bf16", "fp16")


@dataclasses.dataclass(frozen=True)
class RunSpec:
    size: str  # a human label such as "N100k"; part of the path, not of the identity
    shape: ModelShape
    data: str  # identity of the token data (hash of the corpus config)
    seed: int = 0
    batch_size: int = 32  # sequences per step
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    betas: tuple = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.1
    grad_clip: float | None = 1.0
    dropout: float = 0.0
    warmup_tokens: int = 0
    schedule: str = "cosine"
    total_tokens: int = 1_000_000
    autocast: str | None = None  # None (fp32), "bf16" or "fp16"
    training_precision: dict | None = None  # quantization-aware training; see qscaling.quant.qat
    cooldown: dict | None = None  # {"trunk": run id, "start_tokens": int} for a WSD cooldown branch
    # {"run": run id, "tokens": int}: the run starts from that run's saved state at `tokens` (weights, optimizer, RNG,
    # step), e.g. a quantized-training run branched from its full-precision partner's trunk after warmup.
    start_from: dict | None = None

    def __post_init__(self):
        if self.schedule not in SCHEDULES:
            raise ValueError(f"run spec: schedule '{self.schedule}' is not one of {SCHEDULES}")
        if self.autocast not in (None, *AUTOCAST_FORMATS):
            raise ValueError(f"run spec: autocast '{self.autocast}' is not one of None, {list(AUTOCAST_FORMATS)}")
        if self.cooldown is not None and self.schedule != "wsd":
            raise ValueError("run spec: a cooldown branch needs schedule 'wsd'")
        if self.cooldown is not None and not 0 < self.cooldown["start_tokens"] < self.total_tokens:
            raise ValueError(
                f"run spec: cooldown.start_tokens={self.cooldown['start_tokens']} must lie inside "
                f"(0, total_tokens={self.total_tokens})"
            )
        if self.start_from is not None:
            if self.cooldown is not None:
                raise ValueError("run spec: a cooldown branch starts from its trunk; it cannot also have start_from")
            if set(self.start_from) != {"run", "tokens"}:
                raise ValueError(
                    f"run spec: start_from needs exactly 'run' and 'tokens', got {sorted(self.start_from)}"
                )
            if not 0 < self.start_from["tokens"] < self.total_tokens:
                raise ValueError(
                    f"run spec: start_from.tokens={self.start_from['tokens']} must lie inside "
                    f"(0, total_tokens={self.total_tokens})"
                )

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.shape.seq_len

    @property
    def total_steps(self) -> int:
        return math.ceil(self.total_tokens / self.tokens_per_step)

    @property
    def is_trunk(self) -> bool:
        """A WSD run without cooldown: its learning rate never depends on where it stops."""
        return self.schedule == "wsd" and self.cooldown is None

    @property
    def source(self) -> str | None:
        """The run whose saved state this one starts from (a cooldown's trunk, a `start_from` run), if any."""
        if self.cooldown is not None:
            return self.cooldown["trunk"]
        return self.start_from["run"] if self.start_from is not None else None

    @property
    def start_tokens(self) -> int:
        """Tokens already trained when this run starts: 0 from scratch, else its source's branch point."""
        if self.cooldown is not None:
            return self.cooldown["start_tokens"]
        return self.start_from["tokens"] if self.start_from is not None else 0

    def to_dict(self) -> dict:
        """Every field, canonical (the QAT spec validated and its defaults filled); `start_from` only where set, so
        that runs from scratch keep the identity they had before it existed."""
        fields = dataclasses.asdict(self)
        if self.start_from is None:
            fields.pop("start_from")
        fields["betas"] = list(self.betas)
        # {} and None both mean full precision: one identity for both.
        fields["training_precision"] = None
        if self.training_precision:
            fields["training_precision"] = canonical_training_precision(self.training_precision)
        return fields

    def identity(self) -> dict:
        """Everything that changes the weights. A trunk's length is not part of it: asking for more tokens
        extends the same run (it resumes from its saved state), so every study shares one trunk per size."""
        fields = self.to_dict()
        fields.pop("size")
        if self.is_trunk:
            fields.pop("total_tokens")
        return fields

    @property
    def run_id(self) -> str:
        canonical = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return f"{self.size}-{hashlib.sha256(canonical.encode()).hexdigest()[:10]}"

    @classmethod
    def from_dict(cls, raw: dict) -> "RunSpec":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"run spec: unknown key(s) {unknown}; valid: {sorted(known)}")
        fields = dict(raw)
        fields["shape"] = ModelShape(**fields["shape"])
        if "betas" in fields:
            fields["betas"] = tuple(fields["betas"])
        return cls(**fields)
