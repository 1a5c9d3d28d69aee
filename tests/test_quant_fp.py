"""FP ExMy reference: torch's own casts, hand-computed value tables, a brute-force grid search, block scales."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qscaling.quant import block_scale, choose_qparams, fp_format, quantize_reference, round_to_format
from qscaling.quant.rounding import uniform_like


def same_bits(a, b):
    """Bit-for-bit equality of two float32 tensors, NaN equal to NaN."""
    assert a.shape == b.shape and a.dtype == b.dtype == torch.float32
    return bool(((a.view(torch.int32) == b.view(torch.int32)) | (torch.isnan(a) & torch.isnan(b))).all())


def awkward_float32(n, seed):
    """Values across float32's range: ties, subnormals of the target formats, float32 subnormals, huge."""
    generator = torch.Generator().manual_seed(seed)
    mantissas = torch.rand(n, generator=generator) + 1
    exponents = torch.randint(-30, 20, (n,), generator=generator).float()
    signs = torch.where(torch.rand(n, generator=generator) < 0.5, -1.0, 1.0)
    x = signs * mantissas * torch.exp2(exponents)
    # Exact ties of short grids: k/16 · 2^e.
    ties = (
        torch.randint(0, 64, (n // 4,), generator=generator)
        / 16
        * torch.exp2(torch.randint(-20, 10, (n // 4,), generator=generator).float())
    )
    special = torch.tensor([0.0, -0.0, 1e-45, -3e-40, 2.0**-126, 2.0**-9, 2.0**-10, 2.0**-17, 3 * 2.0**-18])
    return torch.cat([x, ties, -ties, special])


def test_e4m3_matches_torch_float8_e4m3fn_cast():
    x = awkward_float32(4000, 0)
    # torch turns |x| > 464 into NaN (it has no saturation); inside that range every value must agree.
    x = torch.cat([x[x.abs() <= 464], torch.tensor([448.0, 456.0, 464.0, -460.0, 447.9])])
    assert same_bits(quantize_reference(x, "fp:e4m3:unscaled"), x.to(torch.float8_e4m3fn).float())


def test_e5m2_matches_torch_float8_e5m2_cast_with_inf_overflow():
    x = torch.cat(
        [awkward_float32(4000, 1), torch.tensor([57344.0, 61439.0, 61440.0, 1e6, float("inf"), float("nan")])]
    )
    assert same_bits(quantize_reference(x, "fp:e5m2:unscaled:inf"), x.to(torch.float8_e5m2).float())


def test_e5m2_saturates_where_the_torch_cast_overflows():
    x = torch.tensor([1e5, -1e6, float("inf"), 57344.0, 61439.0])
    assert quantize_reference(x, "fp:e5m2:unscaled").tolist() == [57344.0, -57344.0, 57344.0, 57344.0, 57344.0]
    assert torch.isinf(x.to(torch.float8_e5m2).float()[:3]).all()


@pytest.mark.parametrize(
    ("text", "dtype"), [("fp:e5m10:unscaled:ieee:inf", torch.float16), ("fp:e8m7:unscaled:ieee:inf", torch.bfloat16)]
)
def test_ieee_half_formats_match_torch_casts(text, dtype):
    x = torch.cat([awkward_float32(4000, 2), torch.tensor([65504.0, 65519.0, 65520.0, 3e38, float("inf")])])
    assert same_bits(quantize_reference(x, text), x.to(dtype).float())


@pytest.mark.parametrize(
    ("E", "M", "top_code", "expected_max", "expected_min_subnormal"),
    [
        (2, 1, "ocp", 6.0, 0.5),
        (2, 3, "ocp", 7.5, 0.125),
        (3, 2, "ocp", 28.0, 0.0625),
        (4, 3, "ocp", 448.0, 2.0**-9),
        (4, 3, "unreserved", 480.0, 2.0**-9),
        (4, 3, "ieee", 240.0, 2.0**-9),
        (5, 2, "ocp", 57344.0, 2.0**-16),
        (5, 10, "ieee", 65504.0, 2.0**-24),
        (1, 1, "ocp", 3.0, 1.0),
        (0, 3, "ocp", 0.875, 0.125),
    ],
)
def test_format_extremes(E, M, top_code, expected_max, expected_min_subnormal):
    fmt = fp_format(E, M, top_code)
    assert (fmt.max_value, fmt.min_subnormal) == (expected_max, expected_min_subnormal)
    values = fmt.values()
    assert values[-1] == expected_max and values[1] == expected_min_subnormal


def test_hand_computed_value_tables():
    assert fp_format(2, 1).values().tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert fp_format(1, 1).values().tolist() == [0, 1, 2, 3]
    assert fp_format(3, 1).values().tolist() == [0, 0.125, 0.25, 0.375, 0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24]
    assert fp_format(3, 1, "ieee").values().tolist() == [0, 0.125, 0.25, 0.375, 0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8, 12]
    assert len(fp_format(4, 3).values()) == 127  # 128 positive codes, one of them NaN


def test_e2m1_rounding_by_hand():
    x = torch.tensor([0.24, 0.25, 0.26, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.1, 7.0, -2.5, -0.1])
    assert round_to_format(x, fp_format(2, 1)).tolist() == [0, 0, 0.5, 1, 1, 2, 2, 4, 4, 6, 6, -2, -0.0]
    away = round_to_format(x, fp_format(2, 1), rounding="nearest-away")
    assert away.tolist() == [0, 0.5, 0.5, 1, 1.5, 2, 3, 4, 6, 6, 6, -3, -0.0]


def brute_force_round(x, fmt, rounding, uniform=None):
    """Independent reference: pick the neighbour on the enumerated grid (values()), saturating."""
    grid = fmt.values()
    a = x.to(torch.float64).abs().clamp(max=fmt.max_value)
    index = torch.searchsorted(grid, a, right=True) - 1
    low = grid[index]
    high = grid[torch.clamp(index + 1, max=len(grid) - 1)]
    spacing = torch.where(high > low, high - low, 1.0)
    fraction = (a - low) / spacing
    if rounding == "nearest-even":
        up = (fraction > 0.5) | ((fraction == 0.5) & (torch.round(high / spacing) % 2 == 0))
    elif rounding == "nearest-away":
        up = fraction >= 0.5
    else:
        up = uniform.to(torch.float64) < fraction
    result = torch.where(up, high, low)
    result = torch.where(torch.isnan(x), float("nan"), result)
    return torch.copysign(result, x.to(torch.float64)).to(torch.float32)


formats = st.tuples(st.integers(0, 5), st.integers(0, 4), st.sampled_from(["ocp", "ieee", "unreserved"])).filter(
    lambda f: f[0] + f[1] > 0 and not (f[2] == "ieee" and f[0] < 2) and not (f[2] == "ocp" and f[0] >= 5 and f[0] < 2)
)


@settings(max_examples=150, deadline=None)
@given(
    fmt_fields=formats,
    rounding=st.sampled_from(["nearest-even", "nearest-away", "stochastic"]),
    values=st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=40),
    magnitude=st.sampled_from([2.0**-140, 2.0**-20, 1.0, 2.0**20, 2.0**100]),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_reference_equals_brute_force_grid(fmt_fields, rounding, values, magnitude, seed):
    fmt = fp_format(*fmt_fields)
    x = torch.tensor(values, dtype=torch.float32) * magnitude
    uniform = uniform_like(x, seed)
    assert same_bits(round_to_format(x, fmt, rounding, uniform=uniform), brute_force_round(x, fmt, rounding, uniform))


def test_block_scaling_maps_each_block_max_onto_the_format_max():
    x = torch.randn(4, 96, generator=torch.Generator().manual_seed(3))
    params = choose_qparams(x, "fp:e2m1:b32")
    assert params.scale.shape == (4, 3) and params.zero_point is None
    amax = x.abs().reshape(4, 3, 32).amax(dim=-1)
    assert same_bits(params.scale, torch.full_like(amax, 6.0) / amax)
    out = quantize_reference(x, "fp:e2m1:b32")
    scaled = (out.reshape(4, 3, 32) * params.scale.unsqueeze(-1)).reshape(-1)
    grid = fp_format(2, 1).values()
    nearest = grid[(scaled.abs().to(torch.float64)[:, None] - grid).abs().argmin(dim=1)]
    # q / S · S is the grid value up to the float32 rounding of the division and the multiplication.
    assert torch.allclose(scaled.abs().to(torch.float64), nearest, rtol=2.0**-22, atol=0)
    block_max = out.abs().reshape(4, 3, 32).amax(dim=-1)
    assert torch.allclose(block_max, amax, rtol=1e-6)


def test_pow2_and_e8m0_scales_by_hand():
    fmt = fp_format(2, 1)
    amax = torch.tensor([5.0, 6.0, 0.1, 0.0, 1e-40])
    # fp32: 6/amax. pow2: largest 2^k <= 6/amax. e8m0: 2^(2 - floor(log2 amax)) (MX, e_max of E2M1 = 2).
    assert block_scale(amax, fmt, "pow2").tolist() == [1.0, 1.0, 32.0, 1.0, 2.0**127]
    assert block_scale(amax, fmt, "e8m0").tolist() == [1.0, 1.0, 64.0, 1.0, 2.0**127]
    x = torch.tensor([[5.0, 1.1, -2.6, 0.2]])
    assert quantize_reference(x, "fp:e2m1:channel:e8m0").tolist() == [[4.0, 1.0, -3.0, 0.0]]
    assert quantize_reference(x, "fp:e2m1:channel:pow2").tolist() == [[4.0, 1.0, -3.0, 0.0]]
    x = torch.tensor([[7.9, 1.0]])  # MX: 7.9 / 2^0 saturates at E2M1's 6
    assert quantize_reference(x, "fp:e2m1:channel:e8m0").tolist() == [[6.0, 1.0]]


def test_zero_blocks_nan_and_inf():
    x = torch.zeros(2, 64)
    x[1, 32:36] = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    for text in ("fp:e4m3:b32", "fp:e2m1:b32:e8m0", "fp:e5m2:b32:pow2"):
        out = quantize_reference(x, text)
        assert torch.equal(out[0], torch.zeros(64)) and torch.equal(out[1, 36:], torch.zeros(28))
        assert out[1, 32] == 1.0 and torch.isnan(out[1, 33])
        # Inf saturates to the format max, which dequantizes to about the block's finite amax (1.0), within the factor of 2 a power-of-two scale allows.
        assert out[1, 34] == -out[1, 35] and 0.9 < out[1, 34] <= 2.0
    out = quantize_reference(x, "fp:e5m2:b32:inf")
    assert out[1, 34] == float("inf") and out[1, 35] == -float("inf")


@pytest.mark.parametrize(
    "text", ["fp:e4m3:unscaled", "fp:e2m1:b32:pow2", "fp:e3m2:channel:e8m0", "fp:e5m2:tensor:pow2"]
)
def test_idempotent_when_scaling_is_exact(text):
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(4)) * 10
    once = quantize_reference(x, text)
    assert torch.equal(quantize_reference(once, text), once)


def test_stochastic_rounding_is_unbiased_on_e2m1():
    x = torch.full((64, 1024), 2.5)
    draws = torch.stack(
        [round_to_format(x, fp_format(2, 1), "stochastic", uniform=uniform_like(x, s)) for s in range(4)]
    )
    assert set(draws.unique().tolist()) == {2.0, 3.0}
    assert abs(draws.mean().item() - 2.5) < 0.01


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.floats(-1.0, 1.0, width=32), min_size=32, max_size=32),
    exponent=st.integers(-100, 100),
    text=st.sampled_from(["fp:e4m3:b16", "fp:e2m1:b8", "fp:e3m2:channel", "fp:e5m2:b16:nearest-away"]),
)
def test_property_fp32_block_scaling_is_idempotent(values, exponent, text):
    x = torch.tensor(values).reshape(2, 16) * 2.0**exponent
    once = quantize_reference(x, text)
    assert torch.equal(quantize_reference(once, text), once)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.integers(1, 4),
    blocks=st.integers(1, 3),
    block=st.sampled_from([1, 4, 32]),
    fmt_fields=st.sampled_from([(4, 3, "ocp"), (2, 1, "ocp"), (3, 2, "ocp"), (5, 2, "ocp"), (2, 3, "ocp")]),
    magnitude=st.sampled_from([2.0**-140, 2.0**-60, 1.0, 2.0**60, 2.0**120]),
    zero_block=st.booleans(),
    data=st.data(),
)
def test_property_block_scaled_reference_equals_brute_force(
    rows, blocks, block, fmt_fields, magnitude, zero_block, data
):
    n = rows * blocks * block
    values = data.draw(
        st.lists(st.floats(-1.0, 1.0, width=32) | st.sampled_from([float("nan"), float("inf")]), min_size=n, max_size=n)
    )
    x = (torch.tensor(values) * magnitude).reshape(rows, blocks * block)
    if zero_block:
        x[0, :block] = 0.0
    E, M, top_code = fmt_fields
    fmt = fp_format(E, M, top_code)
    text = f"fp:e{E}m{M}:b{block}"
    grouped = x.reshape(rows, blocks, block)
    amax = torch.where(torch.isfinite(grouped), grouped.abs(), 0.0).amax(dim=-1, keepdim=True)
    scale = torch.where(
        amax > 0, torch.clamp(torch.full_like(amax, fmt.max_value) / amax, max=3.4028234663852886e38), 1.0
    )
    expected = brute_force_round((grouped * scale).reshape(-1), fmt, "nearest-even").reshape(grouped.shape) / scale
    out = quantize_reference(x, text)
    assert same_bits(out, expected.reshape(x.shape))
    if zero_block:
        assert torch.equal(out[0, :block], torch.zeros(block)) and not torch.signbit(out[0, :block]).any()
    assert torch.equal(torch.isnan(out), torch.isnan(x))
