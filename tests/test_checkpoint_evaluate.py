"""Model size accounting, checkpoint integrity, and the evaluation loss against transformers' own loss."""

import json

import numpy as np
import pytest
import torch

from qscaling.checkpoint import load_checkpoint, save_checkpoint
from qscaling.data import load_tokens
from qscaling.evaluate import evaluate_checkpoint, evaluate_loss, held_out_windows
from qscaling.model import ModelShape, build_model, count_non_embedding_params
from qscaling.quant.as_trained import load_as_trained


@pytest.mark.parametrize("d_model, n_layers, n_heads, d_ff", [(16, 1, 2, 48), (64, 2, 4, 172), (80, 3, 4, 170)])
def test_non_embedding_count_matches_the_live_model(d_model, n_layers, n_heads, d_ff):
    shape = ModelShape(d_model, n_layers, n_heads, d_ff, vocab_size=300, seq_len=32)
    model = build_model(shape)
    assert count_non_embedding_params(model) == shape.non_embedding_params
    embedding = model.model.embed_tokens.weight.numel() + model.lm_head.weight.numel()
    assert sum(p.numel() for p in model.parameters()) == shape.non_embedding_params + embedding


def test_same_seed_same_init():
    shape = ModelShape(16, 1, 2, 48, vocab_size=64, seq_len=16)
    a, b, c = build_model(shape, seed=3), build_model(shape, seed=3), build_model(shape, seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(a.lm_head.weight, c.lm_head.weight)


@pytest.fixture
def saved_checkpoint(tmp_path):
    model = build_model(ModelShape(16, 1, 2, 48, vocab_size=64, seq_len=32), seed=0)
    return save_checkpoint(model, tmp_path / "ckpt", {"run_id": "Ntest-0", "tokens_seen": 123, "spec": {}}), model


def test_checkpoint_round_trip(saved_checkpoint):
    path, model = saved_checkpoint
    loaded, metadata = load_checkpoint(path)
    assert metadata["tokens_seen"] == 123 and len(metadata["weights_sha256"]) == 64
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name


def test_corrupted_weights_fail_with_the_file_named(saved_checkpoint):
    path, _ = saved_checkpoint
    weights = path / "model.safetensors"
    payload = bytearray(weights.read_bytes())
    payload[-5] ^= 0xFF
    weights.write_bytes(bytes(payload))
    with pytest.raises(ValueError, match=r"checkpoint .*ckpt: model.safetensors does not match the sha256"):
        load_checkpoint(path)


def test_truncated_weights_without_metadata_fail_clearly(saved_checkpoint):
    path, _ = saved_checkpoint
    (path / "qscaling.json").unlink()
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"checkpoint .*ckpt: cannot be loaded"):
        load_checkpoint(path)


def test_missing_checkpoint_parts(tmp_path, saved_checkpoint):
    path, _ = saved_checkpoint
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_checkpoint(tmp_path / "nowhere")
    (path / "config.json").unlink()
    with pytest.raises(ValueError, match="config.json is missing"):
        load_checkpoint(path)


