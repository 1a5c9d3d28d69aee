"""NVFP4, `fp:e2m1:b16:e4m3`: a slow reference written out from NVIDIA's definition, one hand-worked example, and
every path (the reference, the C++ kernel, the compiled and eager fast paths, the dispatcher, QAT, PTQ) against the
slow reference bit for bit on awkward shapes."""

import bisect
import importlib.util

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import awkward_rows, same_bits
from transformers import LlamaConfig, LlamaForCausalLM

from qscaling.quant import choose_qparams, cpu_kernel, dispatch, fp_format, parse_spec, quantize, quantize_reference
from qscaling.quant.fast import quantize_fast, quantize_fp_eager, supports
from qscaling.quant.gptq import gptq_quantize_weight
from qscaling.quant.ptq import linear_sites, quantization_config, quantize_model
from qscaling.quant.qat import apply_training_precision, clamp_mask_by_codes, fake_quantize_ste

NVFP4 = "fp:e2m1:b16:e4m3"
BLOCK = 16
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]  # index = code, so an even index is an even mantissa
# E4M3 (OCP, float8_e4m3fn): exponent code 0 is subnormal (m/8 · 2^-6), the code S.1111.111 is NaN, bias 7.
E4M3 = [m / 8 * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7) for e in range(16) for m in range(8)][:-1]
F32 = np.float32
F32_MAX = F32(np.finfo(np.float32).max)


def nearest_even(value: float, grid: list[float]) -> float:
    """The value of `grid` (ascending, from 0) nearest to `value` >= 0, ties to the even index; beyond it, its
    largest (saturation)."""
    if value >= grid[-1]:
        return grid[-1]
    below = bisect.bisect_right(grid, value) - 1
    low, high = grid[below], grid[below + 1]
    if value - low != high - value:
        return low if value - low < high - value else high
    return low if below % 2 == 0 else high


def finite_amax(values: np.ndarray) -> np.float32:
    finite = np.abs(values[np.isfinite(values)])
    return F32(finite.max()) if finite.size else F32(0.0)


