"""The model: a Llama-style decoder from transformers (`LlamaConfig` → `LlamaForCausalLM`), sized by a
`qscaling.shape.ModelShape` (which also says how N, the non-embedding parameter count, is counted), and its
training loss (`compute_loss`)."""

import torch
import torch.nn.functional as F
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


class LinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of `hidden @ weight.T` against `targets`, computed `chunk` rows at a time.

    The full (tokens × vocab) logits never exist: each chunk's logits are turned into their gradient in place and
    both matmul gradients are accumulated during the forward pass, so backward only scales them. At our vocab of
    2048 and widths of 32–80 the logits dominate a step's memory traffic; this makes a training step 1.2–1.7× faster
    on CPU than materialising them.
    """

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk: int) -> torch.Tensor:
        rows = hidden.size(0)
        grad_hidden = torch.empty_like(hidden)
        grad_weight = torch.zeros_like(weight)
        total = hidden.new_zeros((), dtype=torch.float64)
        for start in range(0, rows, chunk):
            chunk_hidden, chunk_targets = hidden[start : start + chunk], targets[start : start + chunk]
            logits = chunk_hidden @ weight.t()
            log_normaliser = torch.logsumexp(logits, dim=-1)
            target_logits = logits.gather(1, chunk_targets[:, None]).squeeze(1)
            total += (log_normaliser - target_logits).sum(dtype=torch.float64)
            grad_logits = logits.sub_(log_normaliser[:, None]).exp_()
            grad_logits[torch.arange(len(chunk_targets)), chunk_targets] -= 1
            grad_logits.div_(rows)
            grad_hidden[start : start + chunk] = grad_logits @ weight
            grad_weight.addmm_(grad_logits.t(), chunk_hidden)
        ctx.save_for_backward(grad_hidden, grad_weight)
        return (total / rows).to(hidden.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden * grad, grad_weight * grad, None, None


def compute_loss(model, batch: torch.Tensor, *, chunk: int = 512) -> torch.Tensor:
    """Mean next-token cross-entropy (nats); labels are the shifted window, so no logits are sliced.

    A plain fp32 head goes through `LinearCrossEntropy`; autocast, or a head replaced for quantized training, takes
    the model's own forward.
    """
    inputs, targets = batch[:, :-1], batch[:, 1:].reshape(-1)
    head = model.get_output_embeddings()
    if type(head) is torch.nn.Linear and head.bias is None and not torch.is_autocast_enabled(inputs.device.type):
        hidden = model.get_decoder()(input_ids=inputs).last_hidden_state
        return LinearCrossEntropy.apply(hidden.reshape(-1, hidden.size(-1)), head.weight, targets, chunk)
    logits = model(input_ids=inputs).logits
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets)
