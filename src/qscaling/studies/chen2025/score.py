"""Scoring one checkpoint of Chen et al. 2025 as trained (job time: loads torch): its loss on every held-out window
and the statistics of each block Linear's input."""

import numpy as np
import pandas as pd
import torch

from qscaling.quant.roles import linear_sites
from qscaling.studies.chen2025.analysis import main_grid
from qscaling.studies.scoring import score_windows
from qscaling.studies.tables import with_labels


def score_job(checkpoint, inputs: dict, params: dict, labels: list[dict], device: str) -> dict:
    """One checkpoint evaluated as it trained (its precision re-applied): its loss on every held-out window (the
    rows δ is paired over) and the kurtosis and max |x| of each Linear's input, per block and role."""
    model, tokens, windows, columns = score_windows(checkpoint, inputs["val"], params, device)
    seq_len = model.config.max_position_embeddings
    # Fig. 9 and the kurtosis claim read the main grid's models only: the ablations' statistics would be unread.
    in_main_grid = [variant for variant in labels if main_grid(pd.DataFrame([variant])).all()]
    statistics = input_statistics(model, tokens, seq_len).assign(**columns) if in_main_grid else pd.DataFrame()
    return {"table": with_labels(windows, labels), "activations": with_labels(statistics, in_main_grid)}


def input_statistics(model, tokens: np.ndarray, seq_len: int, windows: int = 8) -> pd.DataFrame:
    """Kurtosis (Pearson, of all entries) and max |x| of every block Linear's input on the first `windows`
    held-out windows: Chen et al.'s Fig. 9 (FC2's input is the outlier-heavy one)."""
    captured, hooks = {}, []
    for site in linear_sites(model, include_lm_head=False):

        def keep(module, args, output, site=site):
            captured.setdefault((site.block, site.role), []).append(args[0].detach().double().flatten())

        hooks.append(site.module.register_forward_hook(keep))
    data = torch.from_numpy(np.asarray(tokens[: windows * seq_len]).astype(np.int64)).view(windows, seq_len)
    try:
        with torch.no_grad():
            model.eval()(input_ids=data.to(next(model.parameters()).device))
    finally:
        for hook in hooks:
            hook.remove()
    rows = []
    for (block, role), values in sorted(captured.items()):
        x = torch.cat(values)  # q/k/v (and gate/up) read one input: repeating it leaves kurtosis and max alike
        centred = x - x.mean()
        rows.append(
            {
                "block": block,
                "role": role,
                "kurtosis": float((centred**4).mean() / (centred**2).mean() ** 2),
                "max_abs": float(x.abs().max()),
            }
        )
    return pd.DataFrame(rows)
