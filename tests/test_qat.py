"""Quantization-aware training: the clipped STE, the backward-GEMM Linear, the precision spec, model hooks,
and QAT runs through the spine's trainer."""

import re

import pytest
import torch
import torch.nn.functional as F
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, LlamaConfig, LlamaForCausalLM

from qscaling.model import ModelShape
from qscaling.quant import parse_spec, quantize
from qscaling.quant.precision import canonical_training_precision, run_precision_label, training_precision_label
from qscaling.quant.qat import (
    LinearPrecision,
    QuantizedLinearFunction,
    QuantizedTrainingLinear,
    apply_training_precision,
    clamp_mask,
    clamp_mask_by_codes,
    drop_weight_quantizers,
    fake_quantize_ste,
    never_clamps_finite,
    quantize_trained_linear_inputs,
)
from qscaling.quant.roles import decoder_blocks
from qscaling.train import RunSpec, train


def test_clipped_ste_zeroes_the_gradient_exactly_where_int_codes_clamp():
    # int4:tensor:gptq: s = 2·amax/15 = 1 for amax 7.5; codes -8..7. 7.5/1 rounds (half to even) to 8 → clamped
    # to 7; -7.5 → -8 is in range; 3 and 0.4 are inside.
    x = torch.tensor([7.5, -7.5, 3.0, 0.4], requires_grad=True)
    y = fake_quantize_ste(x, "int4:tensor:gptq")
    assert y.tolist() == [7.0, -8.0, 3.0, 0.0]
    y.backward(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    assert x.grad.tolist() == [0.0, 2.0, 3.0, 4.0]
    x.grad = None
    fake_quantize_ste(x, "int4:tensor:gptq", clipped=False).backward(torch.ones(4))
    assert x.grad.tolist() == [1.0, 1.0, 1.0, 1.0]


def test_clipped_ste_zeroes_the_gradient_where_fp_saturates():
    # E2M1 cast (scale 1): max 6, top binade ulp 2. 7 is the tie between 6 and 8 and rounds to even (8) → past
    # the max → saturated; 6.2 rounds to 6; -100 saturates; 1 is exact.
    x = torch.tensor([7.0, 6.2, -100.0, 1.0], requires_grad=True)
    y = fake_quantize_ste(x, "fp:e2m1:unscaled")
    assert y.tolist() == [6.0, 6.0, -6.0, 1.0]
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0, 1.0]


def test_absmax_scaling_never_clamps():
    x = torch.randn(16, 96)
    for spec in ("int4:g32", "int8:channel", "int3:tensor", "fp:e4m3:b32", "fp:e2m1:channel", "int4:g32:asym"):
        assert clamp_mask(x, spec).all(), spec