def slow_nvfp4(x: torch.Tensor) -> torch.Tensor:
    """NVFP4 fake quantization element by element, in numpy float32 scalars, in TransformerEngine's order of
    operations (quantization_ref_nvfp4.py): G = min(6·448 / amax(x), max), block scale = E4M3(min(amax(block) ·
    (G·(1/6)), 448)), element = E2M1(clamp(x · min(1/(scale·(1/G)), max), ±6)), value = (element·scale)·(amax(x) /
    (6·448)). Blocks of 16 along the last dim, the last one of a row shorter; NaN stays NaN, ±Inf saturates."""
    values = x.detach().to(torch.float32).reshape(-1, x.shape[-1] if x.dim() else 1).numpy()
    out = np.empty_like(values)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        tensor_amax, largest = finite_amax(values), F32(6 * 448)
        global_encode = min(largest / tensor_amax, F32_MAX)
        global_decode, multiplier = F32(1) / global_encode, global_encode * (F32(1) / F32(6))
        tensor_scale = tensor_amax / largest
        for row, start in np.ndindex(values.shape[0], -(-values.shape[1] // BLOCK)):
            block = values[row, start * BLOCK : (start + 1) * BLOCK]
            scale = F32(nearest_even(float(min(finite_amax(block) * multiplier, F32(448))), E4M3))
            encode = min(F32(1) / (scale * global_decode), F32_MAX)
            for column, value in enumerate(block, start * BLOCK):
                if np.isnan(value):
                    out[row, column] = np.nan
                    continue
                scaled = value * encode
                element = np.copysign(F32(nearest_even(min(abs(float(scaled)), 6.0), E2M1)), scaled)
                out[row, column] = (element * scale) * tensor_scale
    return torch.from_numpy(out).reshape(x.shape)


def test_the_grids_are_the_formats():
    assert fp_format(2, 1).values().tolist() == E2M1
    assert fp_format(4, 3).values().tolist() == E4M3 and (E4M3[1], E4M3[-1]) == (2.0**-9, 448.0)
    e4m3 = torch.tensor(E4M3, dtype=torch.float32)
    assert torch.equal(e4m3.to(torch.float8_e4m3fn).to(torch.float32), e4m3)


def test_the_spec_string_round_trips_and_bad_ones_name_their_cause():
    spec = parse_spec("FP:E2M1:B16:E4M3")
    assert str(spec) == NVFP4 and parse_spec(str(spec)) == spec and spec.fp_scale == "e4m3"
    for text, message in (
        ("fp:e2m1:unscaled:e4m3", "fp scale 'e4m3' needs a scaled granularity"),
        ("fp:e5m2:b16:e4m3:inf", "e4m3 scales saturate"),
        ("fp:e8m3:b16:e4m3", "e4m3 scales need the format's max times 448 within float32"),
        ("fp:e2m1:b16:e4m3:e8m0", "option fp_scale given twice"),
        ("fp:e2m1:b16:e5m3", "unknown option 'e5m3'"),
    ):
        with pytest.raises(ValueError, match=f"quant spec '{text}': {message}"):
            parse_spec(text)


def test_a_hand_worked_example():
    """amax(x) = 2688 makes G = 1 and the tensor scale 1. Row 0's block: scale E4M3(2688/6) = 448, so elements are
    x/448 rounded to E2M1: 1344 -> 3, 100 -> 0.22 -> 0, -700 -> -1.5625 -> -1.5, 1000 -> 2.23 -> 2. Row 1's block:
    10/6 = 1.667 rounds to the E4M3 scale 1.625 (between 1.625 and 1.75), so 10/1.625 = 6.15 saturates to 6 -> 9.75,
    -5 -> -3.08 -> -3 -> -4.875, 1 -> 0.615 -> 0.5 -> 0.8125, and -0.0 stays -0.0."""
    x = torch.zeros(2, 16)
    x[0, :5] = torch.tensor([2688.0, 1344.0, 100.0, -700.0, 1000.0])
    x[1, :4] = torch.tensor([10.0, -5.0, 1.0, -0.0])
    expected = torch.zeros(2, 16)
    expected[0, :5] = torch.tensor([2688.0, 1344.0, 0.0, -672.0, 896.0])
    expected[1, :4] = torch.tensor([9.75, -4.875, 0.8125, -0.0])
    params = choose_qparams(x, NVFP4)
    assert params.block_scale.tolist() == [[448.0], [1.625]] and params.tensor_scale.item() == 1.0
    assert same_bits(slow_nvfp4(x), expected)
    assert same_bits(quantize_reference(x, NVFP4), expected)


def awkward_tensors() -> dict[str, torch.Tensor]:
    """Shapes and contents where NVFP4 can go wrong, each named."""
    generator = torch.Generator().manual_seed(0)
    mixed = torch.randn(6, 48, generator=generator)
    mixed[0, 0] = 1e4  # the tensor's amax: its G leaves small blocks with subnormal or zero E4M3 scales
    mixed[1, :16] = torch.randn(16, generator=generator) * 0.1  # scale ~ 0.0045: E4M3 subnormal
    mixed[2, :16] = torch.randn(16, generator=generator) * 1e-3  # scale below 2^-10: rounds to 0
    mixed[3, :16] = 0.0  # an all-zero block
    mixed[4, :4] = torch.tensor([float("inf"), -float("inf"), float("nan"), -0.0])
    mixed[5, :3] = torch.tensor([-1e-30, -0.0, 1e-45])  # round to -0, stay -0, a float32 subnormal
    return {
        "ragged last blocks (K = 37)": awkward_rows(5, 37, seed=1),
        "awkward rows, whole blocks": awkward_rows(8, 64, seed=2),
        "subnormal and zero scales, inf, nan, -0": mixed,
        "ragged with the same": mixed[:, :41].contiguous(),
        "all zeros": torch.zeros(3, 20),
        "negative zeros only": -torch.zeros(2, 16),
        "one element": torch.tensor([[-3.0]]),
        "a vector shorter than a block": torch.tensor([0.1, -7.0, 2.5]),
        "a scalar": torch.tensor(5.0),
        "three dims": torch.randn(2, 3, 40, generator=generator),
        "only inf": torch.tensor([[float("inf"), -float("inf")]]),
    }


AWKWARD = awkward_tensors()


def test_the_awkward_tensors_reach_subnormal_and_zero_scales():
    scales = choose_qparams(AWKWARD["subnormal and zero scales, inf, nan, -0"], NVFP4).block_scale
    assert ((scales > 0) & (scales < 2.0**-6)).any() and (scales == 0).sum() >= 2  # subnormal; zero block; underflow


@pytest.mark.parametrize("name", list(AWKWARD))
def test_the_reference_is_the_definition(name):
    x = AWKWARD[name]
    assert same_bits(quantize_reference(x, NVFP4), slow_nvfp4(x))


@pytest.mark.skipif(not cpu_kernel.available(), reason="the C++ kernel cannot be built here")
@pytest.mark.parametrize("name", [name for name, x in AWKWARD.items() if x.dim()])
def test_the_cpp_kernel_is_the_definition_and_gives_the_clipped_ste_mask(name):
    x, spec = AWKWARD[name], parse_spec(NVFP4)
    mask = torch.empty(x.shape, dtype=torch.bool)
    assert same_bits(cpu_kernel.quantize_cpu(x, spec, mask=mask), slow_nvfp4(x))
    assert torch.equal(mask, clamp_mask_by_codes(x, spec))


@pytest.mark.parametrize("name", [name for name, x in AWKWARD.items() if x.dim() and x.shape[-1] % BLOCK == 0])
def test_the_compiled_and_eager_paths_are_the_definition_on_whole_blocks(name):
    x, spec = AWKWARD[name], parse_spec(NVFP4)
    assert same_bits(quantize_fp_eager(x, spec), slow_nvfp4(x))
    assert same_bits(quantize_fast(x, spec), slow_nvfp4(x))


@pytest.mark.parametrize("without_kernel", [False, True])
def test_quantize_is_the_definition_on_every_tensor(monkeypatch, without_kernel):
    if without_kernel:
        monkeypatch.setattr(dispatch.cpu_kernel, "available", lambda: False)
    for name, x in AWKWARD.items():
        assert same_bits(quantize(x, NVFP4), slow_nvfp4(x)), name
        bf16 = x.to(torch.bfloat16)  # quantized in float32, then cast back
        assert same_bits(quantize(bf16, NVFP4).float(), slow_nvfp4(bf16).bfloat16().float()), name


def test_ragged_blocks_fall_back_to_the_reference_without_the_kernel(monkeypatch):
    """The fast paths take whole blocks only; with no C++ kernel a ragged tensor goes to the reference."""
    monkeypatch.setattr(dispatch.cpu_kernel, "available", lambda: False)
    calls = []
    monkeypatch.setattr(dispatch, "quantize_reference", lambda x, spec: calls.append(x.shape) or slow_nvfp4(x))
    ragged = AWKWARD["ragged last blocks (K = 37)"]
    assert not supports(ragged, parse_spec(NVFP4))
    quantize(ragged, NVFP4)
    assert calls == [ragged.shape]


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not importable")
def test_the_triton_kernel_leaves_nvfp4_to_the_reference():
    from qscaling.kernels import fake_quant  # triton is optional

    x = torch.randn(4, 32)
    assert not fake_quant.supports(x, parse_spec(NVFP4)) and fake_quant.supports(x, parse_spec("fp:e2m1:b32:e8m0"))
    with pytest.raises(ValueError, match="quantize_triton: needs"):
        fake_quant.quantize_triton(x, parse_spec(NVFP4))


def test_qat_forward_is_nvfp4_and_the_clipped_ste_passes_what_did_not_saturate():
    x = AWKWARD["subnormal and zero scales, inf, nan, -0"].clone().nan_to_num(posinf=7e4, neginf=-7e4)
    x.requires_grad_(True)
    y = fake_quantize_ste(x, NVFP4)
    assert same_bits(y.detach(), slow_nvfp4(x.detach()))
    y.sum().backward()
    inside = clamp_mask_by_codes(x.detach(), parse_spec(NVFP4))
    assert torch.equal(x.grad, inside.float()) and not inside.all()


def _tiny_llama():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2)  # fmt: skip
    return LlamaForCausalLM(config)


def test_training_in_nvfp4_quantizes_weights_and_activations():
    model = _tiny_llama()
    apply_training_precision(model, {"weights": NVFP4, "activations": NVFP4})
    q_proj = model.model.layers[0].self_attn.q_proj
    x = torch.randn(2, 7, 32)
    assert torch.equal(q_proj(x), F.linear(slow_nvfp4(x), slow_nvfp4(q_proj.weight)))
    model(torch.randint(0, 64, (2, 8)), labels=torch.randint(0, 64, (2, 8))).loss.backward()
    assert torch.isfinite(q_proj.weight.grad).all() and q_proj.weight.grad.abs().sum() > 0


def test_ptq_rtn_and_gptq_give_nvfp4_weights():
    model = _tiny_llama().eval()
    before = {site.name: site.module.weight.detach().clone() for site in linear_sites(model)}
    config = quantization_config("rtn", NVFP4)
    quantize_model(model, config)
    for site in (site for site in linear_sites(model) if site.role in config.roles):
        assert same_bits(site.module.weight.detach(), slow_nvfp4(before[site.name])), site.name
    # GPTQ with H = I propagates no error: it is RTN, each group's scale beside the whole weight's tensor scale.
    W = torch.randn(24, 64) * torch.linspace(0.01, 3.0, 64)
    for static_groups in (False, True):
        gptq, _ = gptq_quantize_weight(W, torch.eye(64), NVFP4, block_size=16, static_groups=static_groups)
        assert same_bits(gptq, slow_nvfp4(W)), static_groups
