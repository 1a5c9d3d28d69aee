"""Triton fake-quant kernels against the reference, bit for bit; on CPU through TRITON_INTERPRET=1."""

import importlib.util

import pytest
import torch

if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not importable: the Triton kernels are not tested", allow_module_level=True)

import triton.language as tl
from conftest import awkward_rows, same_bits
from triton.runtime.interpreter import InterpretedFunction

from qscaling.kernels import fake_quant
from qscaling.quant import parse_spec, quantize_reference

# tests/conftest.py sets TRITON_INTERPRET=1 on machines without a GPU before anything imports triton.
assert torch.cuda.is_available() or isinstance(tl.standard.max, InterpretedFunction), (
    "triton was imported before TRITON_INTERPRET=1 was set"
)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


SPECS = [
    "int4:g32",
    "int3:g32:asym",
    "int8:token:mulinv",
    "int4:channel:gptq:nearest-away",
    "int2:tensor:stochastic:seed=9",
    "int3:g32:gptq:narrow",
    "fp:e4m3:b32",
    "fp:e2m1:b32:e8m0",
    "fp:e3m2:b32:stochastic:seed=4000000000",
    "fp:e5m2:channel:pow2:inf",
    "fp:e2m3:tensor:nearest-away",
    "fp:e4m3:unscaled:unreserved",
    "fp:e8m10:channel:ieee",
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter's numpy warns on Inf/NaN lanes
@pytest.mark.parametrize("text", SPECS)
def test_fused_kernel_matches_reference(text):
    x = awkward_rows(6, 64, seed=len(text), device=DEVICE)
    spec = parse_spec(text)
    assert same_bits(fake_quant.quantize_triton(x, spec), quantize_reference(x, spec))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("text", ["int4:channel:asym", "fp:e4m3:channel:stochastic"])
def test_rows_longer_than_a_tile_take_reference_scales(text, monkeypatch):
    monkeypatch.setattr(fake_quant, "MAX_FUSED_GROUP", 16)
    x = awkward_rows(4, 48, seed=7, device=DEVICE)
    spec = parse_spec(text)
    assert same_bits(fake_quant.quantize_triton(x, spec), quantize_reference(x, spec))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("text", ["int4:g32", "fp:e2m1:b32", "int8:tensor"])
def test_kernel_writes_into_out(text):
    x = awkward_rows(6, 64, seed=3, device=DEVICE)
    out = torch.full_like(x, 7.0)
    spec = parse_spec(text)
    assert fake_quant.quantize_triton(x, spec, out=out) is out
    assert same_bits(out, quantize_reference(x, spec))


def test_kernel_refuses_ragged_groups():
    spec = parse_spec("int4:g32")
    assert not fake_quant.supports(torch.zeros(2, 48), spec)
    with pytest.raises(ValueError, match="quantize_triton: needs a contiguous float32 tensor"):
        fake_quant.quantize_triton(torch.zeros(2, 48), spec)
