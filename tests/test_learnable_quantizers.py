"""Learned fake-quantizers for QAT (LSQ, LWC, LAC; Chen et al. 2025 Fig. 14): the precision field, their
gradients against hand-worked and autograd references, training through the spine, checkpoints, resumes and PTQ."""

import math

import pytest
import torch
import torch.nn.functional as F

import qscaling.train as train_module
from qscaling.checkpoint import save_checkpoint
from qscaling.cli import main
from qscaling.model import ModelShape, build_model
from qscaling.quant import choose_qparams, quantize
from qscaling.quant.as_trained import load_as_trained, load_quantized_model
from qscaling.quant.learnable import learned_fake_quantize
from qscaling.quant.precision import canonical_training_precision, training_precision_label
from qscaling.quant.ptq import RTN, quantize_model
from qscaling.quant.qat import (
    apply_training_precision,
    drop_weight_quantizers,
)
from qscaling.quant.roles import decoder_blocks
from qscaling.train import RunSpec, make_optimizer, milestone_name, train

SHAPE = ModelShape(d_model=32, n_layers=2, n_heads=2, d_ff=64, vocab_size=64, seq_len=32)
W4A4 = {"weights": "int4:g16", "activations": "int4:g16"}
LSQ_LAC = {**W4A4, "quantizer": {"weights": "lsq", "activations": "lac"}}
BRANCH_TOKENS, TRUNK_TOKENS = 10_240, 12_800  # 40 and 50 steps of 8 × 32 tokens


def _spec(**overrides) -> RunSpec:
    fields = dict(size="Ntiny", shape=SHAPE, data="markov", batch_size=8, warmup_tokens=1024, total_tokens=12_800)
    return RunSpec(**{**fields, **overrides})


def _as_trained(precision):
    model = build_model(SHAPE, seed=0)
    apply_training_precision(model, precision)
    return model


def _quantizer_parameters(model) -> dict:
    return {name: p.detach().clone() for name, p in model.named_parameters() if name.endswith(("_step", "_clip_logit"))}


def _logits(model, batch):
    with torch.no_grad():
        return model(input_ids=batch).logits


# --- the precision field ---


@pytest.mark.parametrize(
    "precision, message",
    [
        ({**W4A4, "quantizer": {"weights": "pact"}}, r"quantizer.weights: got 'pact', valid: absmax, lsq, lwc"),
        ({**W4A4, "quantizer": {"activations": "lsq"}}, r"quantizer.activations: got 'lsq', valid: absmax, lac"),
        ({**W4A4, "quantizer": {"kv": "lsq"}}, r"quantizer: unknown field\(s\) \['kv'\], valid: weights, activations"),
        ({**W4A4, "quantizer": "lsq"}, r"training_precision.quantizer: expected a mapping"),
        ({"activations": "int4:g16", "quantizer": {"weights": "lsq"}}, r"quantizer.weights: 'lsq' .*weights is 'null'"),
        ({"weights": "fp:e2m1:b32", "quantizer": {"weights": "lwc"}}, r"training_precision.weights is 'fp:e2m1:b32'"),
        ({"activations": "int4:g16:asym", "quantizer": {"activations": "lac"}}, r"activations is 'int4:g16:asym'"),
        (
            {**W4A4, "overrides": {"fc2": {"weights": "fp:e4m3:b32"}}, "quantizer": {"weights": "lsq"}},
            r"overrides.fc2.weights is 'fp:e4m3:b32'",
        ),
        (
            {**W4A4, "backward_weight": "int8:channel", "quantizer": {"weights": "lsq"}},
            r"'lsq' does not combine with backward_weight",
        ),
    ],
)
def test_bad_quantizers_are_named(precision, message):
    with pytest.raises((ValueError, TypeError), match=message):
        canonical_training_precision(precision)


def test_absmax_quantizers_keep_the_canonical_precision_and_run_id():
    # Ids computed by the code before `quantizer` existed: reference outputs are filed under them.
    overridden = {**W4A4, "overrides": {"fc2": {"activations": "int8:g16"}}}
    assert RunSpec(size="Ntiny", shape=SHAPE, data="markov", training_precision=overridden).run_id == "Ntiny-31fffb9a65"
    for spelled in ({}, {"weights": "absmax"}, {"weights": "absmax", "activations": "absmax"}, None):
        precision = {**overridden, "quantizer": spelled}
        assert canonical_training_precision(precision) == canonical_training_precision(overridden)
        assert "quantizer" not in canonical_training_precision(precision)
        assert RunSpec(size="Ntiny", shape=SHAPE, data="markov", training_precision=precision).run_id == (
            "Ntiny-31fffb9a65"
        )
    learned = canonical_training_precision({**W4A4, "quantizer": {"weights": "lwc"}})
    assert learned["quantizer"] == {"activations": "absmax", "weights": "lwc"}
    assert canonical_training_precision(learned) == learned
    assert _spec(training_precision=learned).run_id != _spec(training_precision=W4A4).run_id


