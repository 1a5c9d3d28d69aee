"""`qscaling quantize`: a checkpoint in, the same format out, reloadable and evaluating like the in-memory
quantized model."""

import json

import numpy as np
import pytest
from transformers import AutoModelForCausalLM

from qscaling.checkpoint import save_checkpoint
from qscaling.cli import main
from qscaling.data.fetch import sha256_file
from qscaling.evaluate import evaluate_loss
from qscaling.model import ModelShape, build_model
from qscaling.quant.as_trained import load_as_trained, load_quantized_model
from qscaling.quant.ptq import W8A8, quantization_config, quantize_model, sample_calibration

SHAPE = ModelShape(d_model=32, n_layers=2, n_heads=2, d_ff=64, vocab_size=64, seq_len=32)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("quantize_cli")
    tokens = np.random.default_rng(0).integers(0, 64, size=8_000).astype(np.uint16)
    tokens.tofile(root / "tokens.bin")
    save_checkpoint(build_model(SHAPE, seed=0), root / "source", {"run_id": "tiny", "tokens_seen": 0})
    return root


def _loss(model, source):
    tokens = np.fromfile(source / "tokens.bin", dtype=np.uint16)
    return evaluate_loss(model, tokens, seq_len=32, batch_size=8, max_tokens=2048)["loss"]


def _quantize(source, out, *extra):
    return main(["quantize", str(source / "source"), "--out", str(out), *extra])


@pytest.mark.parametrize("method", ["gptq", "awq", "rtn"])
def test_saved_checkpoint_reloads_with_the_in_memory_loss(source, method, tmp_path):
    out = tmp_path / "quantized"
    calib = [
        "--calib",
        str(source / "tokens.bin"),
        "--calib-sequences",
        "4",
        "--calib-seq-len",
        "32",
        "--calib-seed",
        "3",
    ]
    assert _quantize(source, out, "--method", method, "--spec", "int4:g16", *calib) == 0

    in_memory, _ = load_as_trained(source / "source")
    tokens = np.fromfile(source / "tokens.bin", dtype=np.uint16)
    quantize_model(in_memory, quantization_config(method, "int4:g16"), sample_calibration(tokens, 4, 32, seed=3))
    reloaded = AutoModelForCausalLM.from_pretrained(out)
    assert _loss(reloaded, source) == _loss(in_memory, source)
    original, _ = load_as_trained(source / "source")
    assert _loss(reloaded, source) != _loss(original, source)

    metadata = json.loads((out / "qscaling.json").read_text())
    quantization = metadata["quantization"]
    assert metadata["run_id"] == "tiny"  # the source's metadata is kept
    assert (quantization["method"], quantization["spec"]) == (method, "int4:g16")
    source_hashes = quantization["source"]["sha256"]
    assert source_hashes["model.safetensors"] == sha256_file(source / "source" / "model.safetensors")
    assert metadata["weights_sha256"] == sha256_file(out / "model.safetensors") != source_hashes["model.safetensors"]
    if method != "rtn":
        assert quantization["calibration"]["seed"] == 3 and quantization["calibration"]["sequences"] == 4
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_w8a8_checkpoint_reloads_with_its_activation_quantization(source, tmp_path):
    out = tmp_path / "w8a8"
    assert _quantize(source, out, "--method", "w8a8", "--spec", "int8:channel", "--outlier-threshold", "6") == 0
    in_memory, _ = load_as_trained(source / "source")
    quantize_model(in_memory, W8A8("int8:channel", outlier_threshold=6.0))
    reloaded, metadata = load_quantized_model(out)
    assert metadata["quantization"]["w8a8"] == {"activation_spec": "int8:token", "outlier_threshold": 6.0}
    assert _loss(reloaded, source) == _loss(in_memory, source)


def test_failures_leave_nothing_behind(source, tmp_path, capsys):
    out = tmp_path / "never"
    assert _quantize(source, out, "--method", "gptq", "--spec", "int4:g16") == 2
    assert "--calib: method 'gptq' needs a calibration token file" in capsys.readouterr().err
    assert _quantize(source, out, "--method", "rtn", "--spec", "int9:g16") == 2
    assert "quant spec 'int9:g16': bits must be 2..8" in capsys.readouterr().err
    assert _quantize(source, out, "--method", "rtn", "--spec", "int4:g16", "--roles", "qkv,mlp") == 2
    assert "roles: got ['mlp']" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_load_quantized_model_rejects_an_unquantized_checkpoint(source):
    with pytest.raises(ValueError, match="no 'quantization' entry"):
        load_quantized_model(source / "source")
