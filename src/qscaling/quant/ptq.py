"""Model-level post-training quantization: RTN, GPTQ, AWQ and W8A8 over every Linear of a causal LM.

`quantize_model(model, config, calib_tokens)` quantizes in place as a method's config says (`RTN`, `GPTQ`, `AWQ`,
`W8A8`; `quantization_config` builds one from names) and returns JSON-able metadata.
Calibration-based methods (GPTQ, AWQ) run block by block: the inputs of block 0 are captured once, each
block is processed, and its outputs become the next block's inputs (GPTQ: outputs of the *quantized* block,
as in the reference `opt_sequential`; AWQ: outputs of the scaled full-precision block, as in llm-awq).

A model loaded as trained with a `training_precision` (fake-quantized Linears, `qscaling.quant.qat`) is
post-quantized from its latent weights: the PTQ of a Linear's weights replaces its training-time weight quantizer,
while the run's activation and KV quantizers stay, so the model is as trained apart from its weights. GPTQ's
Hessians use the inputs the GEMMs multiply (the quantized activations); W8A8's input quantizer comes after the
run's; AWQ leaves unscaled (plain RTN) every Linear whose scale would pass through a training-time quantizer.
"""

import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from qscaling.quant import QuantSpec, parse_spec
from qscaling.quant.awq import DEFAULT_GRID_POINTS, awq_scale_block, check_grid_points
from qscaling.quant.gptq import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_DAMP,
    HessianAccumulator,
    check_gptq_options,
    gptq_quantize_weight,
)
from qscaling.quant.precision import ROLES
from qscaling.quant.qat import (
    QuantizedTrainingLinear,
    drop_weight_quantizers,
    forward_quantizers,
    gemm_input,
    quantize_trained_linear_inputs,
)
from qscaling.quant.roles import BLOCK_ROLE_ORDER, decoder_blocks, linear_sites, model_layout, untie_lm_head
from qscaling.quant.rtn import rtn_quantize_linear
from qscaling.quant.w8a8 import DEFAULT_ACTIVATION_SPEC, check_outlier_threshold, quantize_linear_inputs

DEFAULT_ROLES = ("qkv", "o", "fc1", "fc2")  # lm_head stays full precision, as in GPTQ / AWQ / Kumar et al.
# GPTQ paper, Sec. 5 "Calibration data": 128 random 2048-token segments.
DEFAULT_CALIBRATION_SEQUENCES = 128
DEFAULT_CALIBRATION_LENGTH = 2048
DEFAULT_CALIBRATION_SEED = 0
QUANTIZATION_KEY = "quantization"  # the entry `qscaling quantize` adds to a checkpoint's qscaling.json


@dataclass(frozen=True)
class QuantizationConfig:
    """What every method's config has: the weight `spec` (a QuantSpec or its string) and the `roles` of the Linears
    it quantizes (`precision.ROLES`)."""

    spec: QuantSpec
    roles: tuple[str, ...] = DEFAULT_ROLES
    method: ClassVar[str]  # its name in `METHODS` and in the metadata
    calibrated: ClassVar[bool] = False  # whether the method needs calibration tokens

    def __post_init__(self):
        unknown_roles = sorted(set(self.roles) - set(ROLES))
        if unknown_roles:
            raise ValueError(f"roles: got {unknown_roles}, valid: {', '.join(ROLES)}")
        object.__setattr__(self, "roles", tuple(sorted(self.roles, key=ROLES.index)))
        object.__setattr__(self, "spec", parse_spec(self.spec))


@dataclass(frozen=True)
class RTN(QuantizationConfig):
    """Round-to-nearest of each selected Linear's weights, no data."""

    method: ClassVar[str] = "rtn"


@dataclass(frozen=True)
class GPTQ(QuantizationConfig):
    """GPTQ (`qscaling.quant.gptq`), block by block on calibration data; `true_sequential` re-runs the block after
    each role (`roles.BLOCK_ROLE_ORDER`) so later roles see the earlier ones quantized."""

    block_size: int = DEFAULT_BLOCK_SIZE  # lazy-batch width in columns
    damp: float = DEFAULT_DAMP  # a fraction of mean(diag H)
    act_order: bool = False  # quantize columns by descending H_ii
    static_groups: bool = False  # group qparams from the original weights
    true_sequential: bool = False
    method: ClassVar[str] = "gptq"
    calibrated: ClassVar[bool] = True

    def __post_init__(self):
        super().__post_init__()
        check_gptq_options(self.spec, block_size=self.block_size)

    @property
    def weight_options(self) -> dict:
        """The keyword arguments of `gptq_quantize_weight`."""
        return {
            "block_size": self.block_size,
            "damp": self.damp,
            "act_order": self.act_order,
            "static_groups": self.static_groups,
        }


