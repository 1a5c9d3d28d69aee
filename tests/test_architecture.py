"""The package's layers import downward only, with no cycle, and keep their size limits (docs/architecture.md).

Foundations (torch-free) → numerics → storage → operations → studies and figures → pipeline and CLI. Every import
of a qscaling module is read from the source (module level and inside functions); one that reaches a higher layer,
a cycle, a function-level import without a comment saying why, a torch import in a foundation module, a module
over 500 lines or a function over 60 fails here.
"""

import ast
from pathlib import Path

import pytest
from conftest import REPO_ROOT

SOURCE = REPO_ROOT / "src"
FOUNDATIONS, NUMERICS, STORAGE, OPERATIONS, STUDIES, PIPELINE = range(6)
# Module -> layer, by the longest matching dotted prefix.
LAYERS = {
    "qscaling": FOUNDATIONS,
    "qscaling.atomic": FOUNDATIONS,
    "qscaling.config": FOUNDATIONS,
    "qscaling.device": FOUNDATIONS,
    "qscaling.layout": FOUNDATIONS,
    "qscaling.noise": FOUNDATIONS,
    "qscaling.plan": FOUNDATIONS,
    "qscaling.quant": FOUNDATIONS,  # the package only: its names load their modules on first use
    "qscaling.quant.formats": FOUNDATIONS,
    "qscaling.quant.precision": FOUNDATIONS,
    "qscaling.quant.spec": FOUNDATIONS,
    "qscaling.reproducible": FOUNDATIONS,
    "qscaling.runspec": FOUNDATIONS,
    "qscaling.settings": FOUNDATIONS,
    "qscaling.shape": FOUNDATIONS,
    "qscaling.stats": FOUNDATIONS,
    "qscaling.data": NUMERICS,
    "qscaling.kernels": NUMERICS,
    "qscaling.comparison": NUMERICS,
    "qscaling.public": NUMERICS,
    "qscaling.laws": NUMERICS,
    "qscaling.model": NUMERICS,
    "qscaling.outliers": NUMERICS,
    "qscaling.quant.": NUMERICS,  # every quant module not named above or below
    "qscaling.checkpoint": STORAGE,
    "qscaling.evaluate": OPERATIONS,
    "qscaling.hub": OPERATIONS,
    "qscaling.quant.as_trained": OPERATIONS,
    "qscaling.quant.ptq": OPERATIONS,
    "qscaling.quant.qat": OPERATIONS,
    "qscaling.tasks": OPERATIONS,
    "qscaling.train": OPERATIONS,
    "qscaling.figures": STUDIES,
    "qscaling.studies": STUDIES,
    "qscaling.bench": PIPELINE,
    "qscaling.cli": PIPELINE,
    "qscaling.cost": PIPELINE,
    "qscaling.diff": PIPELINE,
    "qscaling.laws.cli": PIPELINE,
    "qscaling.pipeline": PIPELINE,
    "qscaling.predict": PIPELINE,
    "qscaling.provenance": PIPELINE,
    "qscaling.quant.cli": PIPELINE,
    "qscaling.report": PIPELINE,
    "qscaling.runner": PIPELINE,
    "qscaling.trace": PIPELINE,
    "qscaling.worker": PIPELINE,
}
TORCH = ("torch", "transformers", "triton", "safetensors")
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 60


def layer_of(module: str) -> int:
    matches = [p for p in LAYERS if module == p or module.startswith(p if p.endswith(".") else f"{p}.")]
    return LAYERS[max(matches, key=len)]


def module_sources(root: Path = SOURCE) -> dict[str, str]:
    sources = {}
    for path in sorted((root / "qscaling").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        sources[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text()
    return sources


def imports(module: str, source: str, known) -> list[tuple[str, int, bool]]:
    """(imported module, line, inside a function) for every run-time import of a module in `known` (or a third-party one)."""
    package = module if f"{module}.__init__" in known or any(k.startswith(f"{module}.") for k in known) else None
    package = package or module.rpartition(".")[0]
    found = []
    tree = ast.parse(source)
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    guarded = [n for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)]
    typing_only = {id(n) for g in guarded for n in ast.walk(g)}
    inner = {id(n) for f in functions for n in ast.walk(f) if isinstance(n, ast.Import | ast.ImportFrom)}
    for node in ast.walk(tree):
        if id(node) in typing_only:  # never imported at run time
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], *filter(None, [base])]
                )
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found.extend((name, node.lineno, id(node) in inner) for name in dict.fromkeys(names))
    return found


def said_why(lines: list[str], line: int) -> bool:
    """A comment on the import's line, on a line of the imports just above it, or on the line above them all
    (a `try:  # why` line included)."""
    index = line - 1
    while index > 0 and lines[index - 1].strip().startswith(("from ", "import ")) and "#" not in lines[index]:
        index -= 1
    return "#" in lines[index] or "#" in lines[index - 1]


def violations(sources: dict[str, str]) -> list[str]:
    """Every import that reaches a higher layer, and every function-level import without a comment saying why."""
    problems = []
    for module, source in sources.items():
        lines = source.splitlines()
        for target, line, inside in imports(module, source, sources):
            if target in sources and layer_of(target) > layer_of(module):
                problems.append(f"{module}:{line} imports {target} (layer {layer_of(target)} > {layer_of(module)})")
            if inside and not said_why(lines, line):
                problems.append(f"{module}:{line} imports {target} inside a function without a comment why")
            if layer_of(module) == FOUNDATIONS and target.split(".")[0] in TORCH and not inside:
                problems.append(f"{module}:{line} imports {target}: foundations stay torch-free")
    return problems


def cycles(sources: dict[str, str]) -> list[list[str]]:
    """Import cycles among qscaling modules (imports inside functions count)."""
    graph = {m: {t for t, _, _ in imports(m, s, sources) if t in sources and t != m} for m, s in sources.items()}
    found, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                found.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    # A package imports its own submodules and they import its names: that is loading, not a cycle.
    return [c for c in found if not all(m.startswith(c[0]) or c[0].startswith(m) for m in c)]


def test_every_module_has_a_layer_and_imports_downward_only():
    sources = module_sources()
    assert violations(sources) == []


def test_no_import_cycle():
    assert cycles(module_sources()) == []


def test_a_planted_upward_import_and_a_silent_function_level_import_fail():
    planted = {
        "qscaling.shape": "import torch\nfrom qscaling.studies import registry\n",
        "qscaling.model": "def build():\n    from qscaling.checkpoint import save\n",
        "qscaling.studies.registry": "",
        "qscaling.checkpoint": "import qscaling.model\n",
    }
    problems = violations(planted)
    assert any("qscaling.shape:2 imports qscaling.studies.registry (layer 4 > 0)" in p for p in problems)
    assert any("qscaling.shape:1 imports torch" in p for p in problems)
    assert any(
        "qscaling.model:2 imports qscaling.checkpoint inside a function without a comment" in p for p in problems
    )
    assert cycles(planted) == [["qscaling.checkpoint", "qscaling.model", "qscaling.checkpoint"]]


@pytest.mark.parametrize("module", sorted(module_sources()))
def test_modules_and_functions_stay_small(module):
    source = module_sources()[module]
    assert source.count("\n") <= MAX_MODULE_LINES, f"{module}: {source.count(chr(10))} lines"
    long = [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == [], f"{module}: functions over {MAX_FUNCTION_LINES} lines"
