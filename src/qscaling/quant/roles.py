"""Where the quantizable Linears of a causal LM sit: decoder blocks, each Linear's role, k/v outputs, and
which operation feeds each Linear (where AWQ's per-channel scales can be folded); and how a fake-quantizing Linear
takes over a Linear's parameters in its place.

Roles follow Chen et al. 2025 (Fig. 15): `qkv` (query/key/value projections), `o` (attention output),
`fc1` (MLP up, and gate for SwiGLU), `fc2` (MLP down), `lm_head`. Supported architectures are those the five
papers use: Llama (the spine's model; Chen, Sun, Kumar), GPT-NeoX (Pythia; Ouyang) and OPT (Ahmadian).
"""

from dataclasses import dataclass

import torch
from torch import nn

# Order in which a block's Linears see their inputs; GPTQ's optional true-sequential mode follows it.
BLOCK_ROLE_ORDER = ("qkv", "o", "fc1", "fc2")


@dataclass(frozen=True)
class LinearSite:
    """One quantizable Linear: its dotted path in the model, role, and decoder block (None for lm_head)."""

    name: str
    module: nn.Linear
    role: str
    block: int | None


@dataclass(frozen=True)
class ScaleFold:
    """A group of Linears sharing one input, and the op whose output channels produce that input.

    AWQ divides `previous`'s output channels `previous_channels` (None: all) by s and multiplies the
    consumers' input columns by s, so the model computes the same function with no run-time op.
    """

    previous: str
    consumers: tuple[str, ...]
    previous_channels: torch.Tensor | None = None


@dataclass(frozen=True)
class Layout:
    """Paths (relative to the model, or to a decoder block) that describe one architecture."""

    blocks: str
    linear_roles: dict[str, str]
    lm_head: str
    # k/v projection outputs: Linear path -> output channels that hold k or v (None: the whole output).
    kv_outputs: dict[str, tuple[torch.Tensor | None, ...]]
    scale_folds: tuple[ScaleFold, ...]


def _fused_qkv_channels(n_heads: int, head_size: int, part: int) -> torch.Tensor:
    """Output channels of GPT-NeoX's fused query_key_value holding q (0), k (1) or v (2).

    transformers views the output as (..., heads, 3·head_size) and chunks the last dim in three.
    """
    head_starts = torch.arange(n_heads) * 3 * head_size
    return (head_starts[:, None] + part * head_size + torch.arange(head_size)).reshape(-1)


def _llama_layout(config) -> Layout:
    attn = {f"self_attn.{p}_proj": "qkv" for p in "qkv"}
    mlp = {"mlp.gate_proj": "fc1", "mlp.up_proj": "fc1", "mlp.down_proj": "fc2"}
    folds = [ScaleFold("input_layernorm", tuple(attn))]
    # v_proj's rows fold into o_proj's columns only when both have the same width (no grouped-query attn).
    if config.num_key_value_heads == config.num_attention_heads:
        folds.append(ScaleFold("self_attn.v_proj", ("self_attn.o_proj",)))
    folds += [
        ScaleFold("post_attention_layernorm", ("mlp.gate_proj", "mlp.up_proj")),
        # down's input is act(gate)·up, linear in up's output, so up's rows absorb the scale.
        ScaleFold("mlp.up_proj", ("mlp.down_proj",)),
    ]
    return Layout(
        blocks="model.layers",
        linear_roles={**attn, "self_attn.o_proj": "o", **mlp},
        lm_head="lm_head",
        kv_outputs={"self_attn.k_proj": (None,), "self_attn.v_proj": (None,)},
        scale_folds=tuple(folds),
    )


