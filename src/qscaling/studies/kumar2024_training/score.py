"""Scoring one checkpoint of the training-precision grid (job time: loads torch): as trained on every held-out
window, and post-quantized where its precision allows."""

import numpy as np
import pandas as pd

from qscaling.data import load_tokens
from qscaling.studies.kumar2024_training.analysis import AS_TRAINED
from qscaling.studies.kumar2024_training.grid import post_training_bits
from qscaling.studies.kumar2024_training.settings import PTQAfterTraining
from qscaling.studies.scoring import score_as_trained, score_checkpoint
from qscaling.studies.study import Quantization
from qscaling.studies.tables import with_labels


def score_job(checkpoint, inputs: dict, params: dict, labels: list[dict], device: str) -> dict:
    """One checkpoint evaluated as trained on every held-out window (the rows δ is paired over) and, where
    `post_training_bits` names any, post-quantized by each method at each of them (the `ptq` rows)."""
    scored = score_as_trained(checkpoint, inputs, params, labels, device)
    ptq = PTQAfterTraining.model_validate(params["ptq"])
    # A checkpoint's labels share its precision; the seed is all that tells them apart.
    bits = post_training_bits(ptq, labels[0]["precision"]) if labels else []
    if not bits:
        scored["ptq"] = pd.DataFrame()
        return scored
    quantizations = [
        Quantization(method, ptq.weight_format.format(bits=value)) for method in ptq.methods for value in bits
    ]
    rows = score_checkpoint(
        checkpoint,
        quantizations,
        {"val": load_tokens(inputs["val"])},
        load_tokens(inputs["calibration"]),
        calibration=params["ptq"]["calibration"],
        eval_tokens=params["eval_tokens"],
        batch_size=params["batch_size"],
        gptq_damp=params["gptq_damp"],
        device=device,
    )
    rows["P_post"] = np.where(rows["method"] == AS_TRAINED, np.inf, rows["bits"]).astype(float)
    scored["ptq"] = with_labels(rows.drop(columns=["split", "bits"]), labels)
    return scored
