"""benchmarks/device.sh and `qscaling bench device`, at toy sizes on a CPU (Triton's interpreter) or on a GPU."""

import argparse
import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch

if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not importable: the benchmark's kernel part cannot run", allow_module_level=True)

from qscaling.bench import device as device_bench
from qscaling.bench.quant import SPECS
from qscaling.kernels import fake_quant

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def tiny_args(tmp_path) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    device_bench.add_arguments(parser)
    return parser.parse_args(["--tiny", "--device", DEVICE, "--out", str(tmp_path / "results.json")])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter's numpy warns on Inf/NaN lanes
def test_device_script_runs_as_is_and_writes_its_results_under_out(repo_root, tmp_path):
    environment = {**os.environ, "QSCALING_PYTHON": sys.executable, "TRITON_INTERPRET": "1", "OUT": str(tmp_path)}
    environment["CUDA_VISIBLE_DEVICES"] = ""  # the interpreter runs CPU tensors only
    result = subprocess.run(
        ["bash", "benchmarks/device.sh", "--tiny"], cwd=repo_root, env=environment, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    results = json.loads((tmp_path / "device-bench.json").read_text())
    assert [row["spec"] for row in results["kernels"]] == list(SPECS)
    assert all(row["bit_exact"] and row["gb_per_s_moved"] > 0 for row in results["kernels"])
    assert results["copy"]["gb_per_s_moved"] > 0
    assert results["train"]["ours_tokens_per_s"] > 0 and results["train"]["qat_tokens_per_s"] > 0
    assert results["dag"] == {"skipped": "--tiny"}
    assert "kernel fp:e2m1:b32  bit-exact" in result.stdout and "smoke DAG: --tiny" in result.stdout
    assert (tmp_path / "device-bench.log").read_text() == result.stdout


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_kernel_one_bit_off_fails_the_benchmark(tmp_path, monkeypatch, capsys):
    exact_kernel = fake_quant.quantize_triton

    def one_bit_off(x, spec, out=None):
        result = exact_kernel(x, spec, out=out)
        if str(spec) == "fp:e4m3:b32":
            result.view(torch.int32)[-1, -1] ^= 1
        return result

    monkeypatch.setattr(fake_quant, "quantize_triton", one_bit_off)
    assert device_bench.run(tiny_args(tmp_path)) == 1
    exact = {row["spec"]: row["bit_exact"] for row in json.loads((tmp_path / "results.json").read_text())["kernels"]}
    assert exact == {text: text != "fp:e4m3:b32" for text in SPECS}
    assert "kernel fp:e4m3:b32  NOT bit-exact" in capsys.readouterr().out


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_part_that_breaks_is_reported_and_the_others_still_measured(tmp_path, monkeypatch, capsys):
    def broken(args):
        raise RuntimeError("no room for the optimizer")

    monkeypatch.setattr(device_bench.bench_train, "measure", broken)
    assert device_bench.run(tiny_args(tmp_path)) == 1
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["train"] == {"error": "RuntimeError: no room for the optimizer"}
    assert all(row["bit_exact"] for row in results["kernels"])
    assert "training: failed: RuntimeError: no room for the optimizer" in capsys.readouterr().out


def test_the_smoke_dag_is_skipped_with_a_reason_without_snakemake(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "snakemake" else find_spec(name))
    skipped = device_bench._smoke_dag("cpu", cores=1, timeout=5)
    assert skipped == {"skipped": "snakemake is not importable here (docs/operations.md, Measuring the GPU path)"}
