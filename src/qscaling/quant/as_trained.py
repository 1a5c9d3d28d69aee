"""Checkpoints loaded as they compute: with the run's training-time fake quantizers, and after `qscaling quantize`
with the run-time side of its post-training quantization.

A run that trained with a `training_precision` (fake-quantized Linears, `qscaling.quant.qat`) saves its latent
weights and its learned quantizers' parameters like any other weights (`qscaling.checkpoint`); loading it as trained
re-applies the run's fake quantizers and restores those parameters, so a checkpoint is scored as it trained.
"""

import os
from pathlib import Path

import torch
from safetensors import safe_open

from qscaling.checkpoint import METADATA_FILE, WEIGHTS_FILE, load_checkpoint
from qscaling.quant.precision import is_quantizer_parameter
from qscaling.quant.ptq import QUANTIZATION_KEY, quantize_inputs
from qscaling.quant.qat import apply_training_precision, drop_weight_quantizers
from qscaling.quant.roles import linear_sites


def load_as_trained(path: str | os.PathLike, *, dtype=None):
    """(model, metadata) of a checkpoint, the model computing what it trained as (`apply_run_precision`); any damage
    is a ValueError naming the checkpoint and file. `load_checkpoint` gives the plain model on its latent weights."""
    model, metadata = load_checkpoint(path, dtype=dtype)
    apply_run_precision(model, metadata, Path(path))
    return model, metadata


def apply_run_precision(model, metadata: dict, path) -> None:
    """Re-apply the fake quantizers of the run's `training_precision` to a loaded model (in place).

    Linears whose weights `qscaling quantize` has since post-quantized get no training-time weight quantizer: the
    PTQ replaced it. Learned quantizers get their trained parameters back from the weights file. Autocast runs
    computed natively in bf16/fp16 and are left as they are.
    """
    precision = (metadata.get("spec") or {}).get("training_precision")
    if not precision:
        return
    try:
        apply_training_precision(model, precision)
    except (TypeError, ValueError) as error:
        raise ValueError(f"checkpoint {path}: {METADATA_FILE} spec.{error}") from error
    if QUANTIZATION_KEY in metadata:
        post_quantized = metadata[QUANTIZATION_KEY]["roles"]
        drop_weight_quantizers(model, [site.name for site in linear_sites(model) if site.role in post_quantized])
    restore_quantizer_parameters(model, path)


def restore_quantizer_parameters(model, path) -> None:
    """Copy the learned quantizers' steps and clipping logits from the checkpoint's weights file into `model`.

    `from_pretrained` drops them (a plain model has no such keys), and re-applying the precision initialises them
    afresh; this puts the trained values back.
    """
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


def load_quantized_model(path):
    """(model, metadata) of a checkpoint written by `qscaling quantize`, as trained and with W8A8's input
    quantization re-applied; weight-only methods need nothing beyond `load_as_trained`."""
    model, metadata = load_as_trained(path)
    if QUANTIZATION_KEY not in metadata:
        raise ValueError(f"checkpoint {path}: no '{QUANTIZATION_KEY}' entry in its metadata (not quantized)")
    quantization = metadata[QUANTIZATION_KEY]
    if quantization["method"] == "w8a8":
        names = [site.name for site in linear_sites(model) if site.role in quantization["roles"]]
        w8a8 = quantization["w8a8"]
        quantize_inputs(model, names, w8a8["activation_spec"], w8a8["outlier_threshold"])
    return model, metadata
