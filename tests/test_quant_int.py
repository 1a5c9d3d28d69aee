"""INT reference: bit-exact against torch.fake_quantize_* and an independent GPTQ-style quantizer."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qscaling.quant import choose_qparams, fake_quantize_with, parse_spec, quantize_reference


def same_bits(a, b):
    """Bit-for-bit equality of two float tensors (NaN payloads aside)."""
    assert a.shape == b.shape and a.dtype == b.dtype
    both_nan = torch.isnan(a) & torch.isnan(b)
    a_bits = a.contiguous().view(torch.int32 if a.dtype == torch.float32 else torch.int16)
    b_bits = b.contiguous().view(torch.int32 if b.dtype == torch.float32 else torch.int16)
    return bool(((a_bits == b_bits) | both_nan).all())


def torch_fake_quant_groups(x, bits, group, symmetric):
    """torch.fake_quantize_per_channel_affine over groups of `group` elements of each row (x·(1/s))."""
    rows = x.reshape(-1, group)
    finite = rows.abs().amax(dim=1)
    if symmetric:
        scale = torch.clamp(finite / (2 ** (bits - 1) - 1), min=torch.finfo(torch.float32).tiny)
        zero = torch.zeros(rows.shape[0], dtype=torch.int32)
        q_min, q_max = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    else:
        low = rows.amin(dim=1).clamp(max=0)
        high = rows.amax(dim=1).clamp(min=0)
        scale = torch.clamp((high - low) / (2**bits - 1), min=torch.finfo(torch.float32).tiny)
        zero = torch.clamp(torch.round(-low / scale), 0, 2**bits - 1).to(torch.int32)
        q_min, q_max = 0, 2**bits - 1
    out = torch.fake_quantize_per_channel_affine(rows, scale, zero, 0, q_min, q_max)
    return out.reshape(x.shape)


def gptq_quantizer(x, bits, group):
    """GPTQ's symmetric quantizer (Frantar et al., quant.py) written out: zero at (maxq+1)/2, x/s."""
    rows = x.reshape(-1, group)
    maxq = 2**bits - 1
    xmax = rows.abs().amax(dim=1, keepdim=True)
    scale = (xmax - (-xmax)) / maxq
    zero = torch.full_like(scale, (maxq + 1) / 2)
    q = torch.clamp(torch.round(rows / scale) + zero, 0, maxq)
    return (scale * (q - zero)).reshape(x.shape)


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("granularity", ["channel", "g32"])
def test_matches_torch_fake_quantize_per_channel_affine(bits, symmetric, granularity):
    x = torch.randn(16, 128, generator=torch.Generator().manual_seed(bits)) * 3
    spec = parse_spec(f"int{bits}:{granularity}:{'sym' if symmetric else 'asym'}:mulinv")
    group = 128 if granularity == "channel" else 32
    assert same_bits(quantize_reference(x, spec), torch_fake_quant_groups(x, bits, group, symmetric))


@pytest.mark.parametrize("symmetric", [True, False])
def test_tensor_granularity_matches_torch_per_tensor_affine(symmetric):
    x = torch.randn(8, 40, generator=torch.Generator().manual_seed(1)) + 0.5
    spec = parse_spec(f"int4:tensor:{'sym' if symmetric else 'asym'}:mulinv")
    params = choose_qparams(x, spec)
    assert params.scale.shape == (1, 1)
    q_min, q_max = (-8, 7) if symmetric else (0, 15)
    expected = torch.fake_quantize_per_tensor_affine(x, float(params.scale), int(params.zero_point), q_min, q_max)
    assert same_bits(quantize_reference(x, spec), expected)


@pytest.mark.parametrize("bits", [3, 4])
def test_gptq_convention_matches_gptq_quantizer(bits):
    x = torch.randn(12, 256, generator=torch.Generator().manual_seed(bits))
    assert same_bits(quantize_reference(x, f"int{bits}:g128:gptq"), gptq_quantizer(x, bits, 128))