@pytest.mark.parametrize(
    "quantizer, label",
    [
        ({"weights": "lsq"}, "W int4:g16 · A int4:g16 · W lsq"),
        ({"weights": "lwc", "activations": "lac"}, "W int4:g16 · A int4:g16 · W lwc · A lac"),
        ({"weights": "absmax"}, "W int4:g16 · A int4:g16"),
    ],
)
def test_learned_quantizers_are_labelled(quantizer, label):
    assert training_precision_label({**W4A4, "quantizer": quantizer}) == label


# --- the quantizers and their gradients ---


def test_lsq_gradients_equal_the_hand_worked_lsq_estimator():
    # int4: codes -8..7, so Qp = 7. Row 0, s = 0.25: x/s = 2.5 (rounds to even 2: residual -0.5), -12 (clamped:
    # -8), 5 (residual 0), 8 (past Qp: 7). Row 1, s = 0.5: 1.5 (→ 2: +0.5), -9 (-8), 7 (exactly Qp, inside: 0),
    # -0.5 (→ -0: +0.5). LSQ eq. 3 summed against the upstream gradient, times g = 1/sqrt(4 weights per step · 7).
    w = torch.tensor([[0.625, -3.0, 1.25, 2.0], [0.75, -4.5, 3.5, -0.25]], requires_grad=True)
    step = torch.tensor([[0.25], [0.5]], requires_grad=True)
    q = learned_fake_quantize(w, "lsq", step, "int4:channel")
    assert q.tolist() == [[0.5, -2.0, 1.25, 1.75], [1.0, -4.0, 3.5, 0.0]]
    q.backward(torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0]]))
    assert w.grad.tolist() == [[1.0, 0.0, 3.0, 0.0], [1.0, 0.0, 1.0, 1.0]]
    torch.testing.assert_close(step.grad, torch.tensor([[11.5], [-7.0]]) / math.sqrt(28), rtol=1e-6, atol=0)


def _round_ste(v):
    return v + (torch.round(v) - v).detach()


def test_lsq_and_lwc_gradients_equal_autograd_through_a_round_ste_reference():
    # q = s·round_ste(clamp(x/s, -8, 7)); LSQ's step enters through its gradient scale (LSQ's `grad_scale`).
    torch.manual_seed(0)
    w = torch.randn(6, 32, requires_grad=True)
    upstream = torch.randn(6, 32)
    absmax_scale = choose_qparams(w, "int4:g16").scale.unsqueeze(-1)  # [6, 2, 1]
    step = (absmax_scale.squeeze(-1) * torch.linspace(0.5, 1.5, 12).reshape(6, 2)).requires_grad_()
    logit = torch.linspace(-1.0, 3.0, 12).reshape(6, 2).requires_grad_()
    g = 1 / math.sqrt(16 * 7)
    references = {
        "lsq": lambda: ((step - step * g).detach() + step * g).unsqueeze(-1),
        "lwc": lambda: absmax_scale * torch.sigmoid(logit).unsqueeze(-1),
    }
    for quantizer, parameter in (("lsq", step), ("lwc", logit)):
        ours = torch.autograd.grad(learned_fake_quantize(w, quantizer, parameter, "int4:g16"), [w, parameter], upstream)
        s = references[quantizer]()
        reference = s * _round_ste(torch.clamp(w.reshape(6, 2, 16) / s, -8, 7))
        expected = torch.autograd.grad(reference.reshape(6, 32), [w, parameter], upstream)
        assert torch.equal(ours[0] == 0, expected[0] == 0), quantizer  # the clipped STE's mask
        torch.testing.assert_close(ours[0], expected[0], rtol=1e-6, atol=0)  # the reference's s·(1/s) may be 1 - ulp
        torch.testing.assert_close(ours[1], expected[1], rtol=1e-5, atol=1e-7)
        assert ours[1].abs().min() > 0, quantizer  # every group's parameter is trained


