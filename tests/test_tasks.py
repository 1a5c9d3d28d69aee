"""Zero-shot-style tasks from held-out text, run through lm-evaluation-harness on an in-memory model."""

import json

import numpy as np
import pytest
import torch

from qscaling.data.tokens import EOS, train_tokenizer
from qscaling.model import ModelShape, build_model
from qscaling.tasks import (
    TASKS,
    build_tasks,
    cloze_items,
    continuation_items,
    held_out_documents,
    hf_tokenizer,
    lastword_items,
    run_tasks,
)

WORDS = [
    "the",
    "whale",
    "ship",
    "sea",
    "captain",
    "Ahab",
    "harpoon",
    "white",
    "deep",
    "boat",
    "crew",
    "storm",
    "wind",
    "sail",
    "night",
    "moon",
    "star",
    "island",
    "shore",
    "wave",
]


def synthetic_documents(count=6, length=120, seed=0):
    rng = np.random.default_rng(seed)
    return [[WORDS[i] for i in rng.integers(0, len(WORDS), length)] for _ in range(count)]


def test_held_out_documents_split_on_eos(tmp_path):
    tokenizer = train_tokenizer([" ".join(d) for d in synthetic_documents()], 300)
    eos = tokenizer.token_to_id(EOS)
    ids = tokenizer.encode("the white whale").ids + [eos] + tokenizer.encode("a deep\nsea").ids + [eos]
    assert held_out_documents(np.array(ids, dtype=np.uint16), tokenizer, eos) == [
        ["the", "white", "whale"],
        ["a", "deep", "sea"],
    ]


def test_items_have_the_promised_structure():
    documents = synthetic_documents()
    for item in lastword_items(documents, items=20, context_words=10, seed=0):
        context = item["context"].split()
        assert len(context) == 10 and item["target"].startswith(" ") and item["target"][1:] in context
    for item in continuation_items(documents, items=20, context_words=10, continuation_words=4, seed=0):
        assert len(item["choices"]) == 4 == len(set(item["choices"]))
        assert all(len(choice.split()) == 4 for choice in item["choices"])
    truths = 0
    for document in documents:
        text = " ".join(document)
        for item in continuation_items(documents, items=20, context_words=10, continuation_words=4, seed=0):
            truths += f"{item['context']} {item['choices'][item['label']]}" in text
    assert truths == 20  # each item's labelled choice is its passage's true continuation
    for item in cloze_items(documents, items=20, context_words=10, continuation_words=4, seed=0):
        stems = {" ".join(context.split()[:-1]) for context in item["contexts"]}
        assert len(stems) == 1 and len({c.split()[-1] for c in item["contexts"]}) == 4
        full = f"{item['contexts'][item['label']]} {item['suffix']}"
        assert any(full in " ".join(document) for document in documents)


def test_items_are_skipped_when_no_distractors_exist():
    documents = synthetic_documents()  # "Ahab" is the only capitalised word: it can never be a cloze answer
    items = cloze_items(documents, items=200, context_words=10, continuation_words=4, seed=0)
    assert len(items) == 200 and all(c.split()[-1] != "Ahab" for item in items for c in item["contexts"])
    assert continuation_items(documents[:1], items=5, context_words=10, continuation_words=4, seed=0) == []


def test_build_tasks_is_deterministic_and_checks_its_inputs(tmp_path):
    documents = synthetic_documents()
    counts = build_tasks(documents, tmp_path / "a", items=8, context_words=10, continuation_words=4, seed=3)
    build_tasks(documents, tmp_path / "b", items=8, context_words=10, continuation_words=4, seed=3)
    assert counts == {task: 8 for task in TASKS}
    for task in TASKS:
        assert (tmp_path / "a" / f"{task}.jsonl").read_bytes() == (tmp_path / "b" / f"{task}.jsonl").read_bytes()
    with pytest.raises(ValueError, match="items=0"):
        build_tasks(documents, tmp_path / "c", items=0, context_words=10, continuation_words=4, seed=0)
    with pytest.raises(ValueError, match="no passage of 500 \\+ 4 words"):
        build_tasks(documents, tmp_path / "d", items=4, context_words=500, continuation_words=4, seed=0)


def reference_loglikelihood(model, tokenizer, context: str, continuation: str) -> tuple[float, bool]:
    """Sum of log-probabilities of `continuation` after `context`, and whether greedy decoding reproduces it:
    the context/continuation split is made on the tokens of the joined string, as lm-evaluation-harness does."""
    whole = tokenizer(context + continuation, add_special_tokens=False)["input_ids"]
    split = len(tokenizer(context, add_special_tokens=False)["input_ids"])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([whole])).logits[0].log_softmax(-1)
    targets = torch.tensor(whole[split:])
    predicted = logits[split - 1 : len(whole) - 1]
    return float(predicted.gather(1, targets[:, None]).sum()), bool((predicted.argmax(-1) == targets).all())


def test_lm_evaluation_harness_scores_match_a_direct_computation(tmp_path):
    documents = synthetic_documents()
    tokenizer_file = tmp_path / "tokenizer.json"
    train_tokenizer([" ".join(d) for d in documents], 300).save(str(tokenizer_file))
    tokenizer = hf_tokenizer(tokenizer_file, EOS)
    model = build_model(ModelShape(d_model=16, n_layers=1, n_heads=2, d_ff=32, vocab_size=300, seq_len=64), seed=2)
    model.eval()
    build_tasks(documents, tmp_path / "tasks", items=6, context_words=8, continuation_words=3, seed=0)
    results = run_tasks(model, tokenizer, tasks=TASKS, include_path=tmp_path / "tasks", batch_size=8, max_length=64)

    def rows(task):
        return [json.loads(line) for line in (tmp_path / "tasks" / f"{task}.jsonl").read_text().splitlines()]

    greedy = [reference_loglikelihood(model, tokenizer, r["context"], r["target"])[1] for r in rows(TASKS[0])]
    assert results[TASKS[0]]["correct"].tolist() == [int(g) for g in greedy]
    chosen = [
        int(np.argmax([reference_loglikelihood(model, tokenizer, r["context"], f" {c}")[0] for c in r["choices"]]))
        == r["label"]
        for r in rows(TASKS[1])
    ]
    assert results[TASKS[1]]["correct"].tolist() == [int(c) for c in chosen]
    cloze = [
        int(np.argmax([reference_loglikelihood(model, tokenizer, c, f" {r['suffix']}")[0] for c in r["contexts"]]))
        == r["label"]
        for r in rows(TASKS[2])
    ]
    assert results[TASKS[2]]["correct"].tolist() == [int(c) for c in cloze]
    assert results[TASKS[1]]["acc"] == pytest.approx(np.mean(chosen))
    with pytest.raises(ValueError, match="not found"):
        run_tasks(model, tokenizer, tasks=["qscaling_missing"], include_path=tmp_path / "tasks")
