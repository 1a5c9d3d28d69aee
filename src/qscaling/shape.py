"""A model's shape, and how N — the non-embedding parameter count of every law — follows from it.

Counted: every parameter of the decoder blocks (q, k, v, o projections, the SwiGLU gate/up/down projections,
both RMSNorm gains per block) plus the final RMSNorm gain. The token embedding and the (untied) LM head are
excluded, as in Kaplan et al. and Kumar et al. Per block that is 4·d² (attention, n_kv_heads = n_heads) +
3·d·d_ff (SwiGLU) + 2·d (norms). Planning a grid needs only this, not torch.
"""

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ModelShape:
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    vocab_size: int
    seq_len: int

    def __post_init__(self):
        for name in ("d_model", "n_layers", "n_heads", "d_ff", "vocab_size", "seq_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"model shape: {name}={getattr(self, name)} must be positive")
        if self.d_model % self.n_heads:
            raise ValueError(f"model shape: d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError(f"model shape: head dim {self.d_model // self.n_heads} must be even for RoPE")

    @property
    def non_embedding_params(self) -> int:
        d = self.d_model
        return self.n_layers * (4 * d * d + 3 * d * self.d_ff + 2 * d) + d

    def to_dict(self) -> dict:
        return asdict(self)
