"""Checkpoints in HF format: `model.safetensors` + `config.json` + `qscaling.json` (our metadata).

`qscaling.json` records tokens seen, step, loss, seed, the run spec and the sha256 of the weights file, so a
corrupted or swapped weights file is caught on load. Writes go to a temporary directory renamed into place.

This module stores and loads models as they are; `qscaling.quant.as_trained` loads a checkpoint as its run trained
(its training-time fake quantizers re-applied) and as post-quantized.
"""

import json
import os
from pathlib import Path

from qscaling.atomic import atomic_path, write_json
from qscaling.data.fetch import sha256_file

METADATA_FILE = "qscaling.json"
WEIGHTS_FILE = "model.safetensors"


def save_checkpoint(model, path: str | os.PathLike, metadata: dict) -> Path:
    # Here, not at the top: building the DAG imports this module (plan -> hub) and must not pay for transformers.
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


def load_checkpoint(path: str | os.PathLike, *, dtype=None):
    """(model, metadata) from an HF-format directory; any damage is a ValueError naming the checkpoint and file.

    The model is the plain one on its stored (for a quantization-aware run: latent) weights;
    `qscaling.quant.as_trained.load_as_trained` gives it as it trained.
    """
    # Here, not at the top: building the DAG imports this module (plan -> hub) and must not pay for transformers.
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    path = Path(path)
    if path.is_file():
        raise ValueError(f"checkpoint {path}: a file; a checkpoint is its folder ({path.parent})")
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
    model.eval()
    return model, metadata
