"""`qscaling bench quant` prints quantize(x, spec) and quantize(x, spec, out=buf) side by side as ratios to copy_."""

import re

from qscaling.bench.quant import FP4_BLOCK_SPECS, SPECS, timed_against_copy
from qscaling.cli import main


def test_bench_quant_prints_fresh_and_out_throughput_against_copy_for_every_spec(capsys):
    assert main(["bench", "quant", "--rows", "16", "--cols", "256", "--repeats", "2", "--skip-gptq"]) == 0
    out = capsys.readouterr().out
    for text in SPECS + FP4_BLOCK_SPECS:  # MXFP4 and NVFP4 too
        for name in (r"quantize\(x, spec\)  \(fresh tensor\)", r"quantize\(x, spec, out=buf\)"):
            assert re.search(rf"^{re.escape(text)} +qscaling {name} +\d+\.\d\d +\d+\.\d\d$", out, re.MULTILINE), name


def test_each_ratio_pairs_a_call_with_a_copy_in_alternating_order():
    order = []
    timed_against_copy({"quantize": lambda: order.append("call")}, lambda: order.append("copy"), repeats=4)
    assert order == ["call", "copy", "call", "call", "copy", "copy", "call", "call", "copy"]
