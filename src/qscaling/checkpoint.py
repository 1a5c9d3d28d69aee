"""Checkpoints in HF format: `model.safetensors` + `config.json` + `qscaling.json` (our metadata).

`qscaling.json` records tokens seen, step, loss, seed, the run spec and the sha256 of the weights file, so a
corrupted or swapped weights file is caught on load. Writes go to a temporary directory renamed into place.

A run that trained with a `training_precision` (fake-quantized Linears, `qscaling.quant.qat`) saves its latent
weights and its learned quantizers' parameters; loading re-applies the run's fake quantizers and restores those
parameters, so a checkpoint is scored as it trained.
"""

import json
import os
from pathlib import Path

from qscaling.atomic import atomic_path, write_json
from qscaling.data.fetch import sha256_file

METADATA_FILE = "qscaling.json"
WEIGHTS_FILE = "model.safetensors"


def save_checkpoint(model, path: str | os.PathLike, metadata: dict) -> Path:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    with atomic_path(path) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        write_json(tmp / METADATA_FILE, {**metadata, "weights_sha256": sha256_file(tmp / WEIGHTS_FILE)})
    return Path(path)


def read_metadata(path: str | os.PathLike) -> dict:
    meta_path = Path(path) / METADATA_FILE
    if not meta_path.is_file():
        return {}
    try:
        return json.loads(meta_path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"checkpoint {path}: {METADATA_FILE} is not valid JSON ({error})") from error


def apply_run_precision(model, metadata: dict, path) -> None:
    """Re-apply the fake quantizers of the run's `training_precision` to a loaded model (in place).

    Linears whose weights `qscaling quantize` has since post-quantized get no training-time weight quantizer: the
    PTQ replaced it. Learned quantizers get their trained parameters back from the weights file. Autocast runs
    computed natively in bf16/fp16 and are left as they are.
    """
    from qscaling.quant.ptq import QUANTIZATION_KEY
    from qscaling.quant.qat import apply_training_precision, drop_weight_quantizers
    from qscaling.quant.roles import linear_sites

    precision = (metadata.get("spec") or {}).get("training_precision")
    if not precision:
        return
    try:
        apply_training_precision(model, precision)
    except (TypeError, ValueError) as error:
        raise ValueError(f"checkpoint {path}: {METADATA_FILE} spec.{error}") from error
    if QUANTIZATION_KEY in metadata:
        post_quantized = metadata[QUANTIZATION_KEY]["roles"]
        drop_weight_quantizers(site.module for site in linear_sites(model) if site.role in post_quantized)
    restore_quantizer_parameters(model, path)


def restore_quantizer_parameters(model, path) -> None:
    """Copy the learned quantizers' steps and clipping logits from the checkpoint's weights file into `model`.

    `from_pretrained` drops them (a plain model has no such keys), and re-applying the precision initialises them
    afresh; this puts the trained values back.
    """
    import torch
    from safetensors import safe_open

    from qscaling.quant.precision import is_quantizer_parameter

    learned = {name: parameter for name, parameter in model.named_parameters() if is_quantizer_parameter(name)}
    if not learned:
        return
    with safe_open(Path(path) / WEIGHTS_FILE, framework="pt") as weights:
        stored = set(weights.keys())
        for name, parameter in learned.items():
            if name not in stored:
                raise ValueError(
                    f"checkpoint {path}: {WEIGHTS_FILE} has no {name!r}, a learned quantizer parameter its "
                    "training precision needs"
                )
            value = weights.get_tensor(name)
            if value.shape != parameter.shape:
                raise ValueError(
                    f"checkpoint {path}: {WEIGHTS_FILE} holds {name!r} with shape {list(value.shape)}, its training "
                    f"precision needs {list(parameter.shape)}"
                )
            with torch.no_grad():
                parameter.copy_(value)


def load_checkpoint(path: str | os.PathLike, *, dtype=None, as_trained: bool = True):
    """(model, metadata) from an HF-format directory; any damage is a ValueError naming the checkpoint and file.

    `as_trained`: re-apply the run's training-time fake quantizers (`apply_run_precision`), so the model computes
    what it trained as; False gives the plain model on its latent weights (for weight statistics).
    """
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    for required in ("config.json", WEIGHTS_FILE):
        if not (path / required).is_file():
            raise ValueError(f"checkpoint {path}: {required} is missing")
    metadata = read_metadata(path)
    expected = metadata.get("weights_sha256")
    if expected and sha256_file(path / WEIGHTS_FILE) != expected:
        raise ValueError(
            f"checkpoint {path}: {WEIGHTS_FILE} does not match the sha256 recorded in {METADATA_FILE} "
            "(corrupted or replaced)"
        )
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    except Exception as error:  # transformers/safetensors raise many types for a damaged file
        raise ValueError(f"checkpoint {path}: cannot be loaded ({type(error).__name__}: {error})") from error
    if as_trained:
        apply_run_precision(model, metadata, path)
    model.eval()
    return model, metadata