def test_lac_gradients_equal_autograd_through_pact():
    # PACT: clip x to [-Qn·s, Qp·s] (gradient to s from the clipped elements only), round straight through.
    torch.manual_seed(1)
    x = torch.randn(2, 5, 24, requires_grad=True)
    logit = torch.tensor(1.5, requires_grad=True)
    upstream = torch.randn(2, 5, 24)
    ours = torch.autograd.grad(learned_fake_quantize(x, "lac", logit, "int4:token"), [x, logit], upstream)
    s = choose_qparams(x, "int4:token").scale * torch.sigmoid(logit)
    clipped = torch.minimum(torch.maximum(x, -8 * s), 7 * s)
    pact = clipped + (s * torch.round(clipped / s) - clipped).detach()
    expected = torch.autograd.grad(pact, [x, logit], upstream)
    assert torch.equal(ours[0], expected[0])
    assert 0 < (ours[0] == 0).float().mean() < 0.5  # σ(1.5) ≈ 0.82 clips the largest elements of each token
    torch.testing.assert_close(ours[1], expected[1], rtol=1e-5, atol=0)


@pytest.mark.parametrize(
    "spec", ["int4:g16", "int4:channel", "int3:g8:gptq", "int8:tensor:mulinv", "int4:g16:stochastic"]
)
def test_saturated_clipping_logits_are_absmax_fake_quant(spec):
    # sigmoid(30) is 1.0 in float32, so LWC and LAC multiply the absmax scale by exactly 1.
    torch.manual_seed(2)
    w, x = torch.randn(12, 40), torch.randn(3, 7, 40)
    weight_logit = torch.full_like(choose_qparams(w, spec).scale, 30.0)
    assert torch.equal(learned_fake_quantize(w, "lwc", weight_logit, spec), quantize(w, spec))
    assert torch.equal(learned_fake_quantize(x, "lac", torch.tensor(30.0), spec), quantize(x, spec))


def test_lsq_starts_as_absmax_and_learned_models_evaluate_as_they_train():
    batch = torch.randint(0, 64, (2, 16))
    lsq = _as_trained({**W4A4, "quantizer": {"weights": "lsq"}})
    assert torch.equal(_logits(lsq, batch), _logits(_as_trained(W4A4), batch))  # initial step = absmax scale
    for quantizer in ({"weights": "lsq"}, {"weights": "lwc", "activations": "lac"}):
        model = _as_trained({**W4A4, "kv": "int4:token", "quantizer": quantizer})
        trained = model(input_ids=batch).logits
        assert trained.requires_grad and torch.equal(trained, _logits(model, batch))


def test_parameters_sit_on_their_linears_outside_weight_decay():
    model = _as_trained({**W4A4, "exclude": ["fc2", "lm_head"], "quantizer": {"weights": "lwc", "activations": "lac"}})
    block = decoder_blocks(model)[0]
    assert block.self_attn.q_proj.weight_clip_logit.shape == (32, 2)  # one per row and group of 16
    assert block.mlp.up_proj.input_clip_logit.shape == ()
    assert not hasattr(block.mlp.down_proj, "input_clip_logit")  # fc2 excluded
    assert (block.self_attn.q_proj.weight_clip_logit == 4.0).all()
    optimizer = make_optimizer(model, _spec())
    decayed = {id(p) for group in optimizer.param_groups if group["weight_decay"] > 0 for p in group["params"]}
    learned = [p for name, p in model.named_parameters() if name.endswith("_clip_logit")]
    assert len(learned) == 2 * 6 * 2 and not decayed & {id(p) for p in learned}
    assert id(block.self_attn.q_proj.weight) in decayed


def test_dropping_a_learned_weight_quantizer_removes_its_parameter():
    model = _as_trained(LSQ_LAC)
    q_proj = decoder_blocks(model)[0].self_attn.q_proj
    drop_weight_quantizers(model, ["model.layers.0.self_attn.q_proj"])
    assert not hasattr(q_proj, "weight_step") and "weight_step" not in dict(q_proj.named_parameters())
    assert q_proj.precision.weight_quantizer == "absmax" and q_proj.precision.weights is None
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        expected = F.linear(learned_fake_quantize(x, "lac", q_proj.input_clip_logit, "int4:g16"), q_proj.weight)
        assert torch.equal(q_proj(x), expected)  # the latent weight, behind the learned activation quantizer


# --- through the spine: training, checkpoints, a cooldown branch, PTQ ---


