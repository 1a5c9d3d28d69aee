"""Checkpoints of quantization-aware runs are scored as they trained, and post-training quantization of them starts
from the latent weights while the run's activation / KV quantizers stay in place."""

import pytest
import torch
import torch.nn.functional as F

import qscaling.train as train_module
from qscaling.checkpoint import load_checkpoint, save_checkpoint
from qscaling.cli import main
from qscaling.data import load_tokens
from qscaling.evaluate import evaluate_checkpoint, evaluate_loss
from qscaling.model import ModelShape, build_model
from qscaling.quant import quantize
from qscaling.quant.as_trained import load_as_trained, load_quantized_model
from qscaling.quant.gptq import HessianAccumulator, gptq_quantize_weight
from qscaling.quant.ptq import AWQ, GPTQ, RTN, W8A8, quantization_config, quantize_model, sample_calibration
from qscaling.quant.qat import QuantizedTrainingLinear, apply_training_precision
from qscaling.quant.roles import decoder_blocks, linear_sites
from qscaling.studies.scoring import score_checkpoint
from qscaling.studies.study import Quantization
from qscaling.train import RunSpec, milestone_name, train

SHAPE = ModelShape(d_model=32, n_layers=2, n_heads=2, d_ff=64, vocab_size=64, seq_len=32)
W4A4 = {"weights": "int4:g16", "activations": "int4:g16"}
EVAL_TOKENS = 33 * 60


def _spec(**overrides) -> RunSpec:
    fields = dict(size="Ntiny", shape=SHAPE, data="markov", batch_size=8, warmup_tokens=1024, total_tokens=12_800)
    return RunSpec(**{**fields, **overrides})


def _loss(model, tokens) -> float:
    return evaluate_loss(model, tokens, seq_len=SHAPE.seq_len, batch_size=8, max_tokens=EVAL_TOKENS)["loss"]


@pytest.fixture(scope="module")
def w4a4_run(tmp_path_factory, token_files):
    """A W4A4 run trained through the spine, and the loss of its final model scored in memory just before saving."""
    run_dir = tmp_path_factory.mktemp("w4a4_run")
    val = load_tokens(token_files["val"])
    scored = {}

    def score_then_save(model, path, metadata):
        scored["loss"] = _loss(model, val)
        scored["quantized_linears"] = sum(isinstance(m, QuantizedTrainingLinear) for m in model.modules())
        return save_checkpoint(model, path, metadata)

    spec = _spec(training_precision=W4A4)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(train_module, "save_checkpoint", score_then_save)
        train(spec, run_dir, token_files["train"], milestones=[spec.total_tokens], progress=False)
    return run_dir / "checkpoints" / milestone_name(spec.total_tokens), scored


def test_w4a4_checkpoint_scores_bit_identically_in_memory_and_reloaded(w4a4_run, token_files):
    checkpoint, scored = w4a4_run
    val = load_tokens(token_files["val"])
    model, _ = load_as_trained(checkpoint)
    assert sum(isinstance(m, QuantizedTrainingLinear) for m in model.modules()) == scored["quantized_linears"] == 14
    # Same latent fp32 weights (safetensors stores them exactly), same modules and quantizers, same CPU kernels:
    # the reloaded model repeats the in-memory one's arithmetic, so the losses agree to the last bit.
    assert _loss(model, val) == scored["loss"]
    row = evaluate_checkpoint(checkpoint, val, split="val", max_tokens=EVAL_TOKENS, batch_size=8)
    assert row["loss"] == scored["loss"]
    assert row["training_precision"] == "W int4:g16 · A int4:g16"


def test_latent_weight_model_scores_differently(w4a4_run, token_files):
    checkpoint, scored = w4a4_run
    raw, _ = load_checkpoint(checkpoint)
    assert not any(isinstance(m, QuantizedTrainingLinear) for m in raw.modules())
    # The trained model adapted to its quantizers, so dropping them moves the loss only a little here (~3e-4 nats),
    # yet far beyond fp32 rounding of a mean over 3,840 tokens (~1e-7).
    assert abs(_loss(raw, load_tokens(token_files["val"])) - scored["loss"]) > 1e-5


def test_ptq_study_scores_the_as_trained_model(w4a4_run, token_files):
    checkpoint, scored = w4a4_run
    held_out = {"val": load_tokens(token_files["val"])}
    quantizations = [
        Quantization("rtn", "int4:g16"),
        Quantization("gptq", "int4:g16"),
        Quantization("w8a8", "int8:channel"),
    ]
    table = score_checkpoint(
        checkpoint,
        quantizations,
        held_out,
        load_tokens(token_files["train"]),
        calibration={"sequences": 4, "seed": 0},
        eval_tokens=EVAL_TOKENS,
        batch_size=8,
    )
    assert table["method"].tolist() == ["none", "rtn", "gptq", "w8a8"]
    assert (table["base_loss"] == scored["loss"]).all()
    assert (table["training_precision"] == "W int4:g16 · A int4:g16").all()
    with pytest.raises(ValueError, match=r"awq on .*tokens_\d+: every scale would pass through a training-time"):
        score_checkpoint(
            checkpoint,
            [Quantization("awq", "int4:g16")],
            held_out,
            load_tokens(token_files["train"]),
            calibration={"sequences": 4, "seed": 0},
            eval_tokens=EVAL_TOKENS,
        )


def _as_trained(precision, seed=0):
    model = build_model(SHAPE, seed=seed)
    apply_training_precision(model, precision)
    return model.eval()


def _quantized_linears(model):
    return [site for site in linear_sites(model) if site.role != "lm_head"]


