"""Quantization formats as specs: INT2-8 and FP ExMy, any granularity, with one reference and fast paths.

    from qscaling.quant import quantize, parse_spec
    w_q = quantize(w, "int4:g128")          # fake-quant, same dtype and shape
    spec = parse_spec("fp:e2m1:b32"); str(spec) == "fp:e2m1:b32"

Grammar and defaults: qscaling.quant.spec; FP formats: formats. Reference arithmetic: qscaling.quant.reference
(granularity and scales), int_format, fp_rounding (element rounding), rounding (modes, seeded stochastic stream).

The names below load their module on first use: the spec grammar and the formats need no torch, so checking a
config's specs (before any job runs, in the process that builds the DAG) does not import it.
"""

import importlib

_MODULE_OF = {
    "quantize": "dispatch",
    "FloatFormat": "formats",
    "fp_format": "formats",
    "block_scale": "fp_rounding",
    "round_to_format": "fp_rounding",
    "asymmetric_qparams": "int_format",
    "code_range": "int_format",
    "fake_quantize_int": "int_format",
    "symmetric_scale": "int_format",
    "QuantParams": "reference",
    "choose_qparams": "reference",
    "fake_quantize_with": "reference",
    "quantize_reference": "reference",
    "QuantSpec": "spec",
    "parse_spec": "spec",
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'qscaling.quant' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"qscaling.quant.{_MODULE_OF[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE_OF))
