"""Scoring one checkpoint, the job-time part every study shares (loads torch): the columns that say which
checkpoint a row scores, its held-out windows as trained, and the post-training quantization loop — the
checkpoint before and after each quantization, on the same held-out windows (`score_quantizations`, with whatever
else a study measures on each model beside its loss: a `Measurement`).

One PTQ job per checkpoint (not per quantization): loading, calibration sampling and the unquantized pass are
shared, and tiny models quantize in a second. Rows are tidy: one per (quantization, split), with the unquantized
loss alongside and `delta_se` from the per-window paired differences.
"""

import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from qscaling.data import load_tokens
from qscaling.evaluate import evaluate_loss
from qscaling.model import count_non_embedding_params
from qscaling.quant.as_trained import load_as_trained
from qscaling.quant.gptq import DEFAULT_DAMP
from qscaling.quant.precision import run_precision_label
from qscaling.quant.ptq import quantization_config, quantize_model, sample_calibration
from qscaling.quant.spec import parse_spec
from qscaling.runspec import RunSpec
from qscaling.stats import standard_error
from qscaling.studies.study import Quantization
from qscaling.studies.tables import with_labels


def checkpoint_columns(model, metadata: dict) -> dict:
    """The columns that say which checkpoint a row scores: run, size, N (non-embedding), D, milestone, and the
    label of the precision the run trained at (`qscaling.quant.precision.training_precision_label`)."""
    spec = metadata.get("spec", {})
    return {
        "run": metadata.get("run_id"),
        "size": spec.get("size"),
        "N": count_non_embedding_params(model),
        "D": metadata.get("tokens_seen"),
        "milestone": metadata.get("milestone_tokens"),
        "training_precision": run_precision_label(spec),
    }


