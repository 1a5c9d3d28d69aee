"""Zero-shot-style tasks built offline from the held-out corpus, run through lm-evaluation-harness.

Ahmadian et al. (2023) score quantized models on eight zero-shot tasks (HellaSwag, PIQA, LAMBADA, WinoGrande, …).
Tiny models trained here cannot do those, and there is no hub at run time, so three tasks of the same kinds are
cut from held-out text (never trained on) and handed to lm-evaluation-harness as local task configs — its own
request building, batching and scoring, not a re-implementation:

  qscaling_lastword      LAMBADA-like: predict a passage's next word; exact match of the greedy continuation
                         (`acc` = is_greedy). As in LAMBADA, the target word already occurs in the passage, so
                         the broader context can recover it.
  qscaling_continuation  HellaSwag-like: pick the true next `continuation_words` words among 4 candidates (the
                         other three are spans from elsewhere in the held-out set); `acc` and `acc_norm`.
  qscaling_cloze         WinoGrande-style cloze: a word is blanked mid-passage and each of 4 candidate words is put
                         in its place; the choice is the one under which the rest of the passage is most likely.

At paper scale the real tasks are used by name (config `hub_tasks`), from lm-evaluation-harness's own task index.
"""

import json
import logging
import os
from pathlib import Path

import numpy as np
import yaml

TASKS = ("qscaling_lastword", "qscaling_continuation", "qscaling_cloze")
CHOICES = 4


def held_out_documents(tokens: np.ndarray, tokenizer, eos_id: int) -> list[list[str]]:
    """The held-out shard decoded back to text, one whitespace-split word list per document (EOS-separated)."""
    boundaries = np.flatnonzero(np.asarray(tokens) == eos_id)
    starts = np.concatenate([[0], boundaries + 1])
    ends = np.concatenate([boundaries, [len(tokens)]])
    documents = []
    for start, end in zip(starts, ends):
        words = tokenizer.decode(np.asarray(tokens[start:end]).tolist()).split()
        if words:
            documents.append(words)
    return documents


def _positions(documents, context_words: int, tail_words: int, rng) -> list[tuple[int, int]]:
    """Every (document, word index) with a full context before it and `tail_words` words after, shuffled."""
    positions = [(d, i) for d, words in enumerate(documents) for i in range(context_words, len(words) - tail_words)]
    order = rng.permutation(len(positions))
    return [positions[k] for k in order]


def _is_word(text: str) -> bool:
    return len(text) >= 2 and text.isalpha()


def lastword_items(documents, *, items: int, context_words: int, seed: int) -> list[dict]:
    """LAMBADA-like items: a passage of `context_words` words and its next word, which occurs in the passage."""
    rng = np.random.default_rng([seed, 0])
    chosen = []
    for d, i in _positions(documents, context_words, 1, rng):
        words = documents[d]
        context, target = words[i - context_words : i], words[i]
        if _is_word(target) and target in {w.strip(".,;:!?'\"()") for w in context}:
            chosen.append({"context": " ".join(context), "target": f" {target}"})
            if len(chosen) == items:
                break
    return chosen


def continuation_items(documents, *, items: int, context_words: int, continuation_words: int, seed: int) -> list[dict]:
    """HellaSwag-like items: the true continuation of a passage among 4, the others spans from other documents."""
    rng = np.random.default_rng([seed, 1])
    positions = _positions(documents, context_words, continuation_words, rng)
    per_document = np.bincount([d for d, _ in positions], minlength=len(documents))
    chosen = []
    for d, i in positions:
        if len(positions) - per_document[d] < CHOICES - 1:  # too little text elsewhere to draw distractors from
            continue
        words = documents[d]
        truth = " ".join(words[i : i + continuation_words])
        candidates = [truth]
        while len(candidates) < CHOICES:
            other_d, other_i = positions[rng.integers(len(positions))]
            span = " ".join(documents[other_d][other_i : other_i + continuation_words])
            if other_d != d and span not in candidates:
                candidates.append(span)
        order = rng.permutation(CHOICES)
        chosen.append(
            {
                "context": " ".join(words[i - context_words : i]),
                "choices": [candidates[k] for k in order],
                "label": int(np.flatnonzero(order == 0)[0]),
            }
        )
        if len(chosen) == items:
            break
    return chosen


def cloze_items(documents, *, items: int, context_words: int, continuation_words: int, seed: int) -> list[dict]:
    """Cloze items: 4 passages differing in one blanked word (the true one and three of the same capitalisation
    drawn from the held-out vocabulary); the target is the text after the blank (WinoGrande's partial scoring)."""
    rng = np.random.default_rng([seed, 2])
    vocabulary = sorted({w for words in documents for w in words if _is_word(w)})
    chosen = []
    for d, i in _positions(documents, context_words, continuation_words + 1, rng):
        words = documents[d]
        truth = words[i]
        if not _is_word(truth):
            continue
        same_case = {w for w in vocabulary if w != truth and w[0].isupper() == truth[0].isupper()}
        if len(same_case) < CHOICES - 1:
            continue  # too few distractors of this capitalisation: the draw below would never finish
        candidates = [truth]
        while len(candidates) < CHOICES:
            word = vocabulary[rng.integers(len(vocabulary))]
            if word not in candidates and word[0].isupper() == truth[0].isupper():
                candidates.append(word)
        order = rng.permutation(CHOICES)
        prefix = " ".join(words[i - context_words : i])
        chosen.append(
            {
                "contexts": [f"{prefix} {candidates[k]}" for k in order],
                "suffix": " ".join(words[i + 1 : i + 1 + continuation_words]),
                "label": int(np.flatnonzero(order == 0)[0]),
            }
        )
        if len(chosen) == items:
            break
    return chosen


