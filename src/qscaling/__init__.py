"""qscaling: reproduce the scaling laws of quantized LLMs, figure by figure."""

__version__ = "0.1.0"
