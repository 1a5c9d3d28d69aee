"""Which device a job runs on."""

import torch


def resolve_device(name: str) -> str:
    """`auto` → cuda when torch sees a GPU, else cpu; `cpu` / `cuda` as given."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def synchronize(device: str | torch.device) -> None:
    """Wait for the work queued on `device`: CUDA runs asynchronously, so a timer read before this misses it."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
