"""Released checkpoints by revision (paper scale), with a local directory standing in for the hub."""

import numpy as np
import pytest
import torch
from conftest import run_snakemake
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

from qscaling.checkpoint import load_checkpoint
from qscaling.data.tokens import load_pretrained_tokenizer
from qscaling.hub import fetch_revision, import_revision
from qscaling.studies.scoring import score_checkpoint
from qscaling.studies.study import Quantization


@pytest.fixture(scope="module")
def local_hub(tmp_path_factory):
    """`<root>/step{N}/` HF-format GPT-NeoX (Pythia's architecture) checkpoints, as the hub serves revisions."""
    root = tmp_path_factory.mktemp("pythia-tiny")
    config = GPTNeoXConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    for step in (1000, 2000):
        torch.manual_seed(step)
        GPTNeoXForCausalLM(config).save_pretrained(root / f"step{step}", safe_serialization=True)
    return root


def test_import_revision_records_the_source(local_hub, tmp_path):
    metadata = import_revision(
        str(local_hub), "step2000", tmp_path / "ckpt", run_id="hub-tiny", tokens_seen=2000 * 2_097_152, size="tiny"
    )
    model, loaded = load_checkpoint(tmp_path / "ckpt")
    assert loaded["tokens_seen"] == 2000 * 2_097_152 and loaded["step"] == 2000
    assert set(metadata["source"]["files"]) >= {"config.json", "model.safetensors"}
    original = GPTNeoXForCausalLM.from_pretrained(local_hub / "step2000")
    for name, tensor in original.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name


def test_missing_revision_is_a_clear_error(local_hub):
    with pytest.raises(FileNotFoundError, match="no HF-format directory for revision 'step3000'"):
        fetch_revision(str(local_hub), "step3000")


def test_imported_pythia_checkpoint_goes_through_ptq_scoring(local_hub, tmp_path, token_files):
    import_revision(str(local_hub), "step1000", tmp_path / "ckpt", run_id="hub-tiny", tokens_seen=1000, size="tiny")
    tokens = np.fromfile(token_files["val"], dtype=np.uint16)
    rows = score_checkpoint(
        tmp_path / "ckpt",
        [Quantization("gptq", "int4:g16:gptq"), Quantization("rtn", "int3:channel")],
        {"val": tokens},
        tokens,
        calibration={"sequences": 4, "seed": 0},
        eval_tokens=2000,
    )
    assert list(rows["method"]) == ["none", "gptq", "rtn"]
    assert (rows["D"] == 1000).all() and rows["N"].iloc[0] > 0


def test_a_tokenizer_file_can_be_reused(tmp_path):
    from qscaling.data.tokens import EOS, train_tokenizer

    tokenizer = train_tokenizer(["the cat sat on the mat"] * 50, 300)
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    assert load_pretrained_tokenizer(str(tmp_path), 300).token_to_id(EOS) == 0
    too_small = tokenizer.get_vocab_size() - 1
    with pytest.raises(ValueError, match=f"corpus.vocab_size: {too_small} is smaller"):
        load_pretrained_tokenizer(str(tmp_path / "tokenizer.json"), too_small)


def test_paper_scale_dag_resolves_with_hub_checkpoints(tmp_path):
    result = run_snakemake(tmp_path, "--dry-run", scale="paper", timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "import_hub_run" in result.stdout