@pytest.fixture(scope="module")
def lsq_lac_trunk(tmp_path_factory, token_files):
    """A WSD trunk trained with LSQ weights and LAC activations; each checkpoint's logits and learned parameters
    as the in-memory model had them just before it was saved."""
    run_dir = tmp_path_factory.mktemp("lsq_lac")
    batch = torch.randint(0, 64, (2, 32), generator=torch.Generator().manual_seed(0))
    saved = {}

    def record_then_save(model, path, metadata):
        saved[metadata["milestone_tokens"]] = (_logits(model, batch), _quantizer_parameters(model))
        return save_checkpoint(model, path, metadata)

    spec = _spec(schedule="wsd", training_precision=LSQ_LAC)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(train_module, "save_checkpoint", record_then_save)
        summary = train(
            spec,
            run_dir,
            token_files["train"],
            milestones=[BRANCH_TOKENS, TRUNK_TOKENS],
            branch_points=[BRANCH_TOKENS],
            progress=False,
        )
    return spec, run_dir, summary, batch, saved


def test_learned_quantizers_train_and_their_parameters_move(lsq_lac_trunk):
    _, _, summary, _, saved = lsq_lac_trunk
    curve = [loss for _, loss in summary["train_loss_curve"]]
    assert curve[-1] < curve[0] - 0.5  # ln 64 = 4.16 at the start
    initial = _quantizer_parameters(_as_trained(LSQ_LAC))
    trained = saved[TRUNK_TOKENS][1]
    assert trained.keys() == initial.keys() and len(initial) == 2 * 7 * 2  # a step and a logit per Linear
    assert all(not torch.equal(trained[name], initial[name]) for name in initial)


def test_checkpoints_reload_their_learned_parameters_bit_identically(lsq_lac_trunk, tmp_path):
    spec, run_dir, _, batch, saved = lsq_lac_trunk
    checkpoint = run_dir / "checkpoints" / milestone_name(TRUNK_TOKENS)
    model, _ = load_as_trained(checkpoint)
    logits, parameters = saved[TRUNK_TOKENS]
    assert torch.equal(_logits(model, batch), logits)
    reloaded = _quantizer_parameters(model)
    assert all(torch.equal(reloaded[name], parameters[name]) for name in parameters)

    # A checkpoint without the learned parameters its precision needs (here: a plain model's) is refused.
    plain = save_checkpoint(build_model(SHAPE, seed=0), tmp_path / "plain", {"spec": spec.to_dict()})
    with pytest.raises(ValueError, match=r"checkpoint .*plain: model.safetensors has no 'model.layers.0.self_attn"):
        load_as_trained(plain)


def test_a_cooldown_branch_resumes_the_learned_parameters(lsq_lac_trunk, token_files, tmp_path):
    trunk, run_dir, _, _, saved = lsq_lac_trunk
    state = torch.load(run_dir / "branches" / f"{milestone_name(BRANCH_TOKENS)}.pt", weights_only=True)
    at_branch_point = saved[BRANCH_TOKENS][1]
    assert all(torch.equal(state["model"][name], value) for name, value in at_branch_point.items())
    branch = _spec(
        schedule="wsd", training_precision=LSQ_LAC, cooldown={"trunk": trunk.run_id, "start_tokens": BRANCH_TOKENS}
    )
    train(
        branch, tmp_path / "branch", token_files["train"], milestones=[TRUNK_TOKENS], trunk_dir=run_dir, progress=False
    )
    cooled, _ = load_as_trained(tmp_path / "branch" / "checkpoints" / milestone_name(TRUNK_TOKENS))
    cooled = _quantizer_parameters(cooled)
    # 10 cooldown steps from the trunk's values: near them (not re-initialised), yet moved.
    initial = _quantizer_parameters(_as_trained(LSQ_LAC))
    name = "model.layers.0.self_attn.q_proj.weight_step"
    assert (cooled[name] - at_branch_point[name]).abs().max() < (cooled[name] - initial[name]).abs().max()
    assert all(not torch.equal(cooled[n], at_branch_point[n]) for n in at_branch_point)


def test_ptq_of_a_learned_quantizer_checkpoint_keeps_only_the_activation_quantizer(lsq_lac_trunk, tmp_path):
    _, run_dir, _, batch, saved = lsq_lac_trunk
    source = run_dir / "checkpoints" / milestone_name(TRUNK_TOKENS)
    out = tmp_path / "rtn"
    assert main(["quantize", str(source), "--method", "rtn", "--spec", "int8:channel", "--out", str(out)]) == 0
    in_memory, _ = load_as_trained(source)
    quantize_model(in_memory, RTN("int8:channel"))
    reloaded, _ = load_quantized_model(out)
    assert torch.equal(_logits(reloaded, batch), _logits(in_memory, batch))
    parameters = _quantizer_parameters(reloaded)
    assert parameters and all(name.endswith("input_clip_logit") for name in parameters)
    trained = saved[TRUNK_TOKENS][1]
    assert all(torch.equal(value, trained[name]) for name, value in parameters.items())