def test_evaluation_loss_equals_transformers_loss(token_files):
    model = build_model(ModelShape(16, 1, 2, 48, vocab_size=64, seq_len=32), seed=1).eval()
    tokens = load_tokens(token_files["val"])
    result = evaluate_loss(model, tokens, seq_len=32, batch_size=5, max_tokens=33 * 20)
    # 20 windows evenly spaced over the whole shard, from its first window to its last.
    every_window = torch.from_numpy(tokens[: tokens.size // 33 * 33].astype("int64")).view(-1, 33)
    windows = every_window[np.linspace(0, len(every_window) - 1, 20).round().astype(int)]
    with torch.no_grad():
        expected = torch.stack([model(input_ids=w[None], labels=w[None]).loss for w in windows]).mean()
    assert result["tokens"] == 20 * 32
    assert result["loss"] == pytest.approx(float(expected), abs=1e-6)


def test_a_token_budget_spreads_its_windows_over_the_whole_held_out_set():
    tokens = np.arange(10_000) % 60_000
    windows = held_out_windows(tokens, 10, max_tokens=50)
    assert windows[:, 0].tolist() == [0, 2500, 5000, 7490, 9990]
    assert (np.diff(windows, axis=1) == 1).all()
    assert held_out_windows(tokens, 10, max_tokens=None).shape == (1000, 10)
    assert held_out_windows(tokens, 10, max_tokens=10**9).shape == (1000, 10)
    with pytest.raises(ValueError, match="fewer than one window"):
        held_out_windows(tokens, 10, max_tokens=9)


def test_evaluate_checkpoint_row(saved_checkpoint, token_files):
    path, _ = saved_checkpoint
    row = evaluate_checkpoint(path, load_tokens(token_files["val"]), split="val", max_tokens=2000)
    assert row["run"] == "Ntest-0" and row["D"] == 123 and row["N"] == 16 * 16 * 4 + 3 * 16 * 48 + 2 * 16 + 16
    assert row["eval_tokens"] == (2000 // 33) * 32


def _qat_checkpoint(tmp_path, precision):
    from qscaling.quant.qat import apply_training_precision

    model = build_model(ModelShape(16, 1, 2, 48, vocab_size=64, seq_len=32), seed=0)
    apply_training_precision(model, precision)
    metadata = {"run_id": "Ntest-qat", "tokens_seen": 123, "spec": {"size": "Ntest", "training_precision": precision}}
    return save_checkpoint(model, tmp_path / "qat", metadata)


def test_qat_checkpoint_loads_as_trained_or_on_its_latent_weights(tmp_path):
    from qscaling.quant.qat import QuantizedTrainingLinear

    path = _qat_checkpoint(tmp_path, {"weights": "int4:g16", "activations": "int4:g16"})
    as_trained, _ = load_as_trained(path)
    q_proj = as_trained.model.layers[0].self_attn.q_proj
    assert isinstance(q_proj, QuantizedTrainingLinear) and str(q_proj.precision.weights) == "int4:g16"
    raw, _ = load_checkpoint(path)
    assert type(raw.model.layers[0].self_attn.q_proj) is torch.nn.Linear
    assert torch.equal(raw.model.layers[0].self_attn.q_proj.weight, q_proj.weight)  # the same latent weights


def test_a_bad_stored_training_precision_names_the_checkpoint(tmp_path):
    path = _qat_checkpoint(tmp_path, {"weights": "int4:g16"})
    metadata = json.loads((path / "qscaling.json").read_text())
    metadata["spec"]["training_precision"]["weights"] = "int9:g16"
    (path / "qscaling.json").write_text(json.dumps(metadata))
    with pytest.raises(
        ValueError, match=r"checkpoint .*qat: qscaling.json spec.training_precision.weights: quant spec"
    ):
        load_as_trained(path)


def test_evaluate_checkpoint_row_names_the_training_precision(tmp_path, token_files):
    path = _qat_checkpoint(tmp_path, {"weights": "int4:g16", "activations": "int4:g16"})
    row = evaluate_checkpoint(path, load_tokens(token_files["val"]), split="val", max_tokens=2000)
    assert row["training_precision"] == "W int4:g16 · A int4:g16"


def test_learned_quantizer_parameters_are_not_counted_in_n():
    from qscaling.quant.qat import apply_training_precision

    shape = ModelShape(d_model=32, n_layers=2, n_heads=2, d_ff=64, vocab_size=64, seq_len=16)
    model = build_model(shape)
    precision = {"weights": "int4:g8", "activations": "int4:g8", "quantizer": {"weights": "lsq", "activations": "lac"}}
    apply_training_precision(model, precision)
    assert sum(p.numel() for p in model.parameters()) > sum(p.numel() for p in build_model(shape).parameters())
    assert count_non_embedding_params(model) == shape.non_embedding_params
