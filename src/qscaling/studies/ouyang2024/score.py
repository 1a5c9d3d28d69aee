"""Ouyang et al. 2024's job-time code (loads torch): the weight change between adjacent checkpoints of every run
the study scores (Fig. 12)."""

from pathlib import Path

import numpy as np
import pandas as pd
import torch
from safetensors.torch import load_file

from qscaling.atomic import write_table
from qscaling.checkpoint import read_metadata
from qscaling.train import milestone_name


def weight_changes(checkpoint_paths: list) -> pd.DataFrame:
    """Fig. 12: relative change ‖W_t+1 − W_t‖/‖W_t‖ of every matrix between adjacent checkpoints of one run."""
    records, previous = [], None
    for path in checkpoint_paths:
        weights, metadata = load_file(f"{path}/model.safetensors"), read_metadata(path)
        if previous is not None:
            for name, tensor in weights.items():
                if tensor.dim() == 2 and "embed" not in name:
                    change = torch.linalg.norm(tensor - previous[0][name]) / torch.linalg.norm(previous[0][name])
                    records.append(
                        {
                            "run": metadata["run_id"],
                            "size": metadata["spec"]["size"],
                            "D_from": previous[1],
                            "D_to": metadata["tokens_seen"],
                            # Hub checkpoints record no schedule: NaN, and the claim then uses every interval.
                            "warmup_tokens": metadata["spec"].get("warmup_tokens", np.nan),
                            "matrix": name,
                            "relative_change": float(change),
                        }
                    )
        previous = (weights, metadata["tokens_seen"])
    return pd.DataFrame(records)


def weight_changes_job(inputs: dict, outputs: dict, params: dict) -> None:
    frames = []
    for summary, milestones in zip(inputs["summaries"], params["milestones"]):
        run_dir = Path(summary).parent
        frames.append(weight_changes([run_dir / "checkpoints" / milestone_name(m) for m in milestones]))
    write_table(pd.concat(frames, ignore_index=True), outputs["weight_changes"])