def diverged_rows(summary: dict, tokens: int, labels: list[dict]) -> pd.DataFrame:
    """The rows of a checkpoint its run never wrote because training diverged first (`run.json`'s `diverged`
    record, `qscaling.train`): the columns that say which checkpoint it is, `diverged` True and the reason."""
    spec = RunSpec.from_dict(summary["spec"])
    row = {
        "run": summary["run_id"],
        "size": spec.size,
        "N": spec.shape.non_embedding_params,
        "D": -(-tokens // spec.tokens_per_step) * spec.tokens_per_step,
        "milestone": tokens,
        "training_precision": run_precision_label(summary["spec"]),
        "diverged": True,
        "diverged_reason": summary["diverged"]["reason"],
    }
    return with_labels(pd.DataFrame([row]), labels)


def score_windows(checkpoint, val_path: str, params: dict, device: str):
    """A checkpoint loaded as it trained and evaluated on the held-out windows: (model, held-out tokens, one row
    per window with its loss and the checkpoint's columns, those columns). Per-window rows let a study pair two
    models' losses on the same windows (δ and its standard error) when it builds its table."""
    model, metadata = load_as_trained(checkpoint)
    model.to(device)
    tokens = load_tokens(val_path)
    seq_len = model.config.max_position_embeddings
    result = evaluate_loss(
        model, tokens, seq_len=seq_len, batch_size=params["batch_size"], max_tokens=params["eval_tokens"]
    )
    columns = checkpoint_columns(model, metadata)
    windows = pd.DataFrame({"window": np.arange(len(result["per_window"])), "loss": result["per_window"].numpy()})
    return model, tokens, windows.assign(**columns)[[*columns, "window", "loss"]], columns


def score_as_trained(checkpoint, inputs: dict, params: dict, labels: list[dict], device: str) -> dict:
    """One checkpoint evaluated as it trained: its loss on every held-out window (what δ is paired over)."""
    _, _, windows, _ = score_windows(checkpoint, inputs["val"], params, device)
    return {"table": with_labels(windows, labels)}


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


@dataclass(frozen=True)
class Measurement:
    """What a study measures on the unquantized model and on each quantized copy besides the held-out loss:
    `measure(model)` gives a result, `columns(result, base)` the row's columns from it and the unquantized
    model's result (e.g. task accuracy and its change after quantization)."""

    measure: Callable
    columns: Callable


LOSS_ONLY = Measurement(measure=lambda model: None, columns=lambda result, base: {})


def _unquantized_loss(result: dict, paired: bool) -> dict:
    """The unquantized model's loss columns: δ = 0 by definition, or (`paired`) computed like every quantized
    row's, the model paired with itself (NaN where the loss or its standard error is)."""
    loss = paired_loss(result, result)
    return loss if paired else {**loss, "delta": 0.0, "delta_se": 0.0}


def score_quantizations(
    model,
    base_row: dict,
    quantizations,
    held_out: dict,
    *,
    eval_tokens: int,
    batch_size: int,
    calibration=None,
    gptq_damp: float = DEFAULT_DAMP,
    measurement: Measurement = LOSS_ONLY,
    pair_unquantized: bool = False,
) -> pd.DataFrame:
    """The PTQ loop: rows for `model` (loaded on its device) unquantized on every split of `held_out`, then for a
    fresh copy of it after each quantization on that quantization's splits. A row holds `base_row`, the method,
    spec, bits and split, the loss columns (`paired_loss`, δ against the unquantized model on the same windows)
    and `measurement`'s columns. `calibration`: windows on the model's device, for the methods that read them."""
    seq_len = model.config.max_position_embeddings

    def losses(candidate, splits) -> dict:
        return {
            split: evaluate_loss(
                candidate, held_out[split], seq_len=seq_len, batch_size=batch_size, max_tokens=eval_tokens
            )
            for split in splits
        }

    baseline = losses(model, held_out)
    base_result = measurement.measure(model)
    unquantized = {**base_row, "method": "none", "spec": "none", "bits": 16}
    extra = measurement.columns(base_result, base_result)
    rows = [
        {**unquantized, "split": split, **_unquantized_loss(result, pair_unquantized), **extra}
        for split, result in baseline.items()
    ]
    for quantization in quantizations:
        quantized = copy.deepcopy(model)
        started = time.perf_counter()
        config = quantization_config(quantization.method, quantization.spec, gptq={"damp": gptq_damp})
        quantize_model(quantized, config, calibration)
        # Timings go to the log, not the table: tables must be byte-identical across reruns.
        logging.getLogger(__name__).info("%s: %.2f s", quantization.label, time.perf_counter() - started)
        scored = losses(quantized, quantization.splits)
        extra = measurement.columns(measurement.measure(quantized), base_result)
        del quantized
        row = {
            **base_row,
            "method": quantization.method,
            "spec": quantization.spec,
            "bits": spec_bits(quantization.spec),
        }
        rows += [
            {**row, "split": split, **paired_loss(result, baseline[split]), **extra} for split, result in scored.items()
        ]
    return pd.DataFrame(rows)


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
    """Rows for the unquantized model and every quantization of `checkpoint` on each split in `held_out`
    (`score_quantizations`), with the schedule it trained on; calibration windows drawn from `calibration_tokens`."""
    model, metadata = load_as_trained(checkpoint)
    model.to(device)
    spec = metadata.get("spec", {})
    base_row = {
        **checkpoint_columns(model, metadata),
        "schedule": spec.get("schedule"),
        "cooldown": spec.get("cooldown") is not None,
    }
    seq_len = model.config.max_position_embeddings
    windows = sample_calibration(calibration_tokens, calibration["sequences"], seq_len, calibration["seed"])
    return score_quantizations(
        model,
        base_row,
        quantizations,
        held_out,
        eval_tokens=eval_tokens,
        batch_size=batch_size,
        calibration=windows.to(device),
        gptq_damp=gptq_damp,
    )


def score_job(checkpoint, inputs: dict, params: dict, labels: list[dict], device: str) -> dict:
    """The scoring job of `qscaling.studies.grids.ptq_scoring`: rows of `score_checkpoint`, repeated under each
    variant label."""
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
