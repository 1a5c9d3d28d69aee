"""The model: a Llama-style decoder from transformers (`LlamaConfig` → `LlamaForCausalLM`), sized by a
`qscaling.shape.ModelShape` (which also says how N, the non-embedding parameter count, is counted)."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from qscaling.quant.precision import is_quantizer_parameter
from qscaling.shape import ModelShape


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
    """N as defined above, counted on a live model (embedding and LM head excluded, and the steps and clipping
    logits of learned quantizers: a model's N is its architecture's, however it trained)."""
    excluded = {
        id(p)
        for name, p in model.named_parameters()
        if "embed" in name or name.startswith("lm_head") or is_quantizer_parameter(name)
    }
    return sum(p.numel() for p in model.parameters() if id(p) not in excluded)
