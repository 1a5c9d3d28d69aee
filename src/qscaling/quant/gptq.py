"""GPTQ (Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained
Transformers"), one Linear at a time; `qscaling.quant.ptq` runs it block by block over a model.

Defaults are the paper's (and its reference code, IST-DASLab/gptq `gptq.py` / `opt.py`):
- Hessian of the layer-wise objective ||WX − ŴX||²: H = 2·XXᵀ/n over n calibration tokens (Eq. 1–2).
- Dead inputs (H_ii = 0: a column no calibration token ever used): H_ii := 1 and W[:, i] := 0.
- Damping λ = 0.01·mean(diag H) added to the diagonal (`percdamp=.01`, Sec. 4 "Cholesky reformulation").
- H⁻¹ from a Cholesky factorisation, then its upper Cholesky factor drives the updates (Step 3, Alg. 1).
- Lazy batch updates of 128 columns (`blocksize=128`, Step 2).
- act-order (quantize columns by descending H_ii) off; static groups (qparams of every group chosen from
  the original weights up front, needed for act-order with groups to keep groups contiguous) off.
- Quantization grid: whatever `spec` says (the paper's runs use per-row asymmetric min–max INT, no groups:
  `int4:channel:asym`; its symmetric option is `int4:channel:gptq`). Per-tensor / per-channel qparams come
  from the whole original weight; a group of G columns gets its qparams when the first column of the group
  is reached, from the weights as updated up to the start of the current lazy batch (the reference's
  behaviour). With act-order and no static groups, groups are G consecutive columns in the permuted order.
- Calibration (in ptq): 128 random segments of 2048 tokens from the training corpus, seed 0.
"""

import torch

from qscaling.quant import choose_qparams, fake_quantize_with, parse_spec

DEFAULT_BLOCK_SIZE = 128
DEFAULT_DAMP = 0.01


class HessianAccumulator:
    """Running H = 2·XXᵀ/n for one Linear, fed its inputs batch by batch (as forward hooks see them)."""

    def __init__(self, columns: int, device=None):
        self.hessian = torch.zeros(columns, columns, dtype=torch.float32, device=device)
        self.tokens = 0

    def add(self, inputs: torch.Tensor) -> None:
        rows = inputs.detach().reshape(-1, inputs.shape[-1]).float()
        total = self.tokens + rows.shape[0]
        # Rescale the running mean instead of summing, as the reference does, to keep magnitudes bounded.
        self.hessian *= self.tokens / total
        self.hessian.addmm_(rows.T, rows, alpha=2.0 / total)
        self.tokens = total


def check_gptq_options(spec, *, block_size: int) -> None:
    """A ValueError unless GPTQ can run at `spec` (a QuantSpec) with lazy batches of `block_size` columns."""
    if not block_size > 0:
        raise ValueError(f"block_size: got {block_size}, must be a positive column count")
    if spec.granularity not in ("tensor", "channel", "group"):
        raise ValueError(f"spec: GPTQ needs tensor, channel or group granularity, got '{spec}'")


def gptq_quantize_weight(
    weight: torch.Tensor,
    hessian: torch.Tensor,
    spec,
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
    damp: float = DEFAULT_DAMP,
    act_order: bool = False,
    static_groups: bool = False,
) -> tuple[torch.Tensor, float]:
    """GPTQ's quantized weight (out × in, same dtype) and its Hessian-weighted error Σ (w−q)²/[H⁻¹]_ii²/2.

    `spec` is a QuantSpec or its string; its granularity must be per-tensor, per-channel, or groups/blocks
    along the input dim.
    """
    spec = parse_spec(spec)
    W = weight.detach().clone().float()
    columns = W.shape[1]
    if hessian.shape != (columns, columns):
        raise ValueError(f"hessian: shape {tuple(hessian.shape)} does not match weight columns {columns}")
    check_gptq_options(spec, block_size=block_size)
    H = hessian.clone().float()
    grid = _ColumnGrid(W, spec, static_groups)
    _zero_dead_inputs(W, H)
    permutation = None
    if act_order:
        permutation = torch.argsort(torch.diag(H), descending=True)
        W = W[:, permutation]
        H = H[permutation][:, permutation]
        grid.permutation = permutation
    H_inverse = _damped_inverse_factor(H, damp)
    Q = torch.zeros_like(W)
    losses = torch.zeros(W.shape[0], dtype=torch.float64, device=W.device)
    for block_start in range(0, columns, block_size):
        block_stop = min(block_start + block_size, columns)
        errors = _quantize_lazy_batch(W, Q, losses, H_inverse, range(block_start, block_stop), grid)
        W[:, block_stop:] -= errors @ H_inverse[block_start:block_stop, block_stop:]
    if permutation is not None:
        Q = Q[:, torch.argsort(permutation)]
    return Q.to(weight.dtype), float(losses.sum() / 2)


