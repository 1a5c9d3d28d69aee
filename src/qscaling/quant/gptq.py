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
    original_dtype = weight.dtype
    W = weight.detach().clone().float()
    rows, columns = W.shape
    if hessian.shape != (columns, columns):
        raise ValueError(f"hessian: shape {tuple(hessian.shape)} does not match weight columns {columns}")
    if not block_size > 0:
        raise ValueError(f"block_size: got {block_size}, must be a positive column count")
    if spec.granularity not in ("tensor", "channel", "group"):
        raise ValueError(f"spec: GPTQ needs tensor, channel or group granularity, got '{spec}'")
    group = spec.group_size or columns
    H = hessian.clone().float()

    # Per-tensor / per-channel grids are fixed once from the whole original weight (`quantizer.ready()`).
    whole_qparams = None if spec.group_size is not None else choose_qparams(W, spec)
    static_qparams = None
    if static_groups and spec.group_size is not None:
        static_qparams = [choose_qparams(W[:, g : g + group], spec) for g in range(0, columns, group)]

    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0

    permutation = None
    if act_order:
        permutation = torch.argsort(torch.diag(H), descending=True)
        W = W[:, permutation]
        H = H[permutation][:, permutation]

    H.diagonal().add_(damp * torch.mean(torch.diag(H)))
    try:
        H_inverse = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)
    except torch.linalg.LinAlgError as error:
        raise ValueError(f"damp: H + {damp}·mean(diag) is not positive definite; raise damp") from error

    Q = torch.zeros_like(W)
    losses = torch.zeros(rows, dtype=torch.float64, device=W.device)
    qparams = whole_qparams
    for block_start in range(0, columns, block_size):
        block_stop = min(block_start + block_size, columns)
        W_block = W[:, block_start:block_stop].clone()
        errors = torch.zeros_like(W_block)
        H_inverse_block = H_inverse[block_start:block_stop, block_start:block_stop]
        for i in range(block_stop - block_start):
            column = block_start + i
            if spec.group_size is not None:
                if static_qparams is not None:
                    original_column = column if permutation is None else int(permutation[column])
                    qparams = static_qparams[original_column // group]
                elif column % group == 0:
                    # As the reference's `find_params(W[:, i:i+groupsize])`: W as of this lazy batch's start
                    # (updates inside the batch live in W_block). Same thing when groups align with batches.
                    qparams = choose_qparams(W[:, column : column + group], spec)
            w = W_block[:, i]
            q = fake_quantize_with(w[:, None], qparams, spec)[:, 0]
            Q[:, column] = q
            d = H_inverse_block[i, i]
            losses += ((w - q) ** 2 / d**2).double()
            error = (w - q) / d
            W_block[:, i:] -= error[:, None] @ H_inverse_block[i, i:][None, :]
            errors[:, i] = error
        W[:, block_stop:] -= errors @ H_inverse[block_start:block_stop, block_stop:]

    if permutation is not None:
        Q = Q[:, torch.argsort(permutation)]
    return Q.to(original_dtype), float(losses.sum() / 2)
