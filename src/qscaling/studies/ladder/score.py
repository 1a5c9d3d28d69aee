"""Scoring one annealed checkpoint of the ladder (job time: loads torch)."""

import pandas as pd

from qscaling.data import load_tokens
from qscaling.evaluate import evaluate_loss
from qscaling.quant.as_trained import load_as_trained
from qscaling.studies.scoring import checkpoint_columns
from qscaling.studies.tables import with_labels


def score_job(checkpoint, inputs: dict, params: dict, labels: list[dict], device: str) -> dict:
    """The held-out loss of one annealed checkpoint, with the peak LR and warmup it trained with."""
    model, metadata = load_as_trained(checkpoint)
    model.to(device)
    result = evaluate_loss(
        model,
        load_tokens(inputs["val"]),
        seq_len=model.config.max_position_embeddings,
        batch_size=params["batch_size"],
        max_tokens=params["eval_tokens"],
    )
    spec = metadata["spec"]
    row = {
        **checkpoint_columns(model, metadata),
        "lr": spec["lr"],
        "warmup_tokens": spec["warmup_tokens"],
        "loss": result["loss"],
        "loss_se": result["loss_se"],
        "eval_tokens": result["tokens"],
    }
    return {"table": with_labels(pd.DataFrame([row]), labels)}
