"""The model: a Llama-style decoder from transformers (`LlamaConfig` → `LlamaForCausalLM`), sized by shape.

How N is counted (N in every law is non-embedding): every parameter of the decoder blocks (q, k, v, o
projections, the SwiGLU gate/up/down projections, both RMSNorm gains per block) plus the final RMSNorm gain.
The token embedding and the (untied) LM head are excluded, as in Kaplan et al. and Kumar et al.
Per block that is 4·d² (attention, n_kv_heads = n_heads) + 3·d·d_ff (SwiGLU) + 2·d (norms).
"""

from dataclasses import asdict, dataclass

import torch
from transformers import LlamaConfig, LlamaForCausalLM


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


def llama_config(shape: ModelShape, *, attention_dropout: float = 0.0) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=shape.vocab_size,
        hidden_size=shape.d_model,
        intermediate_size=shape.d_ff,
        num_hidden_layers=shape.n_layers,
        num_attention_heads=shape.n_heads,
        num_key_value_heads=shape.n_heads,
        max_position_embeddings=shape.seq_len,
        tie_word_embeddings=False,
        attention_dropout=attention_dropout,
        rms_norm_eps=1e-5,
        bos_token_id=None,
        eos_token_id=0,
        pad_token_id=None,
    )


def add_residual_dropout(model: LlamaForCausalLM, p: float) -> None:
    """Dropout on each attention and MLP output before the residual add (GPT-style; Llama has none built in)."""
    if p <= 0:
        return

    def drop(module, inputs, output):
        if isinstance(output, tuple):
            return (torch.nn.functional.dropout(output[0], p, module.training), *output[1:])
        return torch.nn.functional.dropout(output, p, module.training)

    for layer in model.model.layers:
        layer.self_attn.register_forward_hook(drop)
        layer.mlp.register_forward_hook(drop)


def build_model(shape: ModelShape, *, seed: int = 0, dropout: float = 0.0) -> LlamaForCausalLM:
    """A freshly initialised model; identical weights for identical (shape, seed)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(llama_config(shape, attention_dropout=dropout))
    add_residual_dropout(model, dropout)
    return model


def count_non_embedding_params(model: torch.nn.Module) -> int:
    """N as defined above, counted on a live model (embedding and LM head excluded)."""
    excluded = {id(p) for name, p in model.named_parameters() if "embed" in name or name.startswith("lm_head")}
    return sum(p.numel() for p in model.parameters() if id(p) not in excluded)


def resolve_device(name: str) -> str:
    """`auto` → cuda when torch sees a GPU, else cpu; `cpu` / `cuda` as given."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name
