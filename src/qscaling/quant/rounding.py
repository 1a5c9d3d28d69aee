"""Rounding of scaled values to integers, and the counter-based random stream behind stochastic rounding.

Modes: ``nearest-even`` (torch.round, IEEE default), ``nearest-away`` (ties away from zero, as qtorch and
microxcaling round), ``stochastic`` (round the magnitude up with probability equal to its fractional part).

Stochastic rounding must give the same bits on every path (reference, compiled CPU, Triton), so its
randomness is a pure function of (seed, flat element index): u = fmix32(index XOR fmix32(seed)) >> 8, scaled
by 2^-24 — murmur3's 32-bit finaliser, computed here in int64 holding uint32 values. Rounding the magnitude
(not the signed value) keeps the fractional part exact in float32 for every input, which is what lets the
fast paths match bit for bit; it is unbiased either way.
"""

import torch

_MASK32 = 0xFFFFFFFF


def _multiply_mod_2_32(h: torch.Tensor, constant: int) -> torch.Tensor:
    """(h · constant) mod 2^32 for h < 2^32 without int64 overflow: split the constant into 16-bit halves."""
    high, low = constant >> 16, constant & 0xFFFF
    return (h * low + (((h * high) & 0xFFFF) << 16)) & _MASK32


def mix32(h: torch.Tensor) -> torch.Tensor:
    """murmur3 fmix32 on an int64 tensor of uint32 values."""
    h = h ^ (h >> 16)
    h = _multiply_mod_2_32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _multiply_mod_2_32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def seed_key(seed: int) -> int:
    """The per-seed key XORed into every element index (a Python int < 2^32)."""
    return int(mix32(torch.tensor([seed & _MASK32], dtype=torch.int64)).item())


def uniform_like(x: torch.Tensor, seed: int) -> torch.Tensor:
    """float32 uniforms in [0, 1), multiples of 2^-24, one per element of x (row-major index), on x's device."""
    index = torch.arange(x.numel(), dtype=torch.int64, device=x.device) & _MASK32
    bits = mix32(index ^ seed_key(seed))
    return ((bits >> 8).to(torch.float32) * 2.0**-24).reshape(x.shape)


def round_magnitude(r: torch.Tensor, mode: str, uniform: torch.Tensor | None = None) -> torch.Tensor:
    """Round non-negative float64 values r to integers (all arithmetic exact for r < 2^52)."""
    if mode == "nearest-even":
        return torch.round(r)
    if mode == "nearest-away":
        return torch.floor(r + 0.5)
    if uniform is None:
        raise ValueError("round_magnitude: stochastic rounding needs `uniform`")
    floor = torch.floor(r)
    return floor + (uniform.to(r.dtype) < r - floor).to(r.dtype)


def round_signed(y: torch.Tensor, mode: str, uniform: torch.Tensor | None = None) -> torch.Tensor:
    """Round float32 values y to integers (float32 result): the magnitude by ``round_magnitude``, sign kept.

    nearest-even is torch.round on y itself (its ties are symmetric already). Computed in float64, where
    |y| + 0.5 and |y| - floor|y| are exact.
    """
    if mode == "nearest-even":
        return torch.round(y)
    wide = y.to(torch.float64)
    return torch.copysign(round_magnitude(wide.abs(), mode, uniform), wide).to(y.dtype)
