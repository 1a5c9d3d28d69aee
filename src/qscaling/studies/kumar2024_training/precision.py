"""The study's precision labels (torch-free): which tensors a label such as W4A8KV8 quantizes, in which format and
at which granularity; the training precision a run gets from it; the P_w, P_a, P_kv the laws read; the sweep it
belongs to."""

import re

FULL = "fp32"  # the precision label of every full-precision partner
FULL_BITS = 32.0  # P_x of a tensor trained in fp32, as the N_eff law reads it
# A label: terms W, A, KV (in that order), each INT bits ("4") or an FP format ("E3M2"); a one-term label may end in
# "/tensor" or "/channel", a granularity other than the paper's (the Fig. 13 ablation).
PRECISION_PATTERN = re.compile(r"(?:W(\d+|E\dM\d))?(?:A(\d+|E\dM\d))?(?:KV(\d+|E\dM\d))?(?:/(tensor|channel))?")
FP_FORMAT = re.compile(r"E(\d)M(\d)")
# Per tensor: its training-precision field and its scaling granularity (Kumar et al.'s setup: weights per channel,
# activations and KV cache per tensor).
TENSOR_SPECS = {"w": ("weights", "channel"), "a": ("activations", "tensor"), "kv": ("kv", "tensor")}
JOINT = "joint"  # the `varied` value of a point that quantizes more than one tensor


def precision_terms(name: str) -> dict[str, tuple[str, str]]:
    """Each tensor a precision label quantizes → (its format, its granularity): "W4A8" → {"w": ("int4", "channel"),
    "a": ("int8", "tensor")}, "WE3M2" → {"w": ("fp:e3m2", "channel")}, "W4/tensor" → {"w": ("int4", "tensor")}."""
    match = PRECISION_PATTERN.fullmatch(name) if isinstance(name, str) else None
    if match is None or not any(match.groups()[:3]):
        raise ValueError(
            f"precision {name!r} is not W<bits>, A<bits>, KV<bits> or a combination (e.g. W4A8KV8), each term INT "
            "bits or an FP format E<e>M<m>, one term optionally /tensor or /channel"
        )
    *formats, granularity = match.groups()
    named = {tensor: value for tensor, value in zip(TENSOR_SPECS, formats) if value is not None}
    if granularity and len(named) > 1:
        raise ValueError(f"precision {name!r}: a /{granularity} granularity names one tensor only")
    terms = {}
    for tensor, value in named.items():
        fp = FP_FORMAT.fullmatch(value)
        kind = f"fp:e{fp[1]}m{fp[2]}" if fp else f"int{value}"
        terms[tensor] = (kind, granularity or TENSOR_SPECS[tensor][1])
    if len(terms) > 1 and any(kind.startswith("fp") for kind, _ in terms.values()):
        raise ValueError(f"precision {name!r}: a joint precision is INT in every tensor")
    return terms


def precision_bits(name: str) -> dict[str, int]:
    """The bits of each tensor a precision label quantizes (an FP format: 1 + exponent + mantissa bits): "W4A8" →
    {"w": 4, "a": 8}, "WE3M2" → {"w": 6}."""
    bits = {}
    for tensor, (kind, _) in precision_terms(name).items():
        fp = re.fullmatch(r"fp:e(\d)m(\d)", kind)
        bits[tensor] = 1 + int(fp[1]) + int(fp[2]) if fp else int(kind.removeprefix("int"))
    return bits


def training_precision(name: str) -> dict:
    """The training precision of a label: each tensor it names in its format at its granularity (symmetric INT or
    FP, absmax-scaled)."""
    return {
        TENSOR_SPECS[tensor][0]: f"{kind}:{granularity}"
        for tensor, (kind, granularity) in precision_terms(name).items()
    }


def law_precisions(name: str) -> dict[str, float]:
    """P_w, P_a, P_kv of a precision label (FULL_BITS for a tensor it leaves in fp32)."""
    bits = {} if name == FULL else precision_bits(name)
    return {f"P_{tensor}": float(bits.get(tensor, FULL_BITS)) for tensor in TENSOR_SPECS}


def varied_tensor(name: str) -> str:
    """Which sweep a precision belongs to: the one tensor it quantizes (w, a, kv), JOINT for several, "" for fp32;
    an ablation's sweep adds what it changes: "w_fp" (FP weights), "w_tensor" (INT weights per tensor)."""
    if name == FULL:
        return ""
    terms = precision_terms(name)
    if len(terms) > 1:
        return JOINT
    ((tensor, (kind, granularity)),) = terms.items()
    suffix = "_fp" if kind.startswith("fp") else ""
    return tensor + suffix + ("" if granularity == TENSOR_SPECS[tensor][1] else f"_{granularity}")