def test_hand_worked_int4_example():
    x = torch.tensor([[7.0, -3.5, 1.0, 0.4, -7.0, 2.5]])
    # absmax: scale 7/7 = 1; round half to even: -3.5 -> -4, 2.5 -> 2.
    assert quantize_reference(x, "int4:channel").tolist() == [[7.0, -4.0, 1.0, 0.0, -7.0, 2.0]]
    assert quantize_reference(x, "int4:channel:nearest-away").tolist() == [[7.0, -4.0, 1.0, 0.0, -7.0, 3.0]]
    # gptq: scale 14/15, codes -8..7: 7 clips to 7·14/15.
    step = torch.tensor(14.0) / 15
    expected = (torch.tensor([7.0, -4.0, 1.0, 0.0, -8.0, 3.0]) * step).tolist()
    assert quantize_reference(x, "int4:channel:gptq").tolist() == [expected]


def test_division_conventions_differ_at_ties():
    # amax 7.782218 gives s = amax/7; x = 4.5·s lands on a tie that x/s and x·(1/s) break differently.
    amax = torch.tensor(7.782217979431152)
    x = torch.stack([amax, 4.5 * (amax / 7)])[None]
    divided, multiplied = quantize_reference(x, "int4:channel"), quantize_reference(x, "int4:channel:mulinv")
    assert divided[0, 1] != multiplied[0, 1]
    assert abs(divided[0, 1] - multiplied[0, 1]) == pytest.approx((amax / 7).item())


def test_zero_groups_nan_and_inf():
    x = torch.zeros(2, 64)
    x[1, 32:] = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")] * 8)
    out = quantize_reference(x, "int4:g32")
    assert torch.equal(out[0], torch.zeros(64)) and torch.equal(out[1, :32], torch.zeros(32))
    tail = out[1, 32:36]
    assert tail[0] == 1.0 and torch.isnan(tail[1]) and tail[2] == 1.0 and tail[3] == -8 / 7


def test_negative_zero_becomes_positive_zero_like_torch():
    x = torch.tensor([[-0.0, -1e-9, 1.0]])
    out = quantize_reference(x, "int8:channel")
    assert not torch.signbit(out[0, :2]).any()


def test_column_by_column_with_fixed_group_params_equals_whole_tensor():
    w = torch.randn(8, 96, generator=torch.Generator().manual_seed(2))
    spec = parse_spec("int3:g32:asym")
    whole = quantize_reference(w, spec)
    params = choose_qparams(w, spec)
    assert params.scale.shape == (8, 3) and params.zero_point.shape == (8, 3)
    columns = []
    for j in range(96):
        group_params = choose_qparams(w[:, j - j % 32 : j - j % 32 + 32], spec)
        assert group_params.scale.shape == (8, 1)
        columns.append(fake_quantize_with(w[:, j : j + 1], group_params, spec))
    assert torch.equal(torch.cat(columns, dim=1), whole)


def test_ragged_last_group_acts_like_zero_padding():
    x = torch.randn(4, 100, generator=torch.Generator().manual_seed(3))
    padded = torch.nn.functional.pad(x, (0, 28))
    assert torch.equal(quantize_reference(x, "int4:g32"), quantize_reference(padded, "int4:g32")[:, :100])
    assert choose_qparams(x, "int4:g32").scale.shape == (4, 4)


def test_other_dtypes_keep_their_dtype():
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(4))
    for dtype in (torch.bfloat16, torch.float16, torch.float64):
        out = quantize_reference(x.to(dtype), "int4:g32")
        assert out.dtype == dtype
        assert torch.equal(out, quantize_reference(x.to(dtype).float(), "int4:g32").to(dtype))


def test_stochastic_rounding_is_seeded_unbiased_and_stays_on_the_grid():
    x = torch.full((4, 1024), 0.3)
    x[:, 0] = 7.0  # fixes the scale at 1
    draws = torch.stack([quantize_reference(x, f"int4:channel:stochastic:seed={seed}") for seed in range(8)])
    assert torch.equal(draws[0], quantize_reference(x, "int4:channel:stochastic"))
    assert not torch.equal(draws[0], draws[1])
    assert set(draws[:, :, 1:].unique().tolist()) == {0.0, 1.0}
    assert abs(draws[:, :, 1:].mean().item() - 0.3) < 0.01
    negative = quantize_reference(-x, "int4:channel:stochastic")
    assert torch.equal(negative, -draws[0])


