"""Quantization formats as specs: INT2-8 and FP ExMy, any granularity, with one reference and fast paths.

    from qscaling.quant import quantize, parse_spec
    w_q = quantize(w, "int4:g128")          # fake-quant, same dtype and shape
    spec = parse_spec("fp:e2m1:b32"); str(spec) == "fp:e2m1:b32"

Grammar and defaults: qscaling.quant.spec. Reference arithmetic: qscaling.quant.reference (granularity and
scales), int_format, fp_format (element rounding), rounding (modes, seeded stochastic stream).
"""

from qscaling.quant.dispatch import quantize
from qscaling.quant.fp_format import FloatFormat, block_scale, fp_format, round_to_format
from qscaling.quant.int_format import asymmetric_qparams, code_range, fake_quantize_int, symmetric_scale
from qscaling.quant.reference import QuantParams, choose_qparams, fake_quantize_with, quantize_reference
from qscaling.quant.spec import QuantSpec, parse_spec

__all__ = [
    "FloatFormat",
    "QuantParams",
    "QuantSpec",
    "asymmetric_qparams",
    "block_scale",
    "choose_qparams",
    "code_range",
    "fake_quantize_int",
    "fake_quantize_with",
    "fp_format",
    "parse_spec",
    "quantize",
    "quantize_reference",
    "round_to_format",
    "symmetric_scale",
]
