"""Which device a job runs on.

torch is imported only where it is used: the process that builds the DAG resolves `auto` (Ahmadian et al.'s
precision mode depends on it) and otherwise has no use for torch, whose import costs ~1 s of every rerun.
"""

import ast
import importlib.util
from pathlib import Path


def _torch_built_for_a_gpu() -> bool:
    """Whether the installed torch was built with CUDA or ROCm, read from its version.py without importing it;
    True where that file cannot be read (the caller then asks torch itself)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return True
    try:
        tree = ast.parse((Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text())
    except (OSError, SyntaxError, StopIteration):
        return True
    builds = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id in ("cuda", "hip")
    }
    if set(builds) != {"cuda", "hip"}:
        return True
    return any(not (isinstance(value, ast.Constant) and value.value is None) for value in builds.values())


def resolve_device(name: str) -> str:
    """`auto` → cuda when torch sees a GPU, else cpu; `cpu` / `cuda` as given."""
    if name != "auto":
        return name
    if not _torch_built_for_a_gpu():
        return "cpu"
    import torch  # only with a GPU build of torch installed: resolving the device stays torch-free otherwise

    return "cuda" if torch.cuda.is_available() else "cpu"


def synchronize(device) -> None:
    """Wait for the work queued on `device` (a name or torch.device): CUDA runs asynchronously, so a timer read
    before this misses it."""
    import torch  # this module is read while the DAG is built, which imports no torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
