"""Triton kernels for fake quantization (INT groups, FP blocks), bit-exact with qscaling.quant.reference.

They live inside the package so that an installed qscaling can import them; the top-level kernels/
directory only points here. Importing this package needs triton; qscaling.quant.dispatch checks first.
"""