def test_rtn_replaces_the_weight_quantizer_and_keeps_the_activation_quantizer(token_files):
    as_trained = _as_trained(W4A4)
    quantize_model(as_trained, RTN("int8:channel"))
    # Reference: the latent weights RTN-quantized, then only the run's activation quantizer applied.
    reference = build_model(SHAPE, seed=0).eval()
    for site in _quantized_linears(reference):
        site.module.weight.data = quantize(site.module.weight.data, "int8:channel")
    apply_training_precision(reference, {"activations": W4A4["activations"]})
    val = load_tokens(token_files["val"])
    assert _loss(as_trained, val) == _loss(reference, val)
    assert _loss(as_trained, val) != _loss(_as_trained(W4A4), val)


def test_w8a8_quantizes_the_inputs_after_the_runs_quantizer(token_files):
    as_trained = _as_trained(W4A4)
    quantize_model(as_trained, W8A8("int8:channel"))
    reference = build_model(SHAPE, seed=0).eval()
    for site in _quantized_linears(reference):
        site.module.weight.data = quantize(site.module.weight.data, "int8:channel")
        site.module.register_forward_pre_hook(
            lambda module, args: quantize(quantize(args[0], "int4:g16"), "int8:token")
        )
    val = load_tokens(token_files["val"])
    assert _loss(as_trained, val) == _loss(reference, val)


def test_gptq_hessians_see_the_quantized_activations(token_files):
    calibration = sample_calibration(load_tokens(token_files["train"]), 4, SHAPE.seq_len, seed=0)
    as_trained = _as_trained(W4A4)
    q_proj = decoder_blocks(as_trained)[0].self_attn.q_proj
    latent = q_proj.weight.detach().clone()
    accumulator = HessianAccumulator(q_proj.in_features)
    hook = q_proj.register_forward_hook(lambda module, args, out: accumulator.add(quantize(args[0], "int4:g16")))
    with torch.no_grad():
        for batch in calibration.split(8):
            as_trained(input_ids=batch)
    hook.remove()
    expected, _ = gptq_quantize_weight(latent, accumulator.hessian, "int4:g16")
    quantize_model(as_trained, GPTQ("int4:g16"), calibration)
    assert torch.equal(q_proj.weight, expected)
    plain = build_model(SHAPE, seed=0)
    quantize_model(plain, GPTQ("int4:g16"), calibration)
    assert not torch.equal(decoder_blocks(plain)[0].self_attn.q_proj.weight, expected)


def test_awq_scales_only_where_no_training_quantizer_is_crossed(token_files):
    calibration = sample_calibration(load_tokens(token_files["train"]), 4, SHAPE.seq_len, seed=0)
    weights_only = _as_trained({"weights": "int4:g16"})
    metadata = quantize_model(weights_only, AWQ("int4:g16"), calibration)
    assert "awq_unscaled" not in metadata and len(metadata["awq_alphas"]) == 14
    assert all(type(site.module) is torch.nn.Linear for site in linear_sites(weights_only))  # nothing left to fake

    kv = _as_trained({"kv": "int4:token"})
    metadata = quantize_model(kv, AWQ("int4:g16"), calibration)
    # v_proj's KV quantizer would see v/s: o_proj stays unscaled, every other fold is made.
    assert metadata["awq_unscaled"] == [f"model.layers.{i}.self_attn.o_proj" for i in range(2)]
    assert len(metadata["awq_alphas"]) == 12
    assert isinstance(decoder_blocks(kv)[0].self_attn.v_proj, QuantizedTrainingLinear)

    with pytest.raises(ValueError, match=r"awq on this model: every scale .* use rtn or gptq"):
        quantize_model(_as_trained(W4A4), AWQ("int4:g16"), calibration)


@pytest.mark.parametrize("method, spec", [("rtn", "int8:channel"), ("w8a8", "int8:channel")])
def test_quantized_checkpoint_of_a_qat_run_reloads_as_post_quantized(tmp_path, token_files, method, spec):
    source = save_checkpoint(
        _as_trained(W4A4), tmp_path / "source", {"run_id": "tiny", "spec": _spec(training_precision=W4A4).to_dict()}
    )
    assert main(["quantize", str(source), "--method", method, "--spec", spec, "--out", str(tmp_path / "out")]) == 0
    in_memory, _ = load_as_trained(source)
    quantize_model(in_memory, quantization_config(method, spec))
    reloaded, _ = load_quantized_model(tmp_path / "out")
    val = load_tokens(token_files["val"])
    # Reloaded, the PTQ'd weights get no second (training-time int4) quantization; the activations still do.
    assert _loss(reloaded, val) == _loss(in_memory, val)
    assert decoder_blocks(reloaded)[0].self_attn.q_proj.precision.weights is None


def test_autocast_runs_load_unquantized(tmp_path):
    metadata = {"run_id": "tiny", "spec": _spec(autocast="bf16").to_dict()}
    path = save_checkpoint(build_model(SHAPE, seed=0), tmp_path / "ckpt", metadata)
    model, _ = load_as_trained(path)
    assert all(type(m) is torch.nn.Linear for m in model.modules() if isinstance(m, torch.nn.Linear))


def test_eval_forward_equals_the_training_forward_bit_for_bit():
    model = _as_trained({**W4A4, "kv": "int4:token"})
    attention = decoder_blocks(model)[0].self_attn
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        evaluated = attention.k_proj(x)
    trained = attention.k_proj(x)
    assert trained.requires_grad and torch.equal(evaluated, trained)
    expected = quantize(F.linear(quantize(x, "int4:g16"), quantize(attention.k_proj.weight, "int4:g16")), "int4:token")
    assert torch.equal(evaluated, expected)
