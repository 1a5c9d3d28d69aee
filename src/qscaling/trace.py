"""Trace an output back through its provenance records to config values, corpus archives and checkpoints.

    qscaling trace figures/common/learning_curves.png [--root WORKDIR] [--json]

Each node is a file with the rule that produced it (its params are the config values that reached the rule)
and its inputs, recursively. A checkpoint directory has no record of its own: it is attributed to the record
of the run it belongs to (`results/runs/<run>/run.json`). Inputs written by no rule — corpus archives fetched
from a registry — are the leaves. A file whose bytes no longer match the recorded sha256 is marked CHANGED.
"""

import argparse
import json
from pathlib import Path

from qscaling.provenance import PROVENANCE_DIR, path_sha256, read_record


def _short(sha) -> str:
    if isinstance(sha, dict):
        return f"{len(sha)} files"
    return sha[:12] if sha else "absent"


def find_producer(path: str, root: Path) -> tuple[str, dict] | None:
    """(output, record) of the job that wrote `path`: its own record, or for a checkpoint its run's record."""
    record = read_record(path, root)
    if record is not None:
        return path, record
    # Checkpoints are side outputs of train_run: <run dir>/checkpoints/<milestone>, recorded under <run dir>.
    parts = Path(path).parts
    if "checkpoints" in parts[1:]:
        run_dir = Path(*parts[: parts.index("checkpoints")])
        siblings = sorted((root / PROVENANCE_DIR / run_dir).glob("*.json"))
        if siblings:
            record = json.loads(siblings[0].read_text())
            return record["output"], record
    return None


def trace(path: str, root: Path, seen: set | None = None, recorded_sha=None) -> dict:
    """The provenance tree of `path` (relative to `root`) as nested dicts.

    `recorded_sha` is the hash the consuming job saw; the top-level file is checked against its own record.
    """
    seen = set() if seen is None else seen
    node = {"path": path}
    producer = find_producer(path, root)
    if producer is not None and producer[0] == path and recorded_sha is None:
        recorded_sha = producer[1].get("sha256")
    node["recorded_sha256"] = recorded_sha
    on_disk = root / path
    node["changed"] = on_disk.exists() and recorded_sha is not None and path_sha256(on_disk) != recorded_sha
    if producer is None:
        node["kind"] = "source" if ":" in path else "unrecorded"
        return node
    output, record = producer
    node.update(rule=record["rule"], via=output if output != path else None)
    if output in seen:
        node["repeated"] = True
        return node
    seen.add(output)
    node.update(
        {key: record.get(key) for key in ("wildcards", "params", "scale", "code_version", "started", "finished")}
    )
    node["inputs"] = [trace(name, root, seen, sha) for name, sha in record.get("inputs", {}).items()]
    return node


def _flatten(params: dict, prefix: str = "") -> list[tuple[str, object]]:
    """Nested params as dotted names: a run spec reads as the config keys that set it."""
    items = []
    for name, value in sorted((params or {}).items()):
        if isinstance(value, dict) and value:
            items.extend(_flatten(value, f"{prefix}{name}."))
        else:
            items.append((f"{prefix}{name}", value))
    return items


def _params_lines(params: dict) -> list[str]:
    return [f"{name} = {json.dumps(value)}" for name, value in _flatten(params)]


def format_tree(node: dict, prefix: str = "", last: bool = True, top: bool = True) -> list[str]:
    branch = "" if top else ("└─ " if last else "├─ ")
    flags = " CHANGED" if node.get("changed") else ""
    head = f"{prefix}{branch}{node['path']}  sha256 {_short(node.get('recorded_sha256'))}{flags}"
    if "rule" in node:
        via = f" (written with {node['via']})" if node.get("via") else ""
        head += f"  ← rule {node['rule']}{via}"
    elif node.get("kind") == "source":
        head += "  ← registry archive"
    else:
        head += "  ← no record"
    lines = [head]
    child_prefix = prefix + ("" if top else ("   " if last else "│  "))
    if node.get("repeated"):
        lines[-1] += " (traced above)"
        return lines
    if "rule" in node:
        detail_prefix = child_prefix + ("│  " if node.get("inputs") else "   ")
        lines.append(
            f"{detail_prefix}scale {node.get('scale')}, code {node.get('code_version')}, "
            f"{node.get('started')} → {node.get('finished')}"
        )
        if node.get("wildcards"):
            lines.append(f"{detail_prefix}wildcards {json.dumps(node['wildcards'], sort_keys=True)}")
        lines.extend(f"{detail_prefix}param {line}" for line in _params_lines(node.get("params")))
    children = node.get("inputs", [])
    for index, child in enumerate(children):
        lines.extend(format_tree(child, child_prefix, index == len(children) - 1, top=False))
    return lines


def leaves(node: dict, kind: str) -> list[dict]:
    """Leaf nodes of one kind ('source' = registry archives), depth first, each once."""
    found = [node] if node.get("kind") == kind else []
    for child in node.get("inputs", []):
        found.extend(leaf for leaf in leaves(child, kind) if leaf["path"] not in {f["path"] for f in found})
    return found


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="an output path, relative to the working directory")
    parser.add_argument("--root", default=".", help="the run's working directory (default: current directory)")
    parser.add_argument("--json", action="store_true", help="the tree as JSON")


def run(args) -> int:
    root = Path(args.root)
    relative = Path(args.file)
    if relative.is_absolute():
        try:
            relative = relative.relative_to(root.resolve())
        except ValueError:
            raise ValueError(f"FILE {args.file}: not inside --root {root.resolve()}") from None
    if read_record(relative.as_posix(), root) is None:
        raise FileNotFoundError(
            f"FILE {relative}: no provenance record at {root / PROVENANCE_DIR / relative}.json "
            f"(outputs are traced from the working directory they were built in; see --root)"
        )
    tree = trace(relative.as_posix(), root)
    if args.json:
        print(json.dumps(tree, indent=2))
        return 0
    print("\n".join(format_tree(tree)))
    sources = leaves(tree, "source")
    if sources:
        print("\ncorpus archives:")
        print("\n".join(f"  {leaf['path']}  sha256 {leaf['recorded_sha256']}" for leaf in sources))
    return 0
