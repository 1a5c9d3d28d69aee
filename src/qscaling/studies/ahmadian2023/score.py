"""Scoring one checkpoint of Ahmadian et al. 2023 and building its tasks (job time: loads torch, tokenizers and
lm-evaluation-harness).

Each checkpoint is scored unquantized, after W8A8 vector-wise PTQ (per-token INT8 activations × per-channel INT8
weights, no calibration, no outlier decomposition) and after W4 weight-only per-channel RTN, by the shared PTQ loop
(`qscaling.studies.scoring.score_quantizations`): held-out loss (paired per window) and zero-shot-style accuracy
(`qscaling.tasks`, through lm-evaluation-harness, paired per item), plus the outlier proxies of
`qscaling.outliers` on the unquantized model.
"""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from huggingface_hub import snapshot_download
from tokenizers import Tokenizer
from transformers import AutoTokenizer

from qscaling.checkpoint import read_metadata
from qscaling.data import EOS, load_tokens
from qscaling.outliers import block_proxies, block_values, outlier_counts, qkv_inputs
from qscaling.quant.as_trained import load_as_trained
from qscaling.studies.ahmadian2023.grid import STUDY
from qscaling.studies.scoring import Measurement, checkpoint_columns, score_quantizations
from qscaling.studies.study import Quantization
from qscaling.studies.tables import with_labels
from qscaling.tasks import build_tasks, held_out_documents, hf_tokenizer, run_tasks

TOKENIZER_PATTERNS = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt"]


def task_changes(base: dict, quantized: dict) -> dict:
    """Accuracy change after quantization, paired per item: mean over tasks of the absolute change (points) and
    of the relative % change (the paper's headline), with the relative change's standard error.

    Tasks the unquantized model never gets right have no relative change and are left out of it.
    """
    absolute, relative, variances = [], [], []
    for task, result in base.items():
        difference = quantized[task]["correct"].astype(float) - result["correct"].astype(float)
        absolute.append(difference.mean())
        accuracy = result["correct"].mean()
        if accuracy > 0:
            relative.append(difference.mean() / accuracy)
            variances.append(
                (difference.std(ddof=1) / math.sqrt(len(difference)) / accuracy) ** 2
                if len(difference) > 1
                else float("nan")
            )
    if not relative:
        return {"acc_change": 100 * float(np.mean(absolute)), "pct_change": float("nan"), "pct_change_se": float("nan")}
    return {
        "acc_change": 100 * float(np.mean(absolute)),
        "pct_change": 100 * float(np.mean(relative)),
        "pct_change_se": 100 * math.sqrt(sum(variances)) / len(relative),
    }


def accuracy_columns(accuracy: dict, base_accuracy: dict) -> dict:
    """A model's task accuracies, their mean and the unquantized model's, and the change (`task_changes`)."""
    return {
        **{f"acc_{task.removeprefix('qscaling_')}": result["acc"] for task, result in accuracy.items()},
        "mean_acc": float(np.mean([result["acc"] for result in accuracy.values()])),
        "base_mean_acc": float(np.mean([result["acc"] for result in base_accuracy.values()])),
        **task_changes(base_accuracy, accuracy),
    }


def task_tokenizer(tokenizer_file, held_out: np.ndarray, source: dict | None, *, keep_tokens: int | None = None):
    """(transformers tokenizer, held-out token ids) in the vocabulary of the model being scored.

    Our runs (`source` None) use the corpus tokenizer and shard as they are. A released checkpoint (`source` =
    {"repo", "revision"}) brings its own tokenizer, fetched at the same revision (a local directory with one
    subdirectory per revision stands in for the hub); the first `keep_tokens` held-out tokens (all if None) are
    decoded and re-encoded with it.
    """
    corpus_tokenizer = hf_tokenizer(tokenizer_file, EOS)
    if source is None:
        return corpus_tokenizer, held_out
    local = Path(source["repo"])
    if local.is_dir():
        path = local / source["revision"]
    else:
        path = snapshot_download(source["repo"], revision=source["revision"], allow_patterns=TOKENIZER_PATTERNS)
    tokenizer = AutoTokenizer.from_pretrained(path)
    text = corpus_tokenizer.decode(np.asarray(held_out[:keep_tokens]).tolist())
    return tokenizer, np.asarray(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=np.int64)


