"""`qscaling bench train`: tokens/s of our training step vs a plain loop over stock transformers + AdamW.

Both sides train the same LlamaForCausalLM shape on the same batches. The baseline is what one writes first:
`model(input_ids, labels=...)` (transformers shifts the labels by slicing the logits) and a default
`torch.optim.AdamW`. Ours is `qscaling.train.training_step`: labels shifted in the window instead of slicing
logits, and the optimizer from `make_optimizer`. Repeats interleave the two so drift hits both alike.
`--precision SPEC` also times our step as QAT with the `--quantized` training-precision fields (default weights and
activations: Chen et al.'s W4A4 at `int4:g32`; `weights,backward_weight,backward_activation` is Sun et al.'s
P2, P4, P6) fake-quantized at SPEC, and prints its step time against our full-precision step's, measured in the
same run.
`--device cuda` times both on a GPU (`qscaling bench device` reads `measure` from here).
"""

import dataclasses
import statistics
import time

import numpy as np
import torch

from qscaling.device import resolve_device, synchronize
from qscaling.model import ModelShape, build_model
from qscaling.quant.qat import apply_training_precision
from qscaling.train import RunSpec, make_optimizer, training_step


def _batches(shape: ModelShape, batch_size: int, count: int, device: str) -> list[torch.Tensor]:
    rng = np.random.default_rng(0)
    return [
        torch.from_numpy(rng.integers(0, shape.vocab_size, (batch_size, shape.seq_len + 1))).to(device)
        for _ in range(count)
    ]


def _time_ours(spec: RunSpec, batches, device: str) -> float:
    model = build_model(spec.shape, seed=0)
    if spec.training_precision:
        apply_training_precision(model, spec.training_precision)
    model.to(device).train()
    optimizer = make_optimizer(model, spec)
    scaler = torch.amp.GradScaler(torch.device(device).type, enabled=False)
    training_step(model, optimizer, scaler, batches[0], spec)
    synchronize(device)
    started = time.perf_counter()
    for batch in batches:
        training_step(model, optimizer, scaler, batch, spec)
    synchronize(device)
    return len(batches) * spec.tokens_per_step / (time.perf_counter() - started)


def _time_plain(spec: RunSpec, batches, device: str) -> float:
    model = build_model(spec.shape, seed=0).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, betas=spec.betas, weight_decay=spec.weight_decay)

    def step(batch):
        loss = model(input_ids=batch[:, :-1], labels=batch[:, :-1]).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip)
        optimizer.step()

    step(batches[0])
    synchronize(device)
    started = time.perf_counter()
    for batch in batches:
        step(batch)
    synchronize(device)
    return len(batches) * spec.tokens_per_step / (time.perf_counter() - started)


def add_arguments(parser) -> None:
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--n-layers", type=int, default=2)
    parser.add_argument("--vocab-size", type=int, default=2048)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--precision", metavar="SPEC", help="also time QAT with the --quantized tensors at this spec")
    parser.add_argument(
        "--quantized",
        default="weights,activations",
        metavar="FIELDS",
        help="comma-separated training_precision fields --precision sets (default: weights,activations)",
    )
    parser.add_argument("--device", default="auto", help="cpu, cuda, or auto (cuda when torch sees a GPU)")


def measure(args) -> dict:
    """Median tokens/s of the plain loop, our step and (with --precision) our QAT step, over args.repeats."""
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    shape = ModelShape(
        args.d_model,
        args.n_layers,
        max(1, args.d_model // 16),
        round(8 * args.d_model / 3),
        args.vocab_size,
        args.seq_len,
    )
    spec = RunSpec(size="bench", shape=shape, data="random", batch_size=args.batch_size)
    batches = _batches(shape, args.batch_size, args.steps, device)
    qat_spec = None
    if args.precision:
        fields = [field.strip() for field in args.quantized.split(",")]
        qat_spec = dataclasses.replace(spec, training_precision=dict.fromkeys(fields, args.precision))
    ours, plain, qat = [], [], []
    for _ in range(args.repeats):
        plain.append(_time_plain(spec, batches, device))
        ours.append(_time_ours(spec, batches, device))
        if qat_spec is not None:
            qat.append(_time_ours(qat_spec, batches, device))
    return {
        "model": f"d_model={shape.d_model} layers={shape.n_layers} N={shape.non_embedding_params:,} "
        f"vocab={shape.vocab_size} seq={shape.seq_len} batch={args.batch_size} threads={args.threads} device={device}",
        "plain_tokens_per_s": statistics.median(plain),
        "ours_tokens_per_s": statistics.median(ours),
        "qat_precision": args.precision,
        "qat_fields": args.quantized,
        "qat_tokens_per_s": statistics.median(qat) if qat else None,
    }


def run(args) -> int:
    result = measure(args)
    ours, plain, qat = result["ours_tokens_per_s"], result["plain_tokens_per_s"], result["qat_tokens_per_s"]
    print(f"model: {result['model']}")
    print(f"plain transformers + AdamW : {plain:>10,.0f} tokens/s")
    print(f"qscaling training_step     : {ours:>10,.0f} tokens/s")
    print(f"ratio (ours / plain)       : {ours / plain:.2f}x")
    if qat is not None:
        print(f"qscaling QAT step, {args.quantized} at {args.precision}: {qat:,.0f} tokens/s")
        print(f"QAT step time / full-precision step time: {ours / qat:.2f}x")
    return 0
