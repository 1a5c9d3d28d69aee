"""The Inductor-compiled CPU path and the dispatcher give the reference's bits for every kind of spec."""

import pytest
import torch
from conftest import awkward_rows, same_bits

from qscaling.quant import dispatch, parse_spec, quantize, quantize_reference
from qscaling.quant.fast import quantize_fast, quantize_fp_eager, supports

SPECS = [
    "int4:g128",
    "int3:g32:asym",
    "int8:token:mulinv",
    "int4:channel:gptq:nearest-away",
    "int2:tensor:stochastic:seed=9",
    "int3:g32:gptq:narrow",
    "fp:e4m3:b32",
    "fp:e2m1:b32:e8m0",
    "fp:e2m1:b16:e4m3",
    "fp:e2m1:b16:e4m3:stochastic",
    "fp:e3m2:b128:stochastic",
    "fp:e5m2:channel:pow2:inf",
    "fp:e2m3:tensor:nearest-away",
    "fp:e4m3:unscaled:unreserved",
    "fp:e8m10:channel:ieee",
]


@pytest.fixture(autouse=True)
def without_the_cpp_kernel(monkeypatch):
    """These tests are about the paths the dispatcher takes where the C++ kernel (tests/test_cpu_kernel.py) is not
    built or does not cover a spec."""
    monkeypatch.setattr(dispatch.cpu_kernel, "available", lambda: False)


@pytest.mark.parametrize("text", SPECS)
def test_fast_path_matches_reference_bit_for_bit(text):
    spec = parse_spec(text)
    for rows in (8, 20):  # the second shape reuses the compilation (dynamic group count)
        x = awkward_rows(rows, 256, seed=rows)
        assert same_bits(quantize_fast(x, spec), quantize_reference(x, spec))


@pytest.mark.parametrize("text", [text for text in SPECS if text.startswith("fp:")])
def test_eager_fp_arithmetic_matches_reference_bit_for_bit(text):
    spec = parse_spec(text)
    x = awkward_rows(20, 256, seed=5)
    assert same_bits(quantize_fp_eager(x, spec), quantize_reference(x, spec))


def test_dispatcher_sends_small_fp_tensors_to_the_eager_arithmetic(monkeypatch):
    calls = []
    monkeypatch.setattr(
        dispatch.fast, "quantize_fp_eager", lambda x, spec: calls.append(str(spec)) or quantize_reference(x, spec)
    )
    small = torch.randn(64, 24)
    quantize(small, "fp:e1m1:token")
    quantize(small, "int4:token")  # INT: the reference is as fast
    quantize(small[:, :20], "fp:e4m3:b8")  # ragged groups: reference
    assert calls == ["fp:e1m1:token"]
    with pytest.raises(ValueError, match="quantize_fp_eager: needs an fp spec"):
        quantize_fp_eager(small, parse_spec("int4:token"))


def test_fast_path_writes_into_out():
    x = awkward_rows(4, 128, seed=1)
    out = torch.empty_like(x)
    assert quantize_fast(x, parse_spec("int4:g128"), out=out) is out
    assert same_bits(out, quantize_reference(x, "int4:g128"))


def test_fast_path_refuses_what_it_does_not_cover():
    spec = parse_spec("int4:g32")
    assert not supports(torch.zeros(4, 48), spec)  # ragged last group
    assert not supports(torch.zeros(4, 64).t(), spec)  # not contiguous
    assert not supports(torch.zeros(4, 64, dtype=torch.float16), spec)
    with pytest.raises(ValueError, match="quantize_fast: needs a contiguous float32 CPU tensor"):
        quantize_fast(torch.zeros(4, 48), spec)


@pytest.fixture
def fast_path_started(monkeypatch):
    """The dispatcher as in a process that has already quantized enough to start the compiled path."""
    monkeypatch.setattr(dispatch, "_reference_elements", dispatch.FAST_PATH_AFTER_ELEMENTS)


