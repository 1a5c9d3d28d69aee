"""Module roles, k/v channels and AWQ fold points of Llama, GPT-NeoX and OPT, checked against the models."""

from collections import Counter

import pytest
import torch
from transformers import (
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    OPTConfig,
    OPTForCausalLM,
)

from qscaling.quant.awq import fold_scales
from qscaling.quant.roles import decoder_blocks, linear_sites, model_layout, untie_lm_head

VOCAB, WIDTH, HEADS, FFN, LAYERS = 48, 32, 4, 64, 2


def tiny_models():
    torch.manual_seed(0)
    models = {
        "llama": LlamaForCausalLM(
            LlamaConfig(
                vocab_size=VOCAB,
                hidden_size=WIDTH,
                intermediate_size=FFN,
                num_hidden_layers=LAYERS,
                num_attention_heads=HEADS,
                num_key_value_heads=HEADS,
            )
        ),
        "llama_gqa": LlamaForCausalLM(
            LlamaConfig(
                vocab_size=VOCAB,
                hidden_size=WIDTH,
                intermediate_size=FFN,
                num_hidden_layers=LAYERS,
                num_attention_heads=HEADS,
                num_key_value_heads=2,
            )
        ),
        "gpt_neox": GPTNeoXForCausalLM(
            GPTNeoXConfig(
                vocab_size=VOCAB,
                hidden_size=WIDTH,
                intermediate_size=FFN,
                num_hidden_layers=LAYERS,
                num_attention_heads=HEADS,
            )
        ),
        "opt": OPTForCausalLM(
            OPTConfig(
                vocab_size=VOCAB,
                hidden_size=WIDTH,
                ffn_dim=FFN,
                num_hidden_layers=LAYERS,
                num_attention_heads=HEADS,
                word_embed_proj_dim=WIDTH,
            )
        ),
    }
    return {name: model.eval() for name, model in models.items()}  # eval: OPT's dropout is on by default


MODELS = tiny_models()
# Linears per block by role: Llama's separate q/k/v and gate/up, GPT-NeoX's fused QKV, OPT's q/k/v.
EXPECTED_ROLE_COUNTS = {
    "llama": {"qkv": 3, "o": 1, "fc1": 2, "fc2": 1},
    "llama_gqa": {"qkv": 3, "o": 1, "fc1": 2, "fc2": 1},
    "gpt_neox": {"qkv": 1, "o": 1, "fc1": 1, "fc2": 1},
    "opt": {"qkv": 3, "o": 1, "fc1": 1, "fc2": 1},
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_linear_gets_exactly_one_role(name):
    model = MODELS[name]
    sites = linear_sites(model)
    all_linears = {n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert {site.name for site in sites} == all_linears
    block_counts = Counter(site.role for site in sites if site.block == 0)
    assert block_counts == EXPECTED_ROLE_COUNTS[name]
    assert [site.role for site in sites if site.block is None] == ["lm_head"]
    assert len(decoder_blocks(model)) == LAYERS


def test_unsupported_architecture_is_named():
    bert_like = torch.nn.Module()
    bert_like.config = type("Config", (), {"model_type": "bert"})()
    with pytest.raises(ValueError, match=r"model_type: got 'bert'.*supported: \['gpt_neox', 'llama', 'opt'\]"):
        model_layout(bert_like)


def test_gpt_neox_kv_channels_match_transformers_split():
    model = MODELS["gpt_neox"]
    attention = decoder_blocks(model)[0].attention
    key_channels, value_channels = model_layout(model).kv_outputs["attention.query_key_value"]
    x = torch.randn(2, 5, WIDTH)
    fused = attention.query_key_value(x)
    # transformers: view(..., heads, 3·head_size) then chunk(3, -1) -> q, k, v.
    _, key, value = fused.view(2, 5, HEADS, -1).chunk(3, dim=-1)
    assert torch.equal(fused[..., key_channels], key.reshape(2, 5, -1))
    assert torch.equal(fused[..., value_channels], value.reshape(2, 5, -1))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_folding_awq_scales_keeps_the_model_function(name):
    model = MODELS[name]
    # Non-trivial norm gains/biases, so a fold that forgot the bias would show.
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.bias.normal_()
    tokens = torch.randint(0, VOCAB, (2, 12))
    with torch.no_grad():
        before = model(tokens).logits
        for fold in model_layout(model).scale_folds:
            for block in decoder_blocks(model):
                width = block.get_submodule(fold.consumers[0]).in_features
                fold_scales(block, fold, torch.rand(width) * 3 + 0.25)
        after = model(tokens).logits
    torch.testing.assert_close(after, before, rtol=1e-4, atol=1e-4)
    assert before.abs().max() > 0


def test_fold_points_follow_the_architecture():
    folds = {name: [f.consumers for f in model_layout(m).scale_folds] for name, m in MODELS.items()}
    # GQA: v_proj is narrower than o_proj's input, so no fold there (llm-awq skips it too).
    assert ("self_attn.o_proj",) in folds["llama"] and ("self_attn.o_proj",) not in folds["llama_gqa"]
    # GPT-NeoX fc2 follows a GELU: no fold.
    assert ("mlp.dense_4h_to_h",) not in folds["gpt_neox"]
    assert ("fc2",) in folds["opt"]


def test_untie_lm_head_separates_it_from_the_embedding():
    model = OPTForCausalLM(
        OPTConfig(
            vocab_size=VOCAB,
            hidden_size=WIDTH,
            ffn_dim=FFN,
            num_hidden_layers=1,
            num_attention_heads=HEADS,
            word_embed_proj_dim=WIDTH,
        )
    )
    assert model.lm_head.weight is model.get_input_embeddings().weight
    untie_lm_head(model)
    with torch.no_grad():
        model.lm_head.weight.zero_()
    assert model.get_input_embeddings().weight.abs().sum() > 0
    assert model.config.tie_word_embeddings is False