def task_config(name: str, data_file: Path) -> dict:
    """The lm-evaluation-harness YAML config of one task reading `data_file` (JSON lines)."""
    common = {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data_file)}},
        "test_split": "test",
        "metadata": {"version": 1.0},
    }
    accuracy = {"metric": "acc", "aggregation": "mean", "higher_is_better": True}
    if name == "qscaling_lastword":
        return {
            **common,
            "output_type": "loglikelihood",
            "doc_to_text": "context",
            "doc_to_target": "target",
            "metric_list": [accuracy],
        }
    if name == "qscaling_continuation":
        return {
            **common,
            "output_type": "multiple_choice",
            "doc_to_text": "context",
            "doc_to_choice": "choices",
            "doc_to_target": "label",
            "metric_list": [accuracy, {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True}],
        }
    # An integer doc_to_text with a list of contexts is lm-evaluation-harness's multiple-input mode (WinoGrande).
    return {
        **common,
        "output_type": "multiple_choice",
        "doc_to_text": "label",
        "doc_to_choice": "contexts",
        "doc_to_target": "suffix",
        "metric_list": [accuracy],
    }


def build_tasks(documents, out_dir, *, items: int, context_words: int, continuation_words: int, seed: int) -> dict:
    """Write `<task>.jsonl` + `<task>.yaml` for every task of TASKS into `out_dir`; returns item counts.

    Data paths in the YAML files are absolute, so `lm_eval --include_path out_dir` runs them from anywhere.
    """
    if items < 1 or context_words < 1 or continuation_words < 1:
        raise ValueError(
            f"tasks: items={items}, context_words={context_words}, continuation_words="
            f"{continuation_words} must all be positive"
        )
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    built = {
        "qscaling_lastword": lastword_items(documents, items=items, context_words=context_words, seed=seed),
        "qscaling_continuation": continuation_items(
            documents, items=items, context_words=context_words, continuation_words=continuation_words, seed=seed
        ),
        "qscaling_cloze": cloze_items(
            documents, items=items, context_words=context_words, continuation_words=continuation_words, seed=seed
        ),
    }
    for name, rows in built.items():
        if not rows:
            raise ValueError(
                f"tasks: the held-out set has no passage of {context_words} + {continuation_words} "
                f"words for {name}; lower context_words or continuation_words"
            )
        data_file = out_dir / f"{name}.jsonl"
        data_file.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))
        (out_dir / f"{name}.yaml").write_text(yaml.safe_dump(task_config(name, data_file), sort_keys=True))
    return {name: len(rows) for name, rows in built.items()}


def hf_tokenizer(tokenizer_file: str | os.PathLike, eos_token: str):
    """Our `tokenizers` BPE as the transformers tokenizer lm-evaluation-harness expects."""
    from transformers import PreTrainedTokenizerFast  # building the task items (at parse time) needs no torch

    return PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file), eos_token=eos_token, pad_token=eos_token)


def run_tasks(
    model,
    tokenizer,
    *,
    tasks,
    include_path=None,
    batch_size: int = 32,
    max_length: int | None = None,
    limit: int | None = None,
) -> dict[str, dict]:
    """Run `tasks` on an in-memory model through `lm_eval.simple_evaluate`.

    `include_path`: the directory `build_tasks` wrote (None: lm-evaluation-harness's own tasks, by name).
    Returns {task: {"acc": float, "correct": int8 array per item in document order, …other metrics}}; the
    per-item scores let two models scored on the same items be compared pair by pair.
    """
    # lm-evaluation-harness takes seconds to import and only running the tasks needs it
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    for noisy in ("lm_eval", "lm-eval", "datasets"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    device = str(next(model.parameters()).device)
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, max_length=max_length, device=device)
    manager = TaskManager(
        include_path=str(include_path) if include_path else None, include_defaults=include_path is None
    )
    unknown = sorted(set(tasks) - set(manager.all_tasks))
    if unknown:
        where = include_path or "lm-evaluation-harness's task index"
        raise ValueError(f"tasks: {unknown} not found in {where}")
    output = simple_evaluate(
        model=lm,
        tasks=list(tasks),
        task_manager=manager,
        num_fewshot=0,
        limit=limit,
        log_samples=True,
        bootstrap_iters=0,
        random_seed=0,
        numpy_random_seed=0,
        torch_random_seed=0,
        fewshot_random_seed=0,
    )
    results = {}
    for task in tasks:
        samples = sorted(output["samples"][task], key=lambda sample: sample["doc_id"])
        metrics = {
            key.split(",")[0]: value
            for key, value in output["results"][task].items()
            if key.endswith(",none") and "stderr" not in key
        }
        results[task] = {**metrics, "correct": np.array([int(sample["acc"]) for sample in samples], dtype=np.int8)}
    return results
