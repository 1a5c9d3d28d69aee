"""Ahmadian et al. (2023, Sec. 4) proxies for quantization sensitivity, measured on the input of each block's QKV
projection over a fixed set of held-out windows, and outlier-dimension counts by three rules.

Per block:
  rmse            RMSE between the QKV input and its W8A8 round trip (per-token symmetric INT8, the activation
                  half of W8A8 vector-wise quantization)
  act_std         mean over tokens of the standard deviation of that token's activation vector
  gain_std        standard deviation of the gain of the norm that feeds the QKV projection (LayerNorm in the
                  paper, RMSNorm in our Llama); NaN where no norm precedes it (post-norm OPT)
  spectral_norm   largest singular value of the stacked [W_q; W_k; W_v] (the fused QKV projection)

Outlier dimensions follow LLM.int8() (Dettmers et al. 2022, Sec. 3.2): a hidden dimension is an outlier when its
magnitude exceeds a threshold on at least 6 % of the tokens in at least 25 % of the layers. The paper applies the
6.0 threshold, a looser 4.2, and a z-score rule: per layer, |x − μ| > 4σ with μ, σ over all of the layer's values.
"""

import pandas as pd
import torch

from qscaling.quant import quantize
from qscaling.quant.roles import linear_sites, model_layout
from qscaling.quant.w8a8 import DEFAULT_ACTIVATION_SPEC, LLM_INT8_THRESHOLD

LAYER_FRACTION = 0.25  # LLM.int8(): at least 25 % of the layers
TOKEN_FRACTION = 0.06  # … and at least 6 % of the sequence positions
LOOSE_THRESHOLD = 4.2  # Ahmadian et al. Table 5
ZSCORE = 4.0  # μ + 4σ
RULES = {"llm_int8": LLM_INT8_THRESHOLD, "threshold_4.2": LOOSE_THRESHOLD, "zscore_4": None}


def qkv_projections(model) -> list[list[torch.nn.Linear]]:
    """Per decoder block, its query/key/value Linears (one fused Linear for GPT-NeoX)."""
    blocks: dict[int, list] = {}
    for site in linear_sites(model, include_lm_head=False):
        if site.role == "qkv":
            blocks.setdefault(site.block, []).append(site.module)
    return [blocks[index] for index in sorted(blocks)]


def qkv_norm_gains(model) -> list[torch.Tensor | None]:
    """Per block, the gain of the norm whose output is the QKV input (None where there is none)."""
    layout = model_layout(model)
    qkv_paths = {path for path, role in layout.linear_roles.items() if role == "qkv"}
    norm = next((fold.previous for fold in layout.scale_folds if set(fold.consumers) == qkv_paths), None)
    blocks = model.get_submodule(layout.blocks)
    return [None if norm is None else block.get_submodule(norm).weight.detach().float() for block in blocks]


@torch.no_grad()
def qkv_inputs(model, windows: torch.Tensor) -> list[torch.Tensor]:
    """Per block, the QKV projection's input on `windows` (sequences × seq_len token ids) as [tokens, d_model]."""
    captured: dict[int, list] = {}
    hooks = []
    for index, projections in enumerate(qkv_projections(model)):

        def keep(module, inputs, output, index=index):
            captured.setdefault(index, []).append(inputs[0].detach().float().reshape(-1, inputs[0].shape[-1]))

        hooks.append(projections[0].register_forward_hook(keep))
    was_training = model.training
    model.eval()
    try:
        model(input_ids=windows.to(next(model.parameters()).device))
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    return [torch.cat(captured[index]).cpu() for index in sorted(captured)]


def w8a8_rmse(x: torch.Tensor) -> float:
    """RMSE between activations [tokens, d] and their per-token INT8 quantize–dequantize round trip."""
    return float((x - quantize(x, DEFAULT_ACTIVATION_SPEC)).pow(2).mean().sqrt())


def block_proxies(model, inputs: list[torch.Tensor]) -> pd.DataFrame:
    """One row per block: the four proxies of the module docstring; `inputs` from `qkv_inputs`."""
    gains = qkv_norm_gains(model)
    rows = []
    for block, (x, gain, projections) in enumerate(zip(inputs, gains, qkv_projections(model))):
        stacked = torch.cat([p.weight.detach().float() for p in projections])
        rows.append(
            {
                "block": block,
                "rmse": w8a8_rmse(x),
                "act_std": float(x.std(dim=-1).mean()),
                "gain_std": float("nan") if gain is None else float(gain.std()),
                "spectral_norm": float(torch.linalg.matrix_norm(stacked.cpu(), ord=2)),
            }
        )
    return pd.DataFrame(rows)


def outlier_dimensions(inputs: list[torch.Tensor], threshold: float | None) -> int:
    """Hidden dimensions with |x| > `threshold` (None: |x − μ| > 4σ per layer) on ≥ 6 % of the tokens in ≥ 25 %
    of the layers; `inputs` holds one [tokens, d] tensor per layer."""
    if not inputs:
        raise ValueError("outlier_dimensions: no layers given")
    per_layer = []
    for x in inputs:
        exceeds = (x - x.mean()).abs() > ZSCORE * x.std() if threshold is None else x.abs() > threshold
        per_layer.append(exceeds.float().mean(dim=0) >= TOKEN_FRACTION)
    layer_share = torch.stack(per_layer).float().mean(dim=0)
    return int((layer_share >= LAYER_FRACTION).sum())


def outlier_counts(inputs: list[torch.Tensor]) -> dict[str, int]:
    """Outlier-dimension counts under every rule of RULES."""
    return {rule: outlier_dimensions(inputs, threshold) for rule, threshold in RULES.items()}


def block_values(model, block: int) -> pd.DataFrame:
    """Every QKV weight and norm gain of one block, long format (kind, value), for histograms (Fig. 4)."""
    weights = torch.cat([p.weight.detach().float().reshape(-1) for p in qkv_projections(model)[block]])
    frames = [pd.DataFrame({"kind": "qkv_weight", "value": weights.cpu().numpy()})]
    gain = qkv_norm_gains(model)[block]
    if gain is not None:
        frames.append(pd.DataFrame({"kind": "norm_gain", "value": gain.cpu().numpy()}))
    return pd.concat(frames, ignore_index=True).assign(block=block)
