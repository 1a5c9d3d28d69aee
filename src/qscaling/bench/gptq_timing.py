"""GPTQ seconds per Linear layer (512×512 and 2048×2048 by default), for `qscaling bench quant`.

Times `gptq_quantize_weight` alone (Hessian given), the part that scales as columns³; the RTN time of the
same weight is printed alongside as the baseline ratio.
"""

import torch

from qscaling.bench import best_seconds
from qscaling.quant import quantize
from qscaling.quant.gptq import HessianAccumulator, gptq_quantize_weight

DEFAULT_SIZES = (512, 2048)


def bench_gptq(sizes=DEFAULT_SIZES, spec: str = "int4:g128", tokens: int = 4096, repeats: int = 2, seed: int = 0):
    """One row per square layer size: GPTQ seconds, RTN seconds and their ratio (best of `repeats`)."""
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for size in sizes:
        weight = torch.randn(size, size, generator=generator) / size**0.5
        accumulator = HessianAccumulator(size)
        accumulator.add(torch.randn(tokens, size, generator=generator))
        gptq_seconds = best_seconds(lambda: gptq_quantize_weight(weight, accumulator.hessian, spec), repeats)
        rtn_seconds = best_seconds(lambda: quantize(weight, spec), repeats)
        rows.append(
            {
                "layer": f"{size}x{size}",
                "spec": spec,
                "gptq_s": gptq_seconds,
                "rtn_s": rtn_seconds,
                "gptq_over_rtn": gptq_seconds / rtn_seconds,
            }
        )
    return rows


def format_rows(rows) -> str:
    lines = [f"{'layer':>10} {'spec':>10} {'GPTQ s':>9} {'RTN s':>9} {'GPTQ/RTN':>9}"]
    for row in rows:
        timings = f"{row['gptq_s']:9.3f} {row['rtn_s']:9.4f} {row['gptq_over_rtn']:9.0f}×"
        lines.append(f"{row['layer']:>10} {row['spec']:>10} {timings}")
    return "\n".join(lines)