class _ColumnGrid:
    """The qparams GPTQ quantizes each column with (module docstring): per-tensor / per-channel ones fixed from the
    whole original weight (the reference's `quantizer.ready()`), static groups' from the original weight's groups,
    other groups' from the weight as updated when the group's first column is reached."""

    def __init__(self, W: torch.Tensor, spec, static_groups: bool):
        self.spec = spec
        self.group = spec.group_size
        self.permutation = None  # act-order's column order, once set
        self.current = None if self.group is not None else choose_qparams(W, spec)
        self.static = None
        # Two-level (e4m3) scales keep one per-tensor scale, from the whole original weight.
        self.whole = W.clone() if spec.fp_scale == "e4m3" else None
        if static_groups and self.group is not None:
            self.static = [
                choose_qparams(W[:, g : g + self.group], spec, self.whole) for g in range(0, W.shape[1], self.group)
            ]

    def qparams(self, W: torch.Tensor, column: int):
        """The qparams of `column` of W (in act-order's order where set), W as of the current lazy batch's start."""
        if self.group is None:
            return self.current
        if self.static is not None:
            original_column = column if self.permutation is None else int(self.permutation[column])
            return self.static[original_column // self.group]
        if column % self.group == 0:
            # As the reference's `find_params(W[:, i:i+groupsize])`: W as of this lazy batch's start (updates inside
            # the batch live in its own copy). Same thing when groups align with batches.
            self.current = choose_qparams(W[:, column : column + self.group], self.spec, self.whole)
        return self.current


def _zero_dead_inputs(W: torch.Tensor, H: torch.Tensor) -> None:
    """Dead inputs (H_ii = 0: a column no calibration token used) get H_ii := 1 and W[:, i] := 0, in place."""
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0


def _damped_inverse_factor(H: torch.Tensor, damp: float) -> torch.Tensor:
    """The upper Cholesky factor of (H + λI)⁻¹, λ = damp·mean(diag H) (H damped in place; Step 3, Alg. 1)."""
    H.diagonal().add_(damp * torch.mean(torch.diag(H)))
    try:
        return torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)
    except torch.linalg.LinAlgError as error:
        raise ValueError(f"damp: H + {damp}·mean(diag) is not positive definite; raise damp") from error


def _quantize_lazy_batch(W, Q, losses, H_inverse, columns: range, grid: _ColumnGrid) -> torch.Tensor:
    """Quantize W's `columns` into Q one at a time, each column's error spread over the batch's later columns, and
    add each row's (w−q)²/[H⁻¹]_ii² to `losses` (Step 2, Alg. 1); returns the scaled errors (w−q)/[H⁻¹]_ii that update
    the columns after the batch."""
    W_block = W[:, columns.start : columns.stop].clone()
    errors = torch.zeros_like(W_block)
    H_inverse_block = H_inverse[columns.start : columns.stop, columns.start : columns.stop]
    for i, column in enumerate(columns):
        w = W_block[:, i]
        q = fake_quantize_with(w[:, None], grid.qparams(W, column), grid.spec)[:, 0]
        Q[:, column] = q
        d = H_inverse_block[i, i]
        losses += ((w - q) ** 2 / d**2).double()
        error = (w - q) / d
        W_block[:, i:] -= error[:, None] @ H_inverse_block[i, i:][None, :]
        errors[:, i] = error
    return errors