@dataclass(frozen=True)
class AWQ(QuantizationConfig):
    """AWQ (`qscaling.quant.awq`): per-channel scales searched over `grid_points` values of α on calibration
    data, then RTN."""

    grid_points: int = DEFAULT_GRID_POINTS
    method: ClassVar[str] = "awq"
    calibrated: ClassVar[bool] = True

    def __post_init__(self):
        super().__post_init__()
        check_grid_points(self.grid_points)


@dataclass(frozen=True)
class W8A8(QuantizationConfig):
    """RTN weights, and the inputs of the same Linears fake-quantized at run time at `activation_spec` (a QuantSpec
    or its string; per-token INT8 by default), input columns with |x| > `outlier_threshold` kept in full precision
    when given (LLM.int8's 6.0)."""

    activation_spec: QuantSpec = DEFAULT_ACTIVATION_SPEC
    outlier_threshold: float | None = None
    method: ClassVar[str] = "w8a8"

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "activation_spec", parse_spec(self.activation_spec))
        check_outlier_threshold(self.outlier_threshold)


CONFIGS = {config.method: config for config in (RTN, GPTQ, AWQ, W8A8)}
METHODS = tuple(CONFIGS)
CALIBRATED_METHODS = tuple(method for method, config in CONFIGS.items() if config.calibrated)


def quantization_config(method: str, spec, *, roles=DEFAULT_ROLES, **method_options: dict) -> QuantizationConfig:
    """The config of `method` at weight `spec`, for callers that hold names (a study's grid, the command line).

    `method_options` gives each method's own options under its name, e.g. `gptq={"damp": 0.02}`; only those of
    `method` are used, so one call can carry every method's.
    """
    if method not in CONFIGS:
        raise ValueError(f"method: got {method!r}, valid: {', '.join(METHODS)}")
    unknown = sorted(set(method_options) - set(CONFIGS))
    if unknown:
        raise TypeError(f"method options: got {unknown}, valid: {', '.join(METHODS)}")
    return CONFIGS[method](spec, roles, **method_options.get(method, {}))


def sample_calibration(tokens: np.ndarray, n_sequences: int, seq_len: int, seed: int) -> torch.Tensor:
    """`n_sequences` windows of `seq_len` tokens at seeded random offsets of a flat token stream."""
    if seq_len < 1 or n_sequences < 1:
        raise ValueError(f"calibration: n_sequences={n_sequences}, seq_len={seq_len}; both must be ≥ 1")
    if len(tokens) <= seq_len:
        raise ValueError(f"calibration: the token file has {len(tokens)} tokens, need more than seq_len={seq_len}")
    starts = np.random.default_rng(seed).integers(0, len(tokens) - seq_len, size=n_sequences)
    windows = np.stack([np.asarray(tokens[start : start + seq_len], dtype=np.int64) for start in starts])
    return torch.from_numpy(windows)


class _StopForward(Exception):
    """Raised by the capture hook once block 0's inputs are recorded: nothing after it needs to run."""


