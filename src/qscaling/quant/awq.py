"""AWQ (Lin et al. 2024, "AWQ: Activation-aware Weight Quantization"): per-input-channel scales that
protect salient weight columns, searched on calibration data, then plain RTN of the scaled weights.

For each group of Linears sharing one input (a `roles.ScaleFold`), with x̄_j = mean |x_j| over calibration
tokens (llm-awq `get_act_scale`): s = x̄^α, normalised by √(max s · min s), for α in {0, 1/20, …, 19/20}
(llm-awq `n_grid = 20`); the α whose fake-quantized weights Q(W·diag(s))·diag(s)⁻¹ give the smallest mean
squared error of the *whole decoder block's output* wins (Eq. 4–5). α = 0 is RTN itself, so on the block's
calibration data AWQ never does worse than RTN.

Scales are always folded into the previous op (norm weight/bias, or the rows of the previous Linear), so the
quantized model is a plain transformers model with no run-time division. Where no fold exists (GPT-NeoX's
fc2 after GELU; o_proj under grouped-query attention) the Linear is RTN-quantized without a scale, as llm-awq
does. llm-awq's additional weight-clipping search (`auto_clip`) is not part of this implementation.
"""

import torch
from torch import nn

from qscaling.quant import quantize
from qscaling.quant.roles import ScaleFold, model_layout

DEFAULT_GRID_POINTS = 20
_MIN_SCALE = 1e-4  # llm-awq clamps x̄^α from below before normalising


def _mean_abs_inputs(block: nn.Module, paths: list[str], run_block) -> dict[str, torch.Tensor]:
    """Per-input-channel mean |x| of each Linear in `paths` over one pass of the calibration data."""
    sums, counts, hooks = {}, {}, []

    def make_hook(path):
        def hook(module, args, output):
            rows = args[0].detach().reshape(-1, args[0].shape[-1]).float()
            sums[path] = sums.get(path, 0) + rows.abs().sum(dim=0)
            counts[path] = counts.get(path, 0) + rows.shape[0]

        return hook

    for path in paths:
        hooks.append(block.get_submodule(path).register_forward_hook(make_hook(path)))
    try:
        run_block(block)
    finally:
        for hook in hooks:
            hook.remove()
    return {path: sums[path] / counts[path] for path in paths}


def candidate_scales(mean_abs: torch.Tensor, alpha: float) -> torch.Tensor:
    """s = max(x̄^α, 1e-4) / √(max s · min s): llm-awq's per-channel scale for one grid point."""
    scales = mean_abs.pow(alpha).clamp(min=_MIN_SCALE)
    return scales / (scales.max() * scales.min()).sqrt()


def fold_scales(block: nn.Module, fold: ScaleFold, scales: torch.Tensor) -> None:
    """Divide the previous op's output channels by `scales`, multiply the consumers' input columns by them."""
    previous = block.get_submodule(fold.previous)
    channels = slice(None) if fold.previous_channels is None else fold.previous_channels
    # A norm's weight is 1-D (one gain per channel); a Linear's rows are its output channels.
    if previous.weight.dim() == 1:
        previous.weight[channels] /= scales.to(previous.weight.dtype)
    else:
        previous.weight[channels] /= scales.to(previous.weight.dtype)[:, None]
    if getattr(previous, "bias", None) is not None:
        previous.bias[channels] /= scales.to(previous.bias.dtype)
    for path in fold.consumers:
        consumer = block.get_submodule(path)
        consumer.weight *= scales.to(consumer.weight.dtype)[None, :]


def _block_error(outputs, references) -> float:
    return float(sum(((o.float() - r.float()) ** 2).mean() for o, r in zip(outputs, references)) / len(references))


def check_grid_points(grid_points: int) -> None:
    """A ValueError unless the α grid has at least one point."""
    if grid_points < 1:
        raise ValueError(f"grid_points: got {grid_points}, must be ≥ 1")


def awq_scale_block(model, block, run_block, spec, *, consumers_selected, grid_points=DEFAULT_GRID_POINTS):
    """Search and fold AWQ scales for every foldable Linear group of one decoder block (in place).

    `run_block(block)` returns the block's outputs over the calibration batches; `consumers_selected(path)`
    says whether the Linear at `path` (relative to the block) is being quantized. Returns {consumer: α}.
    """
    check_grid_points(grid_points)
    folds = [f for f in model_layout(model).scale_folds if all(consumers_selected(c) for c in f.consumers)]
    mean_abs = _mean_abs_inputs(block, [fold.consumers[0] for fold in folds], run_block)
    references = run_block(block)
    chosen = {}
    for fold in folds:
        consumers = [block.get_submodule(path) for path in fold.consumers]
        originals = [module.weight.detach().clone() for module in consumers]
        best_error, best_alpha, best_scales = float("inf"), None, None
        for point in range(grid_points):
            alpha = point / grid_points
            scales = candidate_scales(mean_abs[fold.consumers[0]], alpha)
            for module, weight in zip(consumers, originals):
                scaled = weight * scales.to(weight.dtype)[None, :]
                module.weight.copy_(quantize(scaled, spec) / scales.to(weight.dtype)[None, :])
            error = _block_error(run_block(block), references)
            if error < best_error:
                best_error, best_alpha, best_scales = error, alpha, scales
        for module, weight in zip(consumers, originals):
            module.weight.copy_(weight)
        fold_scales(block, fold, best_scales)
        for path in fold.consumers:
            chosen[path] = best_alpha
    return chosen
