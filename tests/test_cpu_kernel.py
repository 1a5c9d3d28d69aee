"""The C++ CPU kernel: the reference's bits for every spec it covers, on rows with NaN, ±Inf, subnormals, ±0 and
near-ties, whole and ragged groups; the dispatcher sends CPU tensors to it, and what it leaves out elsewhere."""

import os
import shutil
import subprocess
import sys

import pytest
import torch
from conftest import awkward_rows, same_bits

from qscaling.quant import cpu_kernel, dispatch, parse_spec, quantize, quantize_reference
from qscaling.quant.qat import clamp_mask_by_codes

SPECS = [
    "int4:g128",
    "int4:g5",
    "int3:g32:asym",
    "int4:g7:asym:nearest-away",
    "int8:tensor:asym",
    "int8:token:mulinv",
    "int4:channel:gptq:nearest-away",
    "int2:tensor",
    "int3:g32:gptq:narrow",
    "int2:channel:gptq:narrow",
    "fp:e4m3:b32",
    "fp:e1m1:b7",
    "fp:e2m1:b32:e8m0",
    "fp:e2m1:b16:e4m3",
    "fp:e3m2:b24:e4m3:nearest-away",
    "fp:e4m3:channel:e4m3",
    "fp:e4m3:b32:e8m0:nearest-away",
    "fp:e3m2:b24:pow2",
    "fp:e5m2:channel:pow2:inf",
    "fp:e5m2:b16:ieee:inf",
    "fp:e2m3:tensor:nearest-away",
    "fp:e4m3:unscaled:unreserved",
    "fp:e8m10:channel:ieee",
    "fp:e0m3:channel",
    "fp:e8m0:tensor",
]

pytestmark = pytest.mark.skipif(not cpu_kernel.available(), reason="the C++ kernel cannot be built here")


@pytest.mark.parametrize("text", SPECS)
def test_kernel_matches_reference_bit_for_bit(text):
    spec = parse_spec(text)
    for rows, cols in ((8, 256), (20, 200), (3, 37)):  # whole groups, ragged last groups, odd rows
        x = awkward_rows(rows, cols, seed=rows + cols)
        assert same_bits(cpu_kernel.quantize_cpu(x, spec), quantize_reference(x, spec)), (rows, cols)


def test_kernel_writes_into_out_and_refuses_what_it_does_not_cover():
    x = awkward_rows(4, 64, seed=2)
    out = torch.empty_like(x)
    assert cpu_kernel.quantize_cpu(x, parse_spec("int4:g32"), out=out) is out
    assert same_bits(out, quantize_reference(x, "int4:g32"))
    for text in ("int4:g32:stochastic", "int2:tensor:absmean:narrow"):
        assert not cpu_kernel.supports(x, parse_spec(text))
        with pytest.raises(ValueError, match="quantize_cpu: needs the built kernel"):
            cpu_kernel.quantize_cpu(x, parse_spec(text))
    assert not cpu_kernel.supports(x.t(), parse_spec("int4:g32"))  # not contiguous


def test_dispatcher_sends_cpu_tensors_of_every_size_to_the_kernel(monkeypatch):
    calls = []
    original = cpu_kernel.quantize_cpu
    monkeypatch.setattr(
        cpu_kernel, "quantize_cpu", lambda x, spec, out=None: calls.append(str(spec)) or original(x, spec, out)
    )
    small, large = torch.randn(64, 24), torch.randn(dispatch.MIN_ELEMENTS_FOR_FAST_PATH // 128, 128)
    for x, text in ((small, "int4:token"), (small[:, :20], "fp:e4m3:b8"), (large, "fp:e2m1:b32")):
        assert same_bits(quantize(x, text), quantize_reference(x, text))
    quantize(large, "int4:g32:stochastic")  # left to the other paths
    assert calls == ["int4:token", "fp:e4m3:b8", "fp:e2m1:b32"]
    bf16 = torch.randn(16, 32, dtype=torch.bfloat16)
    assert torch.equal(quantize(bf16, "int4:g32"), quantize_reference(bf16, "int4:g32"))


def test_a_kernel_that_cannot_be_built_warns_once_and_leaves_the_other_paths(monkeypatch):
    import torch.utils.cpp_extension

    def no_compiler(**options):
        raise RuntimeError("Ninja is required to load C++ extensions")

    monkeypatch.setattr(torch.utils.cpp_extension, "load", no_compiler)
    cpu_kernel._extension.cache_clear()
    try:
        with pytest.warns(UserWarning, match=r"C\+\+ fake-quant kernel could not be built \(Ninja is required"):
            assert not cpu_kernel.available()
        x = awkward_rows(4, 64, seed=3)
        assert same_bits(quantize(x, "fp:e4m3:b32"), quantize_reference(x, "fp:e4m3:b32"))
    finally:
        cpu_kernel._extension.cache_clear()


def test_each_checkout_builds_its_own_kernel_so_two_never_rebuild_each_others(monkeypatch, tmp_path):
    names = {}
    for checkout in ("a", "b"):
        monkeypatch.setattr(cpu_kernel, "SOURCE", tmp_path / checkout / "kernels" / "fake_quant_cpu.cpp")
        names[checkout] = cpu_kernel._build_name("avx2")
    assert names["a"] != names["b"] and all(name.isidentifier() for name in names.values())
    monkeypatch.undo()
    assert cpu_kernel._build_name("avx2") == cpu_kernel._build_name("avx2")  # one checkout: one build, reused


def test_a_build_lock_left_by_a_killed_process_does_not_stop_the_next_load(tmp_path):
    """torch's own lock file, left behind by a process killed while loading the kernel (a kill -9 resume, Snakemake
    cancelling its jobs), once made every later load on that machine wait forever."""
    assert cpu_kernel.available()
    built = cpu_kernel.build_directory()
    left_behind = tmp_path / built.name
    shutil.copytree(built, left_behind, ignore=shutil.ignore_patterns("*lock"))
    (left_behind / "lock").touch()
    probe = "from qscaling.quant import cpu_kernel; print(cpu_kernel.available())"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path)},
    )
    assert result.stdout.strip() == "True", result.stderr[-2000:]
    assert not (left_behind / "lock").exists()