@dataclass
class BlockCall:
    """The positional and keyword arguments one calibration batch passes to a decoder block."""

    args: tuple
    kwargs: dict

    @property
    def hidden(self) -> torch.Tensor:
        return self.args[0] if self.args else self.kwargs["hidden_states"]

    def run(self, block: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
        """The block's output hidden states for `hidden` in place of the recorded input."""
        if self.args:
            output = block(hidden, *self.args[1:], **self.kwargs)
        else:
            output = block(**{**self.kwargs, "hidden_states": hidden})
        return output[0] if isinstance(output, tuple) else output


def capture_block_inputs(model: nn.Module, batches) -> list[BlockCall]:
    """Run the part of the model before block 0 on each batch of token ids and record block 0's arguments."""
    calls = []

    def record(module, args, kwargs):
        calls.append(BlockCall(args, dict(kwargs)))
        raise _StopForward

    hook = decoder_blocks(model)[0].register_forward_pre_hook(record, with_kwargs=True)
    try:
        for batch in batches:
            try:
                model(input_ids=batch.to(model.device), use_cache=False)
            except _StopForward:
                pass
    finally:
        hook.remove()
    return calls


def _selected_sites(model, roles):
    return [site for site in linear_sites(model) if site.role in roles]


def _run_blocks(block, calls, hiddens):
    return [call.run(block, hidden) for call, hidden in zip(calls, hiddens)]


def _accumulate_hessians(modules: dict[str, nn.Linear], run_forward) -> dict[str, HessianAccumulator]:
    """Hessians of what each Linear's GEMM multiplies its weight by, gathered by forward hooks while `run_forward()`
    runs: its input, or the quantized input where the run trained with an activation quantizer."""
    accumulators = {name: HessianAccumulator(m.in_features, m.weight.device) for name, m in modules.items()}
    hooks = [
        module.register_forward_hook(lambda mod, args, out, acc=accumulators[name]: acc.add(gemm_input(mod, args[0])))
        for name, module in modules.items()
    ]
    try:
        run_forward()
    finally:
        for hook in hooks:
            hook.remove()
    return accumulators


def _gptq_model(model, config: GPTQ, sites, calls, batches) -> dict[str, float]:
    """GPTQ every selected Linear, block by block; returns each layer's Hessian-weighted error."""
    spec, options = config.spec, config.weight_options
    losses = {}
    hiddens = [call.hidden for call in calls]
    for index, block in enumerate(decoder_blocks(model)):
        block_sites = [site for site in sites if site.block == index]
        if config.true_sequential:
            stages = [[site for site in block_sites if site.role == role] for role in BLOCK_ROLE_ORDER]
        else:
            stages = [block_sites]
        for stage in filter(None, stages):
            modules = {site.name: site.module for site in stage}
            accumulators = _accumulate_hessians(modules, lambda: _run_blocks(block, calls, hiddens))
            for name, module in modules.items():
                module.weight.data, losses[name] = gptq_quantize_weight(
                    module.weight.data, accumulators[name].hessian, spec, **options
                )
        hiddens = _run_blocks(block, calls, hiddens)
    for head in (site for site in sites if site.block is None):
        # The lm_head sees the final norm of the last quantized block: one full forward gathers its inputs.
        accumulators = _accumulate_hessians({head.name: head.module}, lambda: _forward_batches(model, batches))
        head.module.weight.data, losses[head.name] = gptq_quantize_weight(
            head.module.weight.data, accumulators[head.name].hessian, spec, **options
        )
    return losses


def _forward_batches(model, batches):
    for batch in batches:
        model(input_ids=batch.to(model.device), use_cache=False)


def _scale_fold_consumers(model) -> dict[str, bool]:
    """Every Linear AWQ can scale (a `ScaleFold` consumer) -> whether that scale would pass through a training-time
    quantizer: x/s into the consumer's input quantizer, or W/s, y/s into the previous Linear's weight or KV
    quantizer (the weight quantizers of the Linears being quantized are already gone: their PTQ replaces them).
    Such a quantizer would see values on another grid than the model trained with."""
    layout = model_layout(model)
    consumers = {}
    for index, block in enumerate(decoder_blocks(model)):
        prefix = f"{layout.blocks}.{index}."
        for fold in layout.scale_folds:
            inputs_quantized = any("activations" in forward_quantizers(block.get_submodule(c)) for c in fold.consumers)
            previous_quantized = set(forward_quantizers(block.get_submodule(fold.previous)))
            for consumer in fold.consumers:
                consumers[prefix + consumer] = inputs_quantized or bool(previous_quantized & {"weights", "kv"})
    return consumers


def _awq_unscaled(model, sites) -> list[str]:
    """The selected Linears AWQ must leave unscaled (plain RTN) to keep the run's training-time quantizers intact;
    an error where that is every Linear it could scale, since the result would be RTN under another name."""
    consumers = _scale_fold_consumers(model)
    scalable = [site.name for site in sites if site.name in consumers]
    unscaled = [name for name in scalable if consumers[name]]
    if scalable and len(unscaled) == len(scalable):
        raise ValueError(
            f"awq on {model.name_or_path or 'this model'}: every scale would pass through a training-time "
            "quantizer, leaving plain RTN; use rtn or gptq"
        )
    return unscaled


def _awq_model(model, config: AWQ, sites, calls, *, unscaled) -> dict[str, float]:
    """AWQ scale search block by block, then RTN of every selected Linear; returns each scaled Linear's best α."""
    alphas = {}
    blocks_path = model_layout(model).blocks
    selected = {site.name for site in sites} - set(unscaled)
    hiddens = [call.hidden for call in calls]
    for index, block in enumerate(decoder_blocks(model)):
        prefix = f"{blocks_path}.{index}."
        chosen = awq_scale_block(
            model,
            block,
            lambda scaled_block: _run_blocks(scaled_block, calls, hiddens),
            config.spec,
            consumers_selected=lambda path: prefix + path in selected,
            grid_points=config.grid_points,
        )
        alphas.update({prefix + path: alpha for path, alpha in chosen.items()})
        hiddens = _run_blocks(block, calls, hiddens)
    for site in sites:
        rtn_quantize_linear(site.module, config.spec)
    return alphas


@dataclass(frozen=True)
class _Calibration:
    """Calibration token ids (sequences × seq_len) and how many sequences each forward pass takes."""

    tokens: torch.Tensor
    batch_size: int

    @property
    def batches(self) -> tuple[torch.Tensor, ...]:
        return self.tokens.split(self.batch_size)

    @property
    def summary(self) -> dict:
        return {"sequences": self.tokens.shape[0], "seq_len": self.tokens.shape[1]}


def _rtn(model, config: RTN, sites, calibration) -> dict:
    for site in sites:
        rtn_quantize_linear(site.module, config.spec)
    return {}


def _w8a8(model, config: W8A8, sites, calibration) -> dict:
    _rtn(model, config, sites, calibration)
    quantize_inputs(model, [site.name for site in sites], config.activation_spec, config.outlier_threshold)
    return {"w8a8": {"activation_spec": str(config.activation_spec), "outlier_threshold": config.outlier_threshold}}


def _gptq(model, config: GPTQ, sites, calibration: _Calibration) -> dict:
    calls = capture_block_inputs(model, calibration.batches)
    return {
        "calibration": calibration.summary,
        "gptq": {**config.weight_options, "true_sequential": config.true_sequential},
        "layer_errors": _gptq_model(model, config, sites, calls, calibration.batches),
    }


def _awq(model, config: AWQ, sites, calibration: _Calibration) -> dict:
    unscaled = _awq_unscaled(model, sites)
    calls = capture_block_inputs(model, calibration.batches)
    return {
        **({"awq_unscaled": unscaled} if unscaled else {}),
        "calibration": calibration.summary,
        "awq": {"grid_points": config.grid_points},
        "awq_alphas": _awq_model(model, config, sites, calls, unscaled=unscaled),
    }


QUANTIZERS = {RTN: _rtn, GPTQ: _gptq, AWQ: _awq, W8A8: _w8a8}


def quantize_model(
    model: nn.Module, config: QuantizationConfig, calib_tokens: torch.Tensor | None = None, *, batch_size: int = 8
) -> dict:
    """Quantize `model` in place as `config` (RTN, GPTQ, AWQ or W8A8) says; returns metadata describing what was
    done, which `qscaling quantize` writes into the checkpoint.

    `calib_tokens`: (sequences × seq_len) token ids (see `sample_calibration`), required by gptq and awq, which
    run them `batch_size` sequences per forward pass.
    """
    if config.calibrated and calib_tokens is None:
        raise ValueError(f"calib_tokens: method {config.method!r} needs calibration tokens, got None")
    if "lm_head" in config.roles:
        untie_lm_head(model)
    drop_weight_quantizers(model, [site.name for site in _selected_sites(model, config.roles)])
    sites = _selected_sites(model, config.roles)  # a Linear left without a quantizer is now a plain one
    metadata = {"method": config.method, "spec": str(config.spec), "roles": list(config.roles)}
    calibration = None if calib_tokens is None else _Calibration(calib_tokens, batch_size)
    started = time.perf_counter()
    was_training = model.training
    model.eval()
    with torch.no_grad():
        metadata.update(QUANTIZERS[type(config)](model, config, sites, calibration))
    model.train(was_training)
    metadata["seconds"] = time.perf_counter() - started
    return metadata


def quantize_inputs(model, names, activation_spec, outlier_threshold) -> None:
    """W8A8's run-time input quantization of the Linears of `model` named in `names`; a quantized-training Linear
    keeps its own quantizers ahead of it."""
    trained = [name for name in names if isinstance(model.get_submodule(name), QuantizedTrainingLinear)]
    plain = [name for name in names if name not in trained]
    quantize_linear_inputs(model, plain, activation_spec, outlier_threshold)
    quantize_trained_linear_inputs(model, trained, activation_spec, outlier_threshold)
