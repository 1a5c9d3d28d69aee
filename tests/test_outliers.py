"""Outlier proxies and outlier-dimension rules (Ahmadian et al. 2023 Sec. 4; LLM.int8's 6 / 25 % / 6 % rule)."""

import pytest
import torch
from transformers import OPTConfig, OPTForCausalLM

from qscaling.model import ModelShape, build_model
from qscaling.outliers import (
    block_proxies,
    block_values,
    outlier_counts,
    outlier_dimensions,
    qkv_inputs,
    qkv_norm_gains,
    w8a8_rmse,
)


def layers_with(spikes, *, n_layers=8, tokens=100, dims=8, value=7.0):
    """`n_layers` [tokens, dims] inputs of ones; spikes = {dim: (layers spiked, tokens spiked per layer)}."""
    inputs = [torch.ones(tokens, dims) for _ in range(n_layers)]
    for dim, (layer_count, token_count) in spikes.items():
        for layer in range(layer_count):
            inputs[layer][:token_count, dim] = value
    return inputs


def test_llm_int8_rule_needs_a_quarter_of_the_layers_and_six_percent_of_the_tokens():
    inputs = layers_with(
        {
            3: (2, 10),  # 2/8 layers, 10 % of tokens: an outlier dimension
            5: (8, 5),  # every layer but only 5 % of tokens: not one
            1: (1, 50),
        }
    )  # half the tokens but 1/8 layers: not one
    assert outlier_dimensions(inputs, 6.0) == 1
    assert outlier_dimensions(layers_with({3: (2, 6)}), 6.0) == 1  # exactly 6 % of the tokens counts
    assert outlier_dimensions(layers_with({3: (1, 6)}), 6.0) == 0  # 1/8 layers < 25 %


def test_looser_threshold_and_zscore_rule_find_moderate_outliers():
    counts = outlier_counts(layers_with({2: (8, 20)}, value=5.0))  # 5 > 4.2 but not > 6
    assert counts["llm_int8"] == 0 and counts["threshold_4.2"] == 1
    # μ + 4σ on a ±3 background (μ ≈ 0, σ ≈ 3): 100 lies outside, 10 inside.
    background = [torch.full((100, 8), 3.0) * torch.tensor([1.0, -1.0]).repeat(50)[:, None] for _ in range(4)]
    far, near = [x.clone() for x in background], [x.clone() for x in background]
    for x in far:
        x[:7, 4] = 100.0
    for x in near:
        x[:7, 4] = 10.0
    assert outlier_dimensions(far, None) == 1 and outlier_dimensions(near, None) == 0
    with pytest.raises(ValueError, match="no layers"):
        outlier_dimensions([], 6.0)


def test_w8a8_rmse_matches_a_per_token_int8_round_trip():
    x = torch.randn(64, 48, generator=torch.Generator().manual_seed(0)) * 3
    scale = x.abs().amax(dim=-1, keepdim=True) / 127
    reference = torch.round(x / scale).clamp(-127, 127) * scale
    assert w8a8_rmse(x) == pytest.approx(float((x - reference).pow(2).mean().sqrt()), rel=1e-6)
    assert w8a8_rmse(torch.round(x)) <= w8a8_rmse(x * 50)  # error scales with the token's range


@pytest.fixture(scope="module")
def tiny_llama():
    model = build_model(ModelShape(d_model=16, n_layers=3, n_heads=2, d_ff=32, vocab_size=64, seq_len=16), seed=1)
    with torch.no_grad():
        for index, layer in enumerate(model.model.layers):
            layer.input_layernorm.weight.copy_(torch.linspace(1 - 0.1 * index, 1 + 0.1 * index, 16))
    return model.eval()


def test_qkv_inputs_are_the_normed_residual_stream(tiny_llama):
    windows = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))
    inputs = qkv_inputs(tiny_llama, windows)
    assert len(inputs) == 3 and inputs[0].shape == (32, 16)
    embedded = tiny_llama.model.embed_tokens(windows)
    expected = tiny_llama.model.layers[0].input_layernorm(embedded).reshape(-1, 16)
    assert torch.equal(inputs[0], expected.detach())


def test_block_proxies_match_their_definitions(tiny_llama):
    windows = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))
    inputs = qkv_inputs(tiny_llama, windows)
    proxies = block_proxies(tiny_llama, inputs)
    attention = tiny_llama.model.layers[2].self_attn
    stacked = torch.cat([attention.q_proj.weight, attention.k_proj.weight, attention.v_proj.weight]).detach()
    row = proxies.iloc[2]
    assert row["spectral_norm"] == pytest.approx(float(torch.linalg.svdvals(stacked)[0]), rel=1e-5)
    assert row["gain_std"] == pytest.approx(float(torch.linspace(0.8, 1.2, 16).std()), rel=1e-6)
    assert proxies.iloc[0]["gain_std"] == 0.0  # block 0's gains are all 1
    assert row["act_std"] == pytest.approx(float(inputs[2].std(dim=-1).mean()))
    assert row["rmse"] == w8a8_rmse(inputs[2])
    values = block_values(tiny_llama, 1)
    assert (values["kind"] == "qkv_weight").sum() == 3 * 16 * 16 and (values["kind"] == "norm_gain").sum() == 16


def test_opt_gains_come_from_the_pre_attention_layer_norm():
    config = OPTConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=2,
        ffn_dim=32,
        num_attention_heads=2,
        word_embed_proj_dim=16,
        max_position_embeddings=32,
    )
    model = OPTForCausalLM(config)
    gains = qkv_norm_gains(model)
    assert len(gains) == 2 and gains[1] is not None
    assert gains[1].data_ptr() == model.model.decoder.layers[1].self_attn_layer_norm.weight.data_ptr()
    post_norm = OPTForCausalLM(OPTConfig(**{**config.to_dict(), "do_layer_norm_before": False}))
    assert qkv_norm_gains(post_norm) == [None, None]