@pytest.mark.parametrize("text", SPECS)
def test_the_fused_mask_is_the_clipped_stes(text):
    spec = parse_spec(text)
    x = awkward_rows(20, 200, seed=4)
    expected = clamp_mask_by_codes(x, spec)
    for dtype in (torch.bool, torch.float32):
        mask = torch.full(x.shape, 7, dtype=dtype)
        cpu_kernel.quantize_cpu(x, spec, mask=mask)
        assert torch.equal(mask, expected.to(dtype)), dtype


@pytest.mark.parametrize(
    "backward",
    [("fp:e2m1:b8", "int8:token", "fp:e5m2:b8"), ("fp:e4m3:b8", "int4:g8:asym", "fp:e4m3:b8")],
    ids=["own-backward-specs", "backward-specs-as-forward"],
)
def test_qat_gradients_are_the_same_bits_with_and_without_the_kernel(monkeypatch, backward):
    """A quantized linear layer's forward and backward (Sun et al.'s backward GEMM inputs too) through the kernel's
    fused quantize-and-mask, and through the torch paths; a backward spec equal to the forward's reuses the forward
    GEMM's input, with the bits of quantizing the latent tensor again."""
    from qscaling.quant import qat
    from qscaling.quant.qat import LinearPrecision, QuantizedLinearFunction

    backward_weight, backward_activation, backward_grad_output = backward
    precision = LinearPrecision(
        weights=parse_spec("fp:e4m3:b8"),
        activations=parse_spec("int4:g8:asym"),
        backward_weight=parse_spec(backward_weight),
        backward_activation=parse_spec(backward_activation),
        backward_grad_output=parse_spec(backward_grad_output),
    )

    def step():
        generator = torch.Generator().manual_seed(0)
        x = (torch.randn(64, 24, generator=generator) * 3).requires_grad_()
        weight = torch.randn(16, 24, generator=generator).requires_grad_()
        QuantizedLinearFunction.apply(x, weight, None, precision).square().sum().backward()
        return x.grad, weight.grad

    with_kernel = step()
    monkeypatch.setattr(qat, "_backward_input", lambda latent, forward, forward_spec, spec: quantize(latent, spec))
    quantized_again = step()
    monkeypatch.setattr(cpu_kernel, "available", lambda: False)
    without = step()
    assert all(same_bits(a, b) for a, b in zip(with_kernel, quantized_again))
    assert all(same_bits(a, b) for a, b in zip(with_kernel, without))


@pytest.mark.parametrize("text", ["int4:g32", "int8:tensor:asym", "fp:e4m3:b32", "fp:e2m1:tensor"])
def test_large_tensors_split_over_threads_keep_the_references_bits(text):
    """Past at::parallel_for's grain the work is split over torch's threads (and prefetched ahead): the split
    follows whole groups or merges a tensor's range, so one thread and two give the reference's bits."""
    x = awkward_rows(1024, 384, seed=7)
    expected = quantize_reference(x, text)
    threads = torch.get_num_threads()
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            mask = torch.empty(x.shape)
            assert same_bits(cpu_kernel.quantize_cpu(x, parse_spec(text), mask=mask), expected), count
            assert torch.equal(mask, clamp_mask_by_codes(x, parse_spec(text)).float()), count
    finally:
        torch.set_num_threads(threads)
