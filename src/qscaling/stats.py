"""Statistics shared by evaluation and analysis, on anything with `len` and a sample `std()` (a torch tensor, a
pandas Series, a numpy-backed Series): torch-free, so the DAG build may import the code that uses them."""

import math


def standard_error(values) -> float:
    """Standard error of the mean of `values` (sample standard deviation / √n); NaN for fewer than two, where it
    is undefined."""
    return float(values.std() / math.sqrt(len(values))) if len(values) > 1 else float("nan")