def test_dispatcher_sends_large_tensors_to_the_fast_path(monkeypatch, fast_path_started):
    calls = []
    monkeypatch.setattr(
        dispatch.fast, "quantize_fast", lambda x, spec, out: calls.append(spec) or quantize_reference(x, spec)
    )
    big = torch.randn(dispatch.MIN_ELEMENTS_FOR_FAST_PATH // 128, 128)
    quantize(big, "int4:g128")
    quantize(big[:, :100], "int4:g32")  # ragged groups: reference
    quantize(torch.randn(4, 128), "int4:g128")  # small: reference
    assert [str(spec) for spec in calls] == ["int4:g128"]


def test_a_process_starts_the_fast_path_only_once_the_reference_has_done_enough_work(monkeypatch):
    calls = []
    monkeypatch.setattr(
        dispatch.fast, "quantize_fast", lambda x, spec, out: calls.append(spec) or quantize_reference(x, spec)
    )
    big = torch.randn(dispatch.MIN_ELEMENTS_FOR_FAST_PATH // 128, 128)
    monkeypatch.setattr(dispatch, "_reference_elements", 0)
    monkeypatch.setattr(dispatch, "FAST_PATH_AFTER_ELEMENTS", 2 * big.numel())
    for _ in range(3):
        quantize(big, "int4:g128")
        quantize(torch.randn(4, 128), "int4:g128")  # small tensors neither count nor switch
    assert len(calls) == 1 and dispatch._reference_elements == 2 * big.numel()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_quantize_is_bit_exact_for_large_non_contiguous_and_low_precision_inputs(dtype, fast_path_started):
    x = awkward_rows(512, 256, seed=3)[:, :128].to(dtype)  # non-contiguous slice, 65536 elements
    for text in ("int4:g128", "fp:e4m3:b32"):
        out, expected = quantize(x, text), quantize_reference(x, text)
        assert out.dtype == dtype and out.shape == x.shape
        assert same_bits(out.float(), expected.float())


@pytest.mark.parametrize("started", [False, True], ids=["reference", "fast path"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("text", ["int4:g32", "int8:g128", "fp:e4m3:b32", "fp:e2m1:b32"])
def test_quantize_into_out_gives_the_reference_bits(text, dtype, started, monkeypatch):
    monkeypatch.setattr(dispatch, "_reference_elements", dispatch.FAST_PATH_AFTER_ELEMENTS if started else 0)
    x = awkward_rows(dispatch.MIN_ELEMENTS_FOR_FAST_PATH // 256, 256, seed=5).to(dtype)  # NaN, ±Inf, subnormals
    out = torch.full_like(x, 7.0)
    assert quantize(x, text, out=out) is out
    assert same_bits(out.float(), quantize_reference(x, text).float())


def test_the_fast_path_writes_into_out_itself(monkeypatch, fast_path_started):
    written_into = []

    def record(x, spec, out):
        written_into.append(out)
        return quantize_fast(x, spec, out=out)

    monkeypatch.setattr(dispatch.fast, "quantize_fast", record)
    x = torch.randn(dispatch.MIN_ELEMENTS_FOR_FAST_PATH // 128, 128)
    out = torch.empty_like(x)
    quantize(x, "int4:g128", out=out)
    transposed = torch.empty(x.shape[::-1]).t()  # x's shape, not contiguous: written through a copy
    quantize(x, "int4:g128", out=transposed)
    assert written_into[0] is out and written_into[1] is None
    assert same_bits(transposed.contiguous(), out)


def test_quantize_into_out_of_empty_and_scalar_tensors():
    for x in (torch.empty(0, 32), torch.tensor(1.3)):
        out = torch.full_like(x, 7.0)
        assert quantize(x, "int4:g32", out=out) is out
        assert same_bits(out, quantize_reference(x, "int4:g32"))


def test_quantize_rejects_an_out_it_could_not_have_returned():
    x = torch.randn(4, 64)
    cases = [
        (torch.empty(4, 32), r"quantize: out has shape \(4, 32\), x has \(4, 64\); they must match"),
        (torch.empty(4, 64, dtype=torch.bfloat16), "quantize: out is torch.bfloat16, x is torch.float32"),
        (torch.empty(4, 64, device="meta"), "quantize: out is on meta, x on cpu; they must match"),
        (torch.empty(4, 64, requires_grad=True), "quantize: out requires grad"),
        (x, "quantize: out shares memory with x; in-place quantization is not supported"),
    ]
    for out, message in cases:
        with pytest.raises(ValueError, match=message):
            quantize(x, "int4:g32", out=out)
    with pytest.raises(TypeError, match="quantize: out must be a torch.Tensor, got ndarray"):
        quantize(x, "int4:g32", out=x.numpy())


def test_quantize_rejects_an_out_that_overlaps_x_partly_but_not_one_beside_it():
    buffer = torch.randn(8, 64)
    with pytest.raises(ValueError, match="quantize: out shares memory with x"):
        quantize(buffer[:4], "int4:g32", out=buffer[3:7])
    assert same_bits(quantize(buffer[:4], "int4:g32", out=buffer[4:]), quantize_reference(buffer[:4], "int4:g32"))


def test_quantize_rejects_non_tensors_and_integer_tensors():
    with pytest.raises(TypeError, match="quantize: x must be a torch.Tensor, got list"):
        quantize([1.0], "int4:g128")
    with pytest.raises(TypeError, match="floating-point tensor, got torch.int64"):
        quantize(torch.arange(4), "int4:g128")


def test_quantize_carries_no_gradient_on_either_path(fast_path_started):
    for rows in (4, dispatch.MIN_ELEMENTS_FOR_FAST_PATH // 128):
        weight = torch.randn(rows, 128, requires_grad=True)
        assert not quantize(weight, "int4:g128").requires_grad


@pytest.mark.parametrize(("text", "count"), [("fp:e4m3:unscaled", 1 << 23), ("fp:e2m1:unscaled", 1 << 20)])
def test_consecutive_float32_values_round_like_the_reference(text, count):
    # The nearest-even fast path rounds by Veltkamp splitting: sweep `count` consecutive float32 values from
    # 1.0 (all of [1, 2) for E4M3: every tie and near-tie of its grid) and their negatives.
    bits = torch.arange(0x3F800000, 0x3F800000 + count, dtype=torch.int32)
    x = torch.cat([bits.view(torch.float32), -bits.view(torch.float32)]).view(-1, 2048)
    spec = parse_spec(text)
    expected = quantize_reference(x, spec)
    assert same_bits(quantize_fast(x, spec), expected)
    assert same_bits(quantize_fp_eager(x, spec), expected)