unit_floats = st.floats(-1.0, 1.0, width=32)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.integers(1, 5),
    groups=st.integers(1, 4),
    group=st.sampled_from([1, 2, 8, 32]),
    bits=st.integers(2, 8),
    symmetric=st.booleans(),
    magnitude=st.sampled_from([1e-42, 1e-30, 1e-3, 1.0, 1e3, 1e30]),
    data=st.data(),
)
def test_property_matches_torch_at_the_same_convention(rows, groups, group, bits, symmetric, magnitude, data):
    values = data.draw(st.lists(unit_floats, min_size=rows * groups * group, max_size=rows * groups * group))
    x = torch.tensor(values, dtype=torch.float32).reshape(rows, groups * group)
    x = x * magnitude
    spec = parse_spec(f"int{bits}:g{group}:{'sym' if symmetric else 'asym'}:mulinv")
    assert same_bits(quantize_reference(x, spec), torch_fake_quant_groups(x, bits, group, symmetric))
    # Every output is an integer multiple of its group's scale within the code range.
    params = choose_qparams(x, spec)
    codes = quantize_reference(x, spec).reshape(rows, groups, group) / params.scale.unsqueeze(-1)
    assert torch.allclose(codes, codes.round(), atol=1e-3)
    assert math.isfinite(codes.abs().max().item())


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(unit_floats, min_size=32, max_size=32),
    exponent=st.integers(-100, 100),
    text=st.sampled_from(["int4:g8", "int8:g8:mulinv", "int3:channel", "int2:g16:nearest-away"]),
)
def test_property_symmetric_absmax_is_idempotent(values, exponent, text):
    # The block maximum maps to the top code and back to itself, so the scale, and every code, is kept.
    x = torch.tensor(values).reshape(2, 16) * 2.0**exponent
    once = quantize_reference(x, text)
    assert torch.equal(quantize_reference(once, text), once)


def test_scalars_and_empty_tensors():
    # A lone value is its own absmax: it maps to the top code and back to itself.
    assert torch.equal(quantize_reference(torch.tensor(0.3), "int4:tensor"), torch.tensor(0.3))
    assert quantize_reference(torch.tensor(-2.0), "int8:channel").shape == ()
    assert quantize_reference(torch.zeros(0, 8), "int4:g4").shape == (0, 8)


def bitnet_weight_quant(w):
    """BitNet b1.58's weight quantizer (Ma et al. 2024, Eq. 1-3) written out: γ = mean|W|, RoundClip(W/γ, -1, 1)·γ."""
    gamma = w.abs().mean(dtype=torch.float64).to(torch.float32)
    return (torch.clamp(torch.round(w / gamma), -1, 1) + 0.0) * gamma  # + 0: integer codes have no -0


def test_int2_absmean_narrow_is_bitnet_ternary():
    w = torch.randn(96, 40, generator=torch.Generator().manual_seed(3))
    quantized = quantize_reference(w, "int2:tensor:absmean:narrow")
    assert same_bits(quantized, bitnet_weight_quant(w))
    assert set((quantized / w.abs().mean()).round().unique().tolist()) == {-1.0, 0.0, 1.0}


def test_absmean_scale_is_each_groups_own_mean_ragged_last_group_included():
    x = torch.tensor([[1.0, -3.0, 2.0, 4.0, 0.5, float("inf")], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    scale = choose_qparams(x, parse_spec("int4:g4:absmean")).scale
    # Row 0: (1 + 3 + 2 + 4) / 4 and, in the two-element last group, (0.5 + 0) / 2 (non-finite counts as 0);
    # an all-zero group takes the smallest normal float, so it quantizes to zeros.
    assert scale.tolist() == [[2.5, 0.25], [torch.finfo(torch.float32).tiny] * 2]


def test_narrow_drops_the_lowest_code():
    x = torch.tensor([[-1.0, -0.5, 0.2, 1.0 / 3]])
    full = quantize_reference(x, "int2:channel:gptq")  # scale 2/3: codes -2..1
    narrow = quantize_reference(x, "int2:channel:gptq:narrow")  # codes -1..1
    assert full[0, 0].item() == pytest.approx(-4 / 3) and narrow[0, 0].item() == pytest.approx(-2 / 3)
