"""Released checkpoints (Pythia, OPT) from the Hugging Face hub, by revision, imported into our checkpoint format.

At paper scale a study's checkpoints come from the hub instead of our trainer — only the source differs, every
rule downstream is the same. `repo` is a hub id (`EleutherAI/pythia-160m-deduped`, fetched with
`huggingface_hub.snapshot_download` at `revision`) or a local directory holding one HF-format subdirectory per
revision (`<repo>/<revision>/config.json …`), which is how the offline tests stand in for the hub. Weights load
through transformers (safetensors, or `.bin` with `torch.load(weights_only=True)`); nothing is unpickled.
"""

from pathlib import Path

from huggingface_hub import snapshot_download
from transformers import AutoModelForCausalLM

from qscaling.checkpoint import save_checkpoint
from qscaling.data.fetch import sha256_file
from qscaling.plan import LOCAL

WEIGHT_PATTERNS = [
    "config.json",
    "generation_config.json",
    "*.safetensors",
    "*.safetensors.index.json",
    "pytorch_model*.bin",
    "pytorch_model.bin.index.json",
]
PYTHIA_TOKENS_PER_STEP = 1024 * 2048  # Pythia: 1024 sequences of 2048 tokens per step (Biderman et al. 2023)
# The `repo` of your own checkpoints (a study's `source: local`): each revision is then an HF-format directory.


def fetch_revision(repo: str, revision: str) -> Path:
    """A directory holding `repo` at `revision` (downloaded to the HF cache on first use); for `LOCAL`, the
    directory `revision` itself."""
    if repo == LOCAL:
        if not (Path(revision) / "config.json").is_file():
            raise FileNotFoundError(f"local model {revision}: no config.json (an HF-format directory is needed)")
        return Path(revision)
    local = Path(repo)
    if local.is_dir():
        path = local / revision
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"hub stand-in {repo}: no HF-format directory for revision '{revision}'")
        return path

    return Path(snapshot_download(repo, revision=revision, allow_patterns=WEIGHT_PATTERNS))


def import_revision(repo: str, revision: str, out_dir, *, run_id: str, tokens_seen: int, size: str) -> dict:
    """Load `repo@revision` with transformers and save it as our checkpoint, recording where it came from."""

    source = fetch_revision(repo, revision)
    files = {p.name: sha256_file(p) for p in sorted(source.iterdir()) if p.is_file()}
    try:
        model = AutoModelForCausalLM.from_pretrained(source)
    except Exception as error:  # transformers raises many types for a damaged or unsupported checkpoint
        raise ValueError(f"{repo}@{revision}: cannot be loaded ({type(error).__name__}: {error})") from error
    metadata = {
        "run_id": run_id,
        "tokens_seen": tokens_seen,
        "milestone_tokens": tokens_seen,
        "step": int(revision.removeprefix("step")) if revision.startswith("step") else None,
        "spec": {"size": size, "source": LOCAL if repo == LOCAL else "hub"},
        "source": {"repo": repo, "revision": revision, "files": files},
    }
    save_checkpoint(model, out_dir, metadata)
    return metadata