def awkward_values(rows: int, cols: int, seed: int) -> torch.Tensor:
    """Normal values with subnormals, exact zeros, ±inf, NaN and all-zero rows: every case a mask must get right."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=generator) * torch.logspace(-40, 30, cols, base=2.0)
    x[0] = 0.0
    x[1, ::7] = 1e-42  # subnormal
    x[2, 3], x[3, 5], x[4, 1] = float("inf"), float("-inf"), float("nan")
    x[5] *= 1e-39  # a row whose absmax scale falls below the smallest normal
    return x


@pytest.mark.parametrize(
    "text",
    ["int4:g8", "int4:channel", "int4:token", "int2:g4", "int8:tensor", "int3:g16:mulinv", "int4:g8:nearest-away"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_mask_of_a_quantizer_that_never_clamps_a_finite_value_equals_the_mask_from_its_codes(text, dtype):
    spec = parse_spec(text)
    assert never_clamps_finite(spec)
    for seed in range(3):
        x = awkward_values(24, 64, seed).to(dtype)
        assert torch.equal(clamp_mask(x, spec), clamp_mask_by_codes(x, spec)), (text, seed)


def test_quantizers_that_can_clamp_keep_the_mask_from_their_codes():
    for text in ("int4:tensor:gptq", "int4:g8:asym", "int4:g8:stochastic", "fp:e2m1:b8"):
        assert not never_clamps_finite(parse_spec(text)), text


def _linear_inputs(bias: bool):
    torch.manual_seed(0)
    x = torch.randn(3, 5, 40, requires_grad=True)
    weight = torch.randn(24, 40, requires_grad=True)
    b = torch.randn(24, requires_grad=True) if bias else None
    return x, weight, b


@pytest.mark.parametrize("bias", [True, False])
def test_backward_gemm_linear_with_no_specs_equals_torch_bit_for_bit(bias):
    x, weight, b = _linear_inputs(bias)
    upstream = torch.randn(3, 5, 24)
    params = [x, weight] + ([b] if bias else [])
    ours = torch.autograd.grad(QuantizedLinearFunction.apply(x, weight, b, LinearPrecision()), params, upstream)
    reference = torch.autograd.grad(F.linear(x, weight, b), params, upstream)
    for mine, theirs in zip(ours, reference):
        assert torch.equal(mine, theirs)


def test_forward_only_qat_equals_autograd_through_fake_quant():
    # Forward-only QAT with a plain STE is what autograd gives for x + (Q(x) - x).detach().
    x, weight, b = _linear_inputs(True)
    precision = LinearPrecision(weights=parse_spec("int4:g16"), activations=parse_spec("fp:e2m1:b8"), clipped_ste=False)
    upstream = torch.randn(3, 5, 24)
    ours = torch.autograd.grad(QuantizedLinearFunction.apply(x, weight, b, precision), [x, weight, b], upstream)
    x_q = x + (quantize(x, "fp:e2m1:b8") - x).detach()
    w_q = weight + (quantize(weight, "int4:g16") - weight).detach()
    reference = torch.autograd.grad(F.linear(x_q, w_q, b), [x, weight, b], upstream)
    for mine, theirs in zip(ours, reference):
        assert torch.equal(mine, theirs)


def test_backward_specs_quantize_the_backward_gemm_inputs():
    x, weight, b = _linear_inputs(True)
    upstream = torch.randn(3, 5, 24)
    precision = LinearPrecision(
        backward_weight=parse_spec("int4:channel"),
        backward_activation=parse_spec("int4:token"),
        backward_grad_output=parse_spec("fp:e4m3:b8"),
    )
    y = QuantizedLinearFunction.apply(x, weight, b, precision)
    assert torch.equal(y, F.linear(x, weight, b))  # the forward stays full precision
    grad_x, grad_w, grad_b = torch.autograd.grad(y, [x, weight, b], upstream)
    g = quantize(upstream, "fp:e4m3:b8").reshape(-1, 24)
    torch.testing.assert_close(grad_x, (g @ quantize(weight, "int4:channel")).reshape(3, 5, 40))
    torch.testing.assert_close(grad_w, g.T @ quantize(x, "int4:token").reshape(-1, 40))
    torch.testing.assert_close(grad_b, upstream.reshape(-1, 24).sum(0))
    assert not torch.allclose(grad_x, (upstream.reshape(-1, 24) @ weight).reshape(3, 5, 40))


@pytest.mark.parametrize("gemms", ["dx", "dw"])
def test_grad_output_can_be_quantized_for_one_backward_gemm_only(gemms):
    # Sun et al.'s P3 (dY in dX = dY·W) and P5 (dY in dW = dYᵀ·X) are separate GEMM inputs.
    x, weight, b = _linear_inputs(True)
    upstream = torch.randn(3, 5, 24)
    spec = parse_spec("fp:e1m1:b8")
    precision = LinearPrecision(backward_grad_output=spec, grad_output_gemms=gemms)
    grad_x, grad_w, grad_b = torch.autograd.grad(
        QuantizedLinearFunction.apply(x, weight, b, precision), [x, weight, b], upstream
    )
    plain, quantized = upstream.reshape(-1, 24), quantize(upstream, spec).reshape(-1, 24)
    for_x, for_w = (quantized, plain) if gemms == "dx" else (plain, quantized)
    assert torch.equal(grad_x, (for_x @ weight).reshape(3, 5, 40))
    torch.testing.assert_close(grad_w, for_w.T @ x.reshape(-1, 40))
    assert torch.equal(grad_b, plain.sum(0))
    both = torch.autograd.grad(
        QuantizedLinearFunction.apply(x, weight, b, LinearPrecision(backward_grad_output=spec)), [x, weight], upstream
    )
    assert not torch.equal((grad_x, grad_w)[gemms == "dx"], both[gemms == "dx"])


def test_grad_output_gemms_enters_the_canonical_precision_only_when_it_narrows():
    base = {"backward_grad_output": "fp:e1m1:b8"}
    assert "grad_output_gemms" not in canonical_training_precision({**base, "grad_output_gemms": "both"})
    assert canonical_training_precision({**base, "grad_output_gemms": "dw"})["grad_output_gemms"] == "dw"
    assert training_precision_label({**base, "grad_output_gemms": "dx"}) == "bwd dY fp:e1m1:b8 · bwd dY in dX only"
    with pytest.raises(ValueError, match=r"grad_output_gemms: 'dx' chooses .* no backward_grad_output is set"):
        canonical_training_precision({"grad_output_gemms": "dx"})
    with pytest.raises(ValueError, match=r"grad_output_gemms: got 'dy', valid: both, dx, dw"):
        canonical_training_precision({**base, "grad_output_gemms": "dy"})


def test_canonical_precision_fills_defaults_and_sorts():
    canonical = canonical_training_precision({"activations": "INT4:g128", "weights": "int4:g128:sym"})
    assert canonical == {
        "activations": "int4:g128",
        "backward_activation": None,
        "backward_grad_output": None,
        "backward_weight": None,
        "exclude": ["lm_head"],
        "kv": None,
        "overrides": {},
        "ste": "clipped",
        "weights": "int4:g128",
    }
    assert list(canonical) == sorted(canonical)
    assert canonical_training_precision(canonical) == canonical
    assert canonical_training_precision(None) == canonical_training_precision({})
    overridden = canonical_training_precision({"overrides": {"fc2": {"activations": "int8:g128"}, "qkv": {}}})
    assert list(overridden["overrides"]) == ["qkv", "fc2"]


@pytest.mark.parametrize(
    "precision, message",
    [
        ({"wieghts": "int4:g128"}, r"unknown field\(s\) \['wieghts'\], valid: weights, activations"),
        ({"weights": "int9:g128"}, r"training_precision.weights: quant spec 'int9:g128': bits must be 2..8"),
        ({"weights": 4}, r"training_precision.weights: expected a spec string or null, got int"),
        ({"ste": "soft"}, r"training_precision.ste: got 'soft', valid: clipped, identity"),
        ({"exclude": ["head"]}, r"training_precision.exclude: got \['head'\], valid roles: qkv, o"),
        ({"overrides": {"mlp": {}}}, r"training_precision.overrides: got .*keys must be roles"),
        ({"overrides": {"fc2": {"bits": 8}}}, r"overrides.fc2: unknown field\(s\) \['bits'\]"),
    ],
)
def test_bad_precisions_are_named(precision, message):
    with pytest.raises((ValueError, TypeError), match=message):
        canonical_training_precision(precision)


def _tiny_llama():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    return LlamaForCausalLM(config)


def test_model_hooks_follow_roles_overrides_and_exclusions():
    model = _tiny_llama()
    apply_training_precision(
        model, {"weights": "int4:g16", "activations": "int4:g16", "overrides": {"fc2": {"activations": "int8:g16"}}}
    )
    block = decoder_blocks(model)[0]
    assert type(model.lm_head) is torch.nn.Linear  # excluded by default
    assert str(block.mlp.down_proj.precision.activations) == "int8:g16"
    assert str(block.mlp.up_proj.precision.activations) == "int4:g16"
    assert isinstance(block.self_attn.q_proj, QuantizedTrainingLinear)
    assert set(model.state_dict()) == set(_tiny_llama().state_dict())  # checkpoints keep their keys
    x = torch.randn(2, 7, 32)
    expected = F.linear(quantize(x, "int4:g16"), quantize(block.self_attn.q_proj.weight, "int4:g16"))
    assert torch.equal(block.self_attn.q_proj(x), expected)


def test_full_precision_leaves_the_model_untouched():
    model = _tiny_llama()
    apply_training_precision(model, None)
    assert all(type(m) is torch.nn.Linear for m in model.modules() if isinstance(m, torch.nn.Linear))


def test_kv_outputs_are_quantized_llama_and_fused_gpt_neox():
    model = _tiny_llama()
    apply_training_precision(model, {"kv": "int4:token"})
    attention = decoder_blocks(model)[0].self_attn
    x = torch.randn(2, 7, 32)
    assert torch.equal(attention.k_proj(x), quantize(F.linear(x, attention.k_proj.weight), "int4:token"))
    assert type(attention.q_proj) is torch.nn.Linear  # kv only touches the k/v projections

    torch.manual_seed(0)
    neox = GPTNeoXForCausalLM(
        GPTNeoXConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4)
    )
    apply_training_precision(neox, {"kv": "int4:token"})
    fused = decoder_blocks(neox)[0].attention.query_key_value
    plain = F.linear(x, fused.weight, fused.bias).view(2, 7, 4, 3, 8)
    quantized = fused(x).view(2, 7, 4, 3, 8)
    assert torch.equal(quantized[..., 0, :], plain[..., 0, :])  # queries untouched
    keys = plain[..., 1, :].reshape(2, 7, 32)
    assert torch.equal(quantized[..., 1, :].reshape(2, 7, 32), quantize(keys, "int4:token"))


SHAPE = ModelShape(d_model=32, n_layers=2, n_heads=2, d_ff=64, vocab_size=64, seq_len=32)


def _qat_run(tmp_path, token_files, precision):
    spec = RunSpec(
        size="Ntiny",
        shape=SHAPE,
        data="markov",
        batch_size=8,
        lr=3e-3,
        warmup_tokens=1024,
        total_tokens=12_800,
        schedule="cosine",
        training_precision=precision,
    )
    summary = train(spec, tmp_path / spec.run_id, token_files["train"], progress=False)
    curve = [loss for _, loss in summary["train_loss_curve"]]
    return spec, curve


def test_w4a4_qat_trains_through_the_spine_as_its_own_run(tmp_path, token_files):
    spec, curve = _qat_run(tmp_path, token_files, {"weights": "int4:g128", "activations": "int4:g128"})
    baseline = RunSpec(**{**spec.__dict__, "training_precision": None})
    assert spec.run_id != baseline.run_id
    assert curve[-1] < curve[0] - 0.5  # ln 64 = 4.16 at the start


def test_backward_gemm_quantized_run_trains_too(tmp_path, token_files):
    # Sun et al.'s scaling-law setting: W in the forward, W in dX and X in dW quantized (P2, P4, P6).
    precision = {"weights": "fp:e2m3:b32", "backward_weight": "fp:e2m3:b32", "backward_activation": "fp:e2m3:b32"}
    _, curve = _qat_run(tmp_path, token_files, precision)
    assert curve[-1] < curve[0] - 0.5


@pytest.mark.parametrize(
    "precision, autocast, label",
    [
        (None, None, "fp32"),
        ({}, None, "fp32"),
        ({"exclude": [], "ste": "identity"}, None, "fp32"),  # nothing quantized: nothing else matters
        (None, "bf16", "autocast bf16"),
        ({"activations": "INT4:g128", "weights": "int4:g128:sym"}, None, "W int4:g128 · A int4:g128"),
        ({"kv": "int4:token"}, None, "KV int4:token"),
        (
            {"weights": "fp:e2m3:b32", "backward_weight": "fp:e2m3:b32", "backward_grad_output": "fp:e4m3:b32"},
            None,
            "W fp:e2m3:b32 · bwd W fp:e2m3:b32 · bwd dY fp:e4m3:b32",
        ),
        (
            {"weights": "int4:g128", "overrides": {"fc2": {"activations": "int8:g128", "weights": None}}},
            None,
            "W int4:g128 · fc2(W fp32, A int8:g128)",
        ),
        (
            {"weights": "int8:channel", "exclude": ["fc2", "lm_head"], "ste": "identity"},
            "bf16",
            "autocast bf16 · W int8:channel · exclude fc2,lm_head · STE identity",
        ),
        ({"weights": "int8:channel", "exclude": []}, None, "W int8:channel · exclude none"),
    ],
)
def test_training_precision_labels(precision, autocast, label):
    assert training_precision_label(precision, autocast) == label
    assert training_precision_label(canonical_training_precision(precision), autocast) == label


def test_run_precision_label_reads_a_stored_spec():
    spec = RunSpec(size="Ntiny", shape=SHAPE, data="markov", training_precision={"weights": "int4:g128"})
    assert run_precision_label(spec.to_dict()) == "W int4:g128"
    assert run_precision_label(RunSpec(size="Ntiny", shape=SHAPE, data="markov").to_dict()) == "fp32"
    assert run_precision_label({"size": "N160m", "source": "hub"}) is None  # a hub checkpoint: not known


def test_dropping_weight_quantizers_keeps_the_others():
    model = _tiny_llama()
    apply_training_precision(model, {"weights": "int4:g16", "kv": "int4:token"})
    attention = decoder_blocks(model)[0].self_attn
    drop_weight_quantizers(model, ["model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj"])
    assert type(attention.q_proj) is torch.nn.Linear and not hasattr(attention.q_proj, "precision")
    assert attention.k_proj.precision.weights is None and str(attention.k_proj.precision.kv) == "int4:token"
    assert attention.v_proj.precision.weights is not None  # not asked for
    x = torch.randn(2, 7, 32)
    assert torch.equal(attention.k_proj(x), quantize(F.linear(x, attention.k_proj.weight), "int4:token"))


def test_trained_linear_inputs_need_a_quantized_training_linear():
    with pytest.raises(TypeError, match="modules: expected QuantizedTrainingLinear, got Linear"):
        quantize_trained_linear_inputs(_tiny_llama(), ["model.layers.0.self_attn.q_proj"], "int8:token")


def test_bench_train_times_the_qat_step_against_the_full_precision_step_in_one_run(capsys):
    from qscaling.cli import main

    argv = ["bench", "train", "--d-model", "16", "--n-layers", "1", "--vocab-size", "64", "--seq-len", "16",
            "--batch-size", "2", "--steps", "2", "--repeats", "1", "--precision", "int4:g8"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "qscaling QAT step, weights,activations at int4:g8" in out
    assert re.search(r"QAT step time / full-precision step time: \d+\.\d\dx", out)
    assert main([*argv[:-2], "--precision", "fp:e2m1:channel", "--quantized", "weights,backward_activation"]) == 0
    assert "qscaling QAT step, weights,backward_activation at fp:e2m1:channel" in capsys.readouterr().out


@pytest.mark.parametrize("poison", [None, float("inf"), float("nan")])
def test_qat_gradients_are_bit_identical_to_those_through_the_mask_from_codes(monkeypatch, poison):
    import qscaling.quant.qat as qat

    def gradients():
        torch.manual_seed(0)
        x = torch.randn(4, 6, 32)
        if poison is not None:
            x[1, 2, 5] = poison
        x.requires_grad_()
        weight = torch.randn(16, 32, requires_grad=True)
        precision = LinearPrecision(weights=parse_spec("int4:g8"), activations=parse_spec("int4:g8"))
        QuantizedLinearFunction.apply(x, weight, None, precision).nan_to_num().sum().backward()
        return x.grad, weight.grad

    fast = gradients()
    monkeypatch.setattr(qat, "_needed_clamp_mask", lambda x, spec: clamp_mask_by_codes(x, spec))
    for ours, by_codes in zip(fast, gradients()):
        assert torch.equal(ours.nan_to_num(), by_codes.nan_to_num())
    if poison is not None:
        assert fast[0][1, 2, 5] == 0.0
