"""The training-precision vocabulary, without torch: a `training_precision` block's fields, the roles and
learned quantizers it names (and the parameters these register), its canonical form and its labels. Run ids and
checkpoint labels are computed from these while the DAG is built, which must not pay for importing torch;
`qscaling.quant.qat` applies them.
"""

from qscaling.quant.spec import parse_spec

ROLES = ("qkv", "o", "fc1", "fc2", "lm_head")  # where a Linear sits: qscaling.quant.roles
WEIGHT_QUANTIZERS = ("absmax", "lsq", "lwc")  # implemented in qscaling.quant.learnable
ACTIVATION_QUANTIZERS = ("absmax", "lac")
# The nn.Parameter each learned quantizer registers on its Linear (so `weight_step` sits next to `weight`).
QUANTIZER_PARAMETER_NAMES = {"lsq": "weight_step", "lwc": "weight_clip_logit", "lac": "input_clip_logit"}

TENSOR_FIELDS = (
    "weights",
    "activations",
    "kv",
    "backward_weight",
    "backward_activation",
    "backward_grad_output",
)
STE_MODES = ("clipped", "identity")
GRAD_OUTPUT_GEMMS = ("both", "dx", "dw")
DEFAULT_EXCLUDE = ("lm_head",)
QUANTIZERS = {"weights": WEIGHT_QUANTIZERS, "activations": ACTIVATION_QUANTIZERS}
# The LinearPrecision field naming each tensor's quantizer.
QUANTIZER_ATTRIBUTES = {"weights": "weight_quantizer", "activations": "activation_quantizer"}
# The backward field that would re-quantize the latent tensor a learned quantizer stands for.
LATENT_REQUANTIZED = {"weights": "backward_weight", "activations": "backward_activation"}
FIELDS = (*TENSOR_FIELDS, "ste", "exclude", "overrides", "quantizer", "grad_output_gemms")


def is_quantizer_parameter(name: str) -> bool:
    """Whether a (dotted) parameter name is a learned quantizer's step or clipping logit."""
    return name.rsplit(".", 1)[-1] in QUANTIZER_PARAMETER_NAMES.values()


def _canonical_spec(value, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"training_precision.{where}: expected a spec string or null, got {type(value).__name__}")
    try:
        return str(parse_spec(value))
    except ValueError as error:
        raise ValueError(f"training_precision.{where}: {error}") from error


def _is_symmetric_int(spec: str | None) -> bool:
    return spec is not None and parse_spec(spec).kind == "int" and parse_spec(spec).symmetric


def _canonical_quantizer(quantizer, canonical: dict) -> dict:
    """{weights, activations} -> quantizer name, checked against the canonical tensor fields it learns a scale for."""
    if not isinstance(quantizer, dict):
        raise TypeError(
            f"training_precision.quantizer: expected a mapping {{weights: ..., activations: ...}}, "
            f"got {type(quantizer).__name__}"
        )
    unknown = sorted(set(quantizer) - set(QUANTIZERS))
    if unknown:
        raise ValueError(f"training_precision.quantizer: unknown field(s) {unknown}, valid: {', '.join(QUANTIZERS)}")
    chosen = {}
    for field, valid in QUANTIZERS.items():
        name = chosen[field] = quantizer.get(field, "absmax")
        where = f"training_precision.quantizer.{field}"
        if name not in valid:
            raise ValueError(f"{where}: got {name!r}, valid: {', '.join(valid)}")
        if name == "absmax":
            continue
        if not _is_symmetric_int(canonical[field]):
            raise ValueError(
                f"{where}: {name!r} learns the scale of a symmetric INT spec, but training_precision.{field} is "
                f"{canonical[field] or 'null'!r}; give it one (e.g. int4:g128) or use absmax"
            )
        for role, specs in canonical["overrides"].items():
            if specs.get(field) is not None and not _is_symmetric_int(specs[field]):
                raise ValueError(
                    f"{where}: {name!r} learns the scale of a symmetric INT spec, but "
                    f"training_precision.overrides.{role}.{field} is {specs[field]!r}"
                )
        backward = LATENT_REQUANTIZED[field]
        if canonical[backward] is not None or any(specs.get(backward) for specs in canonical["overrides"].values()):
            raise ValueError(
                f"{where}: {name!r} does not combine with {backward}, which re-quantizes the latent tensor "
                "(not the learned quantizer's output)"
            )
    return dict(sorted(chosen.items()))


