"""`qscaling quantize CHECKPOINT --method {rtn,gptq,awq,w8a8} --spec SPEC [--calib TOKENS] --out DIR`.

Reads a checkpoint (the spine's HF format, safetensors only), quantizes it, and writes the same format to
DIR through `qscaling.checkpoint.save_checkpoint` (a temporary directory renamed into place, so a failure
leaves nothing half-written). The source's `qscaling.json` metadata is kept and gains a `quantization`
entry: method, spec, options, calibration (file, sha256, sequences, length, seed), seconds, and the sha256
of every source file. Weight-only results load with plain transformers; W8A8 needs
`qscaling.quant.as_trained.load_quantized_model` to re-apply its run-time activation quantization.
"""

from pathlib import Path

from qscaling.checkpoint import save_checkpoint
from qscaling.data import load_tokens
from qscaling.data.fetch import sha256_file
from qscaling.data.tokens import check_vocabulary
from qscaling.quant.as_trained import load_as_trained
from qscaling.quant.precision import ROLES
from qscaling.quant.ptq import (
    CALIBRATED_METHODS,
    DEFAULT_CALIBRATION_LENGTH,
    DEFAULT_CALIBRATION_SEED,
    DEFAULT_CALIBRATION_SEQUENCES,
    DEFAULT_ROLES,
    METHODS,
    QUANTIZATION_KEY,
    quantization_config,
    quantize_model,
    sample_calibration,
)
from qscaling.quant.w8a8 import DEFAULT_ACTIVATION_SPEC


def add_arguments(parser) -> None:
    parser.add_argument("checkpoint", type=Path, help="HF-format checkpoint directory (safetensors)")
    parser.add_argument("--method", required=True, choices=METHODS)
    parser.add_argument("--spec", required=True, help="weight quantization spec, e.g. int4:g128, int8:channel")
    parser.add_argument("--out", required=True, type=Path, help="output checkpoint directory (replaced atomically)")
    parser.add_argument("--calib", type=Path, help="uint16 token file to draw calibration sequences from (gptq, awq)")
    parser.add_argument("--calib-sequences", type=int, default=DEFAULT_CALIBRATION_SEQUENCES)
    parser.add_argument("--calib-seq-len", type=int, help=f"default: min({DEFAULT_CALIBRATION_LENGTH}, model context)")
    parser.add_argument("--calib-seed", type=int, default=DEFAULT_CALIBRATION_SEED)
    parser.add_argument("--batch-size", type=int, default=8, help="calibration sequences per forward pass")
    parser.add_argument("--roles", default=",".join(DEFAULT_ROLES), help=f"comma-separated subset of {','.join(ROLES)}")
    parser.add_argument("--act-order", action="store_true", help="GPTQ: quantize columns by descending H_ii")
    parser.add_argument("--static-groups", action="store_true", help="GPTQ: group qparams from the original W")
    parser.add_argument("--true-sequential", action="store_true", help="GPTQ: re-run the block after each role")
    parser.add_argument("--damp", type=float, default=0.01, help="GPTQ: damping as a fraction of mean(diag H)")
    parser.add_argument("--block-size", type=int, default=128, help="GPTQ: lazy-batch width in columns")
    parser.add_argument("--grid-points", type=int, default=20, help="AWQ: α grid size")
    parser.add_argument("--activation-spec", default=DEFAULT_ACTIVATION_SPEC, help="W8A8: input activation spec")
    parser.add_argument("--outlier-threshold", type=float, help="W8A8: keep input columns with |x| > t exact")


def run(args) -> int:
    if args.method in CALIBRATED_METHODS and args.calib is None:
        raise ValueError(f"--calib: method {args.method!r} needs a calibration token file, got none")
    roles = tuple(role for role in args.roles.split(",") if role)
    model, source_metadata = load_as_trained(args.checkpoint)
    calib_tokens = None
    calibration = None
    if args.calib is not None and args.method in CALIBRATED_METHODS:
        context = getattr(model.config, "max_position_embeddings", DEFAULT_CALIBRATION_LENGTH)
        seq_len = args.calib_seq_len or min(DEFAULT_CALIBRATION_LENGTH, context)
        tokens = load_tokens(args.calib)
        check_vocabulary(tokens, model.config.vocab_size, f"--calib {args.calib}")
        calib_tokens = sample_calibration(tokens, args.calib_sequences, seq_len, args.calib_seed)
        calibration = {
            "tokens": str(args.calib),
            "tokens_sha256": sha256_file(args.calib),
            "sequences": args.calib_sequences,
            "seq_len": seq_len,
            "seed": args.calib_seed,
        }
    config = quantization_config(
        args.method,
        args.spec,
        roles=roles,
        gptq={
            "block_size": args.block_size,
            "damp": args.damp,
            "act_order": args.act_order,
            "static_groups": args.static_groups,
            "true_sequential": args.true_sequential,
        },
        awq={"grid_points": args.grid_points},
        w8a8={"activation_spec": args.activation_spec, "outlier_threshold": args.outlier_threshold},
    )
    metadata = quantize_model(model, config, calib_tokens, batch_size=args.batch_size)
    if calibration is not None:
        metadata["calibration"] = calibration
    metadata["source"] = {
        "checkpoint": str(args.checkpoint),
        "sha256": {p.name: sha256_file(p) for p in sorted(args.checkpoint.iterdir()) if p.is_file()},
    }
    source_metadata.pop("weights_sha256", None)  # save_checkpoint records the new weights' hash
    save_checkpoint(model, args.out, {**source_metadata, QUANTIZATION_KEY: metadata})
    print(f"{args.method} {metadata['spec']}: {metadata['seconds']:.1f} s -> {args.out}")
    return 0