def _proxies(model, held_out: np.ndarray, proxy_windows: int):
    """(per-block proxies, one block's weights and gains, their summary columns) of the unquantized model on the
    first `proxy_windows` held-out windows."""
    seq_len = model.config.max_position_embeddings
    windows_available = len(held_out) // (seq_len + 1)
    if windows_available < proxy_windows:
        raise ValueError(
            f"proxy_windows: {proxy_windows} windows of {seq_len + 1} tokens requested, the held-out "
            f"set has {windows_available}"
        )
    windows = torch.from_numpy(np.asarray(held_out[: proxy_windows * (seq_len + 1)]).astype(np.int64))
    inputs = qkv_inputs(model, windows.view(proxy_windows, seq_len + 1)[:, :-1])
    proxies = block_proxies(model, inputs)
    summary = {
        **{name: float(proxies[name].mean()) for name in ("rmse", "act_std", "gain_std", "spectral_norm")},
        **{f"outliers_{rule}": count for rule, count in outlier_counts(inputs).items()},
    }
    return proxies, block_values(model, len(inputs) // 2), summary


def score_checkpoint(
    checkpoint,
    quantizations,
    held_out: np.ndarray,
    *,
    tokenizer,
    tasks,
    task_dir=None,
    eval_tokens: int,
    proxy_windows: int,
    batch_size: int = 16,
    task_batch_size: int = 32,
    device: str = "cpu",
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(rows, per-block proxies, one block's weights and gains) for one checkpoint.

    Rows: the unquantized model and each quantization, with held-out loss (δ paired per window) and task accuracy
    (changes paired per item), and the unquantized model's proxy summaries (block means, outlier counts).
    `held_out` must be in the model's vocabulary; its first `proxy_windows` windows are the proxies' fixed samples.
    """
    model, metadata = load_as_trained(checkpoint)
    model.to(device)
    seq_len = model.config.max_position_embeddings
    proxies, values, summary = _proxies(model, held_out, proxy_windows)
    accuracy = Measurement(
        measure=lambda candidate: run_tasks(
            candidate, tokenizer, tasks=tasks, include_path=task_dir, batch_size=task_batch_size, max_length=seq_len
        ),
        columns=accuracy_columns,
    )
    base_row = {**checkpoint_columns(model, metadata), **summary}
    rows = score_quantizations(
        model,
        base_row,
        quantizations,
        {"val": held_out},
        eval_tokens=eval_tokens,
        batch_size=batch_size,
        measurement=accuracy,
        pair_unquantized=True,
    )
    identity = {"run": base_row["run"], "milestone": base_row["milestone"]}
    # One held-out split: the rows name none.
    return rows.drop(columns="split"), proxies.assign(**identity), values.assign(**identity)


def attach_labels(frame: pd.DataFrame, labels: list[dict], final: int) -> pd.DataFrame:
    """`frame` (one run's rows, with a `milestone` column) repeated under each variant that trained the run, with
    `final` (the last checkpoint) and `fraction` of training."""
    labelled = with_labels(frame, labels)
    return labelled.assign(final=labelled["milestone"] == final, fraction=labelled["milestone"] / final)


def score_job(checkpoint, inputs: dict, params: dict, labels: list[dict], device: str) -> dict:
    """The scoring job of `grid.scoring`: one checkpoint's rows, proxies and block values, labelled by variant."""
    source = read_metadata(checkpoint).get("source")  # released checkpoints record their repo and revision
    # A released model re-encodes the held-out text; twice the scored tokens leaves room for a longer tokenization.
    tokenizer, held_out = task_tokenizer(
        inputs["tokenizer"], load_tokens(inputs["val"]), source, keep_tokens=2 * params["eval_tokens"]
    )
    rows, proxies, values = score_checkpoint(
        checkpoint,
        [Quantization(**q) for q in params["quantizations"]],
        held_out,
        tokenizer=tokenizer,
        tasks=params["tasks"],
        task_dir=Path(inputs["tasks"][0]).parent if source is None else None,
        eval_tokens=params["eval_tokens"],
        proxy_windows=params["proxy_windows"],
        batch_size=params["batch_size"],
        task_batch_size=params["task_batch_size"],
        device=device,
    )
    frames = {"table": rows.assign(study=STUDY), "proxies": proxies, "values": values}
    return {name: attach_labels(frame, labels, params["final_tokens"]) for name, frame in frames.items()}


def build_tasks_job(inputs: dict, outputs: dict, params: dict) -> None:
    """`ahmadian2023_build_tasks`: the zero-shot-style tasks cut from the held-out set (`qscaling.tasks`)."""
    tasks = params["tasks"]
    tokenizer = Tokenizer.from_file(inputs["tokenizer"])
    eos_id = json.loads(Path(inputs["corpus"]).read_text())["eos_id"]
    documents = held_out_documents(load_tokens(inputs["val"]), tokenizer, eos_id)
    counts = build_tasks(
        documents,
        Path(outputs["tasks"][0]).parent,
        items=tasks["items"],
        context_words=tasks["context_words"],
        continuation_words=tasks["continuation_words"],
        seed=tasks["seed"],
    )
    print(f"built {counts} from {len(documents)} held-out documents")