def canonical_training_precision(precision: dict | None) -> dict:
    """The validated precision with every default filled in and keys sorted: part of a run's identity.

    None (full-precision training) gives the all-null precision, so both spellings hash alike. `quantizer` appears
    only when a learned one is chosen, and `grad_output_gemms` only when it is not "both", so every precision
    written before they existed keeps its run id.
    """
    precision = {} if precision is None else precision
    if not isinstance(precision, dict):
        raise TypeError(f"training_precision: expected a mapping or null, got {type(precision).__name__}")
    unknown = sorted(set(precision) - set(FIELDS))
    if unknown:
        raise ValueError(f"training_precision: unknown field(s) {unknown}, valid: {', '.join(FIELDS)}")
    canonical = {field: _canonical_spec(precision.get(field), field) for field in TENSOR_FIELDS}
    canonical["ste"] = precision.get("ste", "clipped")
    if canonical["ste"] not in STE_MODES:
        raise ValueError(f"training_precision.ste: got {canonical['ste']!r}, valid: {', '.join(STE_MODES)}")
    exclude = precision.get("exclude", list(DEFAULT_EXCLUDE))
    bad_roles = sorted(set(exclude) - set(ROLES)) if isinstance(exclude, (list, tuple)) else exclude
    if bad_roles:
        raise ValueError(f"training_precision.exclude: got {bad_roles!r}, valid roles: {', '.join(ROLES)}")
    canonical["exclude"] = sorted(set(exclude), key=ROLES.index)
    overrides = precision.get("overrides", {})
    if not isinstance(overrides, dict) or not set(overrides) <= set(ROLES):
        raise ValueError(f"training_precision.overrides: got {overrides!r}, keys must be roles: {', '.join(ROLES)}")
    canonical["overrides"] = {}
    for role in sorted(overrides, key=ROLES.index):
        unknown = sorted(set(overrides[role]) - set(TENSOR_FIELDS))
        if unknown:
            raise ValueError(
                f"training_precision.overrides.{role}: unknown field(s) {unknown}, valid: {', '.join(TENSOR_FIELDS)}"
            )
        canonical["overrides"][role] = {
            field: _canonical_spec(value, f"overrides.{role}.{field}")
            for field, value in sorted(overrides[role].items())
        }
    quantizer = _canonical_quantizer(precision.get("quantizer") or {}, canonical)
    if set(quantizer.values()) != {"absmax"}:
        canonical["quantizer"] = quantizer
    gemms = precision.get("grad_output_gemms", "both")
    if gemms not in GRAD_OUTPUT_GEMMS:
        raise ValueError(f"training_precision.grad_output_gemms: got {gemms!r}, valid: {', '.join(GRAD_OUTPUT_GEMMS)}")
    if gemms != "both":
        if canonical["backward_grad_output"] is None and not any(
            specs.get("backward_grad_output") for specs in canonical["overrides"].values()
        ):
            raise ValueError(
                f"training_precision.grad_output_gemms: {gemms!r} chooses where backward_grad_output quantizes dY, "
                "but no backward_grad_output is set"
            )
        canonical["grad_output_gemms"] = gemms
    return dict(sorted(canonical.items()))


# How `training_precision_label` names each tensor field: the forward GEMM's W and A, the k/v outputs, and the
# backward GEMMs' re-quantized W (in dX), X (in dW) and dY (Sun et al. 2025's P4, P6, P3/P5).
FIELD_LABELS = {
    "weights": "W",
    "activations": "A",
    "kv": "KV",
    "backward_weight": "bwd W",
    "backward_activation": "bwd A",
    "backward_grad_output": "bwd dY",
}


def _tensor_labels(specs: dict) -> list[str]:
    return [f"{FIELD_LABELS[field]} {specs[field] or 'fp32'}" for field in TENSOR_FIELDS if field in specs]


def training_precision_label(precision: dict | None, autocast: str | None = None) -> str:
    """A short, stable name of how a run trained, for table rows and legends: "fp32", "autocast bf16", or the
    quantized tensors of its canonical precision joined by " · ", e.g. "W int4:g128 · A int4:g128".

    Defaults are left out; anything else appears, so two precisions with one label train alike: learned
    quantizers ("W lsq", "A lac"), non-default exclusions ("exclude fc2"; "exclude none"), per-role overrides
    ("fc2(A int8:g128)") and "STE identity".
    """
    canonical = canonical_training_precision(precision)
    parts = [] if autocast is None else [f"autocast {autocast}"]
    quantized = {field: canonical[field] for field in TENSOR_FIELDS if canonical[field] is not None}
    overrides = {role: specs for role, specs in canonical["overrides"].items() if specs}
    # Exclusions, overrides to full precision and the STE change nothing when no tensor is quantized.
    if not quantized and not any(any(specs.values()) for specs in overrides.values()):
        return " · ".join(parts) or "fp32"
    parts += _tensor_labels(quantized)
    learned = canonical.get("quantizer", {})
    parts += [
        f"{FIELD_LABELS[field]} {learned[field]}" for field in QUANTIZERS if learned.get(field, "absmax") != "absmax"
    ]
    parts += [f"{role}({', '.join(_tensor_labels(specs))})" for role, specs in overrides.items()]
    if "grad_output_gemms" in canonical:
        parts.append(f"bwd dY in d{canonical['grad_output_gemms'][1].upper()} only")
    if canonical["exclude"] != list(DEFAULT_EXCLUDE):
        parts.append(f"exclude {','.join(canonical['exclude']) or 'none'}")
    if canonical["ste"] != "clipped":
        parts.append(f"STE {canonical['ste']}")
    return " · ".join(parts)


def run_precision_label(spec: dict) -> str | None:
    """`training_precision_label` of a run spec as a checkpoint's metadata stores it (`RunSpec.to_dict`); None for
    a spec that does not record how its run trained (a hub checkpoint's)."""
    if "training_precision" not in spec:
        return None
    return training_precision_label(spec["training_precision"], spec.get("autocast"))
