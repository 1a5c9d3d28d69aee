"""Score one checkpoint before and after each post-training quantization, on the same held-out windows.

One job per checkpoint (not per quantization): loading, calibration sampling and the unquantized pass are shared,
and tiny models quantize in a second. Rows are tidy: one per (quantization, split), with the unquantized loss
alongside and `delta_se` from the per-window paired differences.
"""

import copy
import logging
import time

import pandas as pd

from qscaling.evaluate import evaluate_loss, standard_error
from qscaling.model import count_non_embedding_params
from qscaling.quant.as_trained import load_as_trained
from qscaling.quant.gptq import DEFAULT_DAMP
from qscaling.quant.ptq import quantization_config, quantize_model, sample_calibration
from qscaling.quant.spec import parse_spec
from qscaling.studies import with_labels


def checkpoint_columns(model, metadata: dict) -> dict:
    """The columns that say which checkpoint a row scores: run, size, N (non-embedding), D, milestone, and the
    label of the precision the run trained at (`qscaling.quant.precision.training_precision_label`)."""
    from qscaling.quant.precision import run_precision_label

    spec = metadata.get("spec", {})
    return {
        "run": metadata.get("run_id"),
        "size": spec.get("size"),
        "N": count_non_embedding_params(model),
        "D": metadata.get("tokens_seen"),
        "milestone": metadata.get("milestone_tokens"),
        "training_precision": run_precision_label(spec),
    }


def paired_loss(result: dict, base: dict) -> dict:
    """Loss columns of a model scored on the same windows as `base` (both `evaluate_loss` results): δ = loss −
    base loss, with the standard error of the per-window differences."""
    return {
        "loss": result["loss"],
        "loss_se": result["loss_se"],
        "base_loss": base["loss"],
        "delta": result["loss"] - base["loss"],
        "delta_se": standard_error(result["per_window"] - base["per_window"]),
        "eval_tokens": result["tokens"],
    }


def spec_bits(spec: str) -> int:
    parsed = parse_spec(spec)
    return parsed.bits if parsed.kind == "int" else 1 + parsed.exponent_bits + parsed.mantissa_bits


def score_checkpoint(
    checkpoint,
    quantizations,
    held_out: dict,
    calibration_tokens,
    *,
    calibration: dict,
    eval_tokens: int,
    batch_size: int = 16,
    gptq_damp: float = DEFAULT_DAMP,
    device: str = "cpu",
) -> pd.DataFrame:
    """Rows for the unquantized model and every quantization of `checkpoint` on each split in `held_out`."""
    model, metadata = load_as_trained(checkpoint)
    model.to(device)
    seq_len = model.config.max_position_embeddings
    spec = metadata.get("spec", {})
    base_row = {
        **checkpoint_columns(model, metadata),
        "schedule": spec.get("schedule"),
        "cooldown": spec.get("cooldown") is not None,
    }

    def score(candidate, split):
        return evaluate_loss(candidate, held_out[split], seq_len=seq_len, batch_size=batch_size, max_tokens=eval_tokens)

    baseline = {split: score(model, split) for split in held_out}
    rows = [
        {
            **base_row,
            "method": "none",
            "spec": "none",
            "bits": 16,
            "split": split,
            "loss": result["loss"],
            "loss_se": result["loss_se"],
            "base_loss": result["loss"],
            "delta": 0.0,
            "delta_se": 0.0,
            "eval_tokens": result["tokens"],
        }
        for split, result in baseline.items()
    ]
    calib = sample_calibration(calibration_tokens, calibration["sequences"], seq_len, calibration["seed"])
    for quantization in quantizations:
        quantized = copy.deepcopy(model)
        started = time.perf_counter()
        config = quantization_config(quantization.method, quantization.spec, gptq={"damp": gptq_damp})
        quantize_model(quantized, config, calib.to(device))
        # Timings go to the log, not the table: tables must be byte-identical across reruns.
        logging.getLogger(__name__).info("%s: %.2f s", quantization.label, time.perf_counter() - started)
        for split in quantization.splits:
            rows.append(
                {
                    **base_row,
                    "method": quantization.method,
                    "spec": quantization.spec,
                    "bits": spec_bits(quantization.spec),
                    "split": split,
                    **paired_loss(score(quantized, split), baseline[split]),
                }
            )
        del quantized
    return pd.DataFrame(rows)


def score_job(checkpoint, inputs: dict, params: dict, labels: list[dict], device: str) -> dict:
    """The scoring job of `ptq_scoring`: rows of `score_checkpoint`, repeated under each variant label."""
    from qscaling.data import load_tokens
    from qscaling.studies import Quantization

    held_out = {split: load_tokens(inputs[split]) for split in ("val", "ood") if split in inputs}
    table = score_checkpoint(
        checkpoint,
        [Quantization(**q) for q in params["quantizations"]],
        held_out,
        load_tokens(inputs["calibration"]),
        calibration=params["calibration"],
        eval_tokens=params["eval_tokens"],
        batch_size=params["batch_size"],
        gptq_damp=params["gptq_damp"],
        device=device,
    )
    return {"table": with_labels(table.assign(study=params["study"]), labels)}