def _gpt_neox_layout(config) -> Layout:
    n_heads = config.num_attention_heads
    head_size = config.hidden_size // n_heads
    key_channels, value_channels = (_fused_qkv_channels(n_heads, head_size, part) for part in (1, 2))
    return Layout(
        blocks="gpt_neox.layers",
        linear_roles={
            "attention.query_key_value": "qkv",
            "attention.dense": "o",
            "mlp.dense_h_to_4h": "fc1",
            "mlp.dense_4h_to_h": "fc2",
        },
        lm_head="lm_head",
        kv_outputs={"attention.query_key_value": (key_channels, value_channels)},
        # dense_4h_to_h follows a GELU, which does not commute with scaling: no fold, plain RTN there.
        scale_folds=(
            ScaleFold("input_layernorm", ("attention.query_key_value",)),
            ScaleFold("attention.query_key_value", ("attention.dense",), value_channels),
            ScaleFold("post_attention_layernorm", ("mlp.dense_h_to_4h",)),
        ),
    )


def _opt_layout(config) -> Layout:
    attn = {f"self_attn.{p}_proj": "qkv" for p in "qkv"}
    folds = []
    # Post-norm OPT variants (do_layer_norm_before=False) have no norm right before qkv / fc1.
    if config.do_layer_norm_before:
        folds.append(ScaleFold("self_attn_layer_norm", tuple(attn)))
    folds.append(ScaleFold("self_attn.v_proj", ("self_attn.out_proj",)))
    if config.do_layer_norm_before:
        folds.append(ScaleFold("final_layer_norm", ("fc1",)))
    # ReLU(x/s) = ReLU(x)/s for s > 0, so fc1's rows absorb fc2's scale.
    if config.activation_function == "relu":
        folds.append(ScaleFold("fc1", ("fc2",)))
    return Layout(
        blocks="model.decoder.layers",
        linear_roles={**attn, "self_attn.out_proj": "o", "fc1": "fc1", "fc2": "fc2"},
        lm_head="lm_head",
        kv_outputs={"self_attn.k_proj": (None,), "self_attn.v_proj": (None,)},
        scale_folds=tuple(folds),
    )


LAYOUTS = {"llama": _llama_layout, "gpt_neox": _gpt_neox_layout, "opt": _opt_layout}


def model_layout(model: nn.Module) -> Layout:
    """The Layout of a transformers causal LM, chosen by `config.model_type`."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in LAYOUTS:
        raise ValueError(f"model_type: got {model_type!r}, supported: {sorted(LAYOUTS)}")
    return LAYOUTS[model_type](model.config)


def decoder_blocks(model: nn.Module) -> nn.ModuleList:
    """The model's decoder blocks, in order."""
    return model.get_submodule(model_layout(model).blocks)


def linear_sites(model: nn.Module, *, include_lm_head: bool = True) -> list[LinearSite]:
    """Every quantizable Linear with its role, block by block in `BLOCK_ROLE_ORDER`, then the lm_head."""
    layout = model_layout(model)
    sites = []
    for index, block in enumerate(model.get_submodule(layout.blocks)):
        ordered = sorted(layout.linear_roles.items(), key=lambda item: BLOCK_ROLE_ORDER.index(item[1]))
        for path, role in ordered:
            sites.append(LinearSite(f"{layout.blocks}.{index}.{path}", block.get_submodule(path), role, index))
    if include_lm_head:
        sites.append(LinearSite(layout.lm_head, model.get_submodule(layout.lm_head), "lm_head", None))
    return sites


def linear_sharing_parameters(cls: type[nn.Linear], linear: nn.Linear) -> nn.Linear:
    """A `cls` (nn.Linear or a subclass) holding `linear`'s Parameters — the same objects, under the same names and in
    the same order, so optimizer state and state-dict keys carry over — in `linear`'s train/eval mode.

    Its own initialisation runs on the meta device (no memory, no random numbers drawn) and is replaced.
    """
    module = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta")
    for name, parameter in linear.named_parameters(recurse=False):
        module.register_parameter(name, parameter)
    return module.train(linear.training)


def untie_lm_head(model: nn.Module) -> None:
    """Give the lm_head its own weight, so quantizing it leaves the input embedding untouched."""
    head = model.get_submodule(model_layout(model).lm_head)
    if head.weight is model.get_input_embeddings().weight:
        head.weight = nn.Parameter(head.weight.detach().clone())
    model.config.tie_word_embeddings = False
