"""`QuantSpec`: one quantization format as data, with exactly one canonical string form.

Grammar: ``KIND:GRANULARITY[:OPTION...]``, options in any order on input, written back in the order below
with defaults left out, so ``parse_spec(str(spec)) == spec`` and ``str(parse_spec(text))`` is canonical.

KIND           ``int<b>`` (b = 2..8) or ``fp:e<E>m<M>`` (E = 0..8, M = 0..10, plus a sign bit)
GRANULARITY    along the last dim (the input dim of a weight [out, in]):
               ``tensor`` one scale; ``channel`` one per row (weights: per output channel);
               ``token`` one per row of an activation [tokens, features] (same arithmetic as channel);
               ``g<N>`` (int) / ``b<N>`` (fp): N consecutive elements of a row, the last group of a row may
               be shorter; ``unscaled`` (fp only): cast the values themselves, scale 1
INT options    ``sym`` (default, absmax) | ``asym`` (min/max with a zero point);
               ``absmax`` (default: scale amax/(2^(b-1)-1)) | ``gptq`` (scale 2·amax/(2^b-1), GPTQ's
               symmetric quantizer: zero point 2^(b-1), codes -2^(b-1)..2^(b-1)-1) | ``absmean`` (scale
               mean|x| over the group, BitNet b1.58's γ; sym only);
               ``narrow`` (sym only: codes -(2^(b-1)-1)..2^(b-1)-1, so ``int2:tensor:absmean:narrow`` is BitNet
               b1.58's ternary {-1, 0, 1}·γ; the default full range adds the code -2^(b-1));
               ``div`` (default: x/s) | ``mulinv`` (x·(1/s), as torch.fake_quantize_* compute it)
FP options     ``fp32`` (default: scale FP_max/amax in float32, Sun et al. §2) | ``pow2`` (the largest
               power of two <= that) | ``e8m0`` (OCP MX shared exponent: 2^(floor(log2 amax) - e_max)) |
               ``e4m3`` (NVIDIA's two-level scaling: an E4M3 scale per group times one float32 scale per
               tensor, so ``fp:e2m1:b16:e4m3`` is NVFP4; saturating only);
               ``ocp`` (default) | ``ieee`` | ``unreserved`` — the top exponent code (see fp_format);
               ``saturate`` (default) | ``inf`` — overflow, Inf only for formats that have it
Both           ``nearest-even`` (default) | ``nearest-away`` | ``stochastic``, and ``seed=<n>`` (default 0,
               stochastic only)
"""

import functools
import re
from dataclasses import dataclass

from qscaling.quant.formats import FLOAT32_MAX, OVERFLOW_MODES, ROUNDING_MODES, TOP_CODES, FloatFormat, fp_format

GRANULARITIES = ("tensor", "channel", "token", "group", "unscaled")
INT_SCALES = ("absmax", "gptq", "absmean")
DIVISIONS = ("div", "mulinv")
FP_SCALES = ("fp32", "pow2", "e8m0", "e4m3")
E4M3_MAX = 448.0  # the largest block scale of two-level (e4m3) scaling

# Bare option tokens -> (field, value). Every token belongs to exactly one field.
_INT_TOKENS = {
    "sym": ("symmetric", True),
    "asym": ("symmetric", False),
    **{name: ("int_scale", name) for name in INT_SCALES},
    "narrow": ("narrow", True),
    **{name: ("division", name) for name in DIVISIONS},
}
_FP_TOKENS = {
    **{name: ("fp_scale", name) for name in FP_SCALES},
    **{name: ("top_code", name) for name in TOP_CODES},
    **{name: ("overflow", name) for name in OVERFLOW_MODES},
}
_COMMON_TOKENS = {name: ("rounding", name) for name in ROUNDING_MODES}


@dataclass(frozen=True)
class QuantSpec:
    """A fake-quantization format; see the module docstring for every field's meaning and default."""

    kind: str  # "int" or "fp"
    granularity: str  # one of GRANULARITIES
    bits: int | None = None  # int only
    exponent_bits: int | None = None  # fp only
    mantissa_bits: int | None = None  # fp only
    group_size: int | None = None  # granularity "group" only: g<N> / b<N>
    symmetric: bool = True
    int_scale: str = "absmax"
    narrow: bool = False  # int only: symmetric codes without -2^(b-1)
    division: str = "div"
    fp_scale: str = "fp32"
    top_code: str = "ocp"
    overflow: str = "saturate"
    rounding: str = "nearest-even"
    seed: int = 0

    def __post_init__(self) -> None:
        _validate(self, str(self))

    @property
    def float_format(self) -> FloatFormat:
        """The element format of an fp spec (ValueError for int specs)."""
        if self.kind != "fp":
            raise ValueError(f"quant spec '{self}': float_format applies to fp specs only")
        return fp_format(self.exponent_bits, self.mantissa_bits, self.top_code)

    def __str__(self) -> str:
        if self.kind == "int":
            parts = [f"int{self.bits}"]
        else:
            parts = ["fp", f"e{self.exponent_bits}m{self.mantissa_bits}"]
        if self.granularity == "group":
            parts.append(f"{'g' if self.kind == 'int' else 'b'}{self.group_size}")
        else:
            parts.append(self.granularity)
        defaults = QuantSpec.__dataclass_fields__
        if self.kind == "int":
            option_fields = ("symmetric", "int_scale", "narrow", "division")
        else:
            option_fields = ("fp_scale", "top_code", "overflow")
        for name in option_fields + ("rounding",):
            value = getattr(self, name)
            if value != defaults[name].default:
                if name == "symmetric":
                    value = "sym" if value else "asym"
                parts.append("narrow" if name == "narrow" else value)
        if self.seed != 0:
            parts.append(f"seed={self.seed}")
        return ":".join(parts)


def _fail(text: str, message: str) -> None:
    raise ValueError(f"quant spec '{text}': {message}")


def _validate(spec: QuantSpec, text: str) -> None:
    """Check field ranges and combinations; raise ValueError naming the field."""
    if spec.kind not in ("int", "fp"):
        _fail(text, f"kind must be 'int' or 'fp', got {spec.kind!r}")
    if spec.granularity not in GRANULARITIES:
        _fail(text, f"granularity must be one of {', '.join(GRANULARITIES)}, got {spec.granularity!r}")
    if (spec.granularity == "group") != (spec.group_size is not None):
        _fail(text, "group_size is given exactly when granularity is 'group'")
    if spec.group_size is not None and not (isinstance(spec.group_size, int) and spec.group_size >= 1):
        _fail(text, f"group size must be a positive integer, got {spec.group_size!r}")
    if spec.rounding not in ROUNDING_MODES:
        _fail(text, f"rounding must be one of {', '.join(ROUNDING_MODES)}, got {spec.rounding!r}")
    if not (isinstance(spec.seed, int) and 0 <= spec.seed < 2**32):
        _fail(text, f"seed must be an integer in 0..2^32-1, got {spec.seed!r}")
    if spec.seed != 0 and spec.rounding != "stochastic":
        _fail(text, "seed applies to stochastic rounding only")
    defaults = QuantSpec.__dataclass_fields__
    if spec.kind == "int":
        if not (isinstance(spec.bits, int) and 2 <= spec.bits <= 8):
            _fail(text, "bits must be 2..8")
        if spec.exponent_bits is not None or spec.mantissa_bits is not None:
            _fail(text, "exponent_bits/mantissa_bits apply to fp specs only")
        if spec.granularity == "unscaled":
            _fail(text, "granularity 'unscaled' applies to fp specs only")
        if spec.int_scale not in INT_SCALES:
            _fail(text, f"int scale must be one of {', '.join(INT_SCALES)}, got {spec.int_scale!r}")
        if spec.division not in DIVISIONS:
            _fail(text, f"division must be one of {', '.join(DIVISIONS)}, got {spec.division!r}")
        if spec.int_scale != "absmax" and not spec.symmetric:
            _fail(text, f"int scale {spec.int_scale!r} is a symmetric convention; drop it or 'asym'")
        if spec.narrow and not spec.symmetric:
            _fail(text, "'narrow' is a symmetric code range; drop it or 'asym'")
        for name in ("fp_scale", "top_code", "overflow"):
            if getattr(spec, name) != defaults[name].default:
                _fail(text, f"{name} applies to fp specs only")
        return
    if spec.bits is not None:
        _fail(text, "bits applies to int specs only (fp specs give e<E>m<M>)")
    for name in ("symmetric", "int_scale", "narrow", "division"):
        if getattr(spec, name) != defaults[name].default:
            _fail(text, f"{name} applies to int specs only")
    if spec.fp_scale not in FP_SCALES:
        _fail(text, f"fp scale must be one of {', '.join(FP_SCALES)}, got {spec.fp_scale!r}")
    if spec.overflow not in OVERFLOW_MODES:
        _fail(text, f"overflow must be one of {', '.join(OVERFLOW_MODES)}, got {spec.overflow!r}")
    if spec.granularity == "unscaled" and spec.fp_scale != "fp32":
        _fail(text, f"fp scale {spec.fp_scale!r} needs a scaled granularity, not 'unscaled'")
    if spec.fp_scale == "e4m3" and spec.overflow == "inf":
        _fail(text, "e4m3 scales saturate (NVIDIA's NVFP4 clamps to the format's max); drop 'inf'")
    try:
        fmt = fp_format(spec.exponent_bits, spec.mantissa_bits, spec.top_code)
    except ValueError as error:
        _fail(text, str(error))
    if spec.fp_scale == "e4m3" and fmt.max_value * E4M3_MAX > FLOAT32_MAX:
        _fail(text, f"e4m3 scales need the format's max times 448 within float32; {fmt.name} reaches {fmt.max_value:g}")
    if spec.overflow == "inf" and not fmt.has_inf:
        _fail(text, f"overflow 'inf' needs a format with Inf codes; {fmt.name} under {spec.top_code!r} has none")


_INT_KIND = re.compile(r"int(\d+)")
_FP_FORMAT = re.compile(r"e(\d+)m(\d+)")
_GROUP = re.compile(r"([gb])(\d+)")
_SEED = re.compile(r"seed=(\d+)")


def parse_spec(text: str) -> QuantSpec:
    """Parse a spec string (module docstring); ValueError naming the bad field and the valid options."""
    if isinstance(text, QuantSpec):
        return text
    if not isinstance(text, str):
        raise TypeError(f"quant spec must be a str or QuantSpec, got {type(text).__name__}")
    return _parse_text(text)


@functools.lru_cache(maxsize=1024)
def _parse_text(text: str) -> QuantSpec:
    """parse_spec for a string, kept per text (specs are frozen): QAT asks for the same few specs on every layer
    of every step, and parsing one takes ~10 µs."""
    parts = text.strip().lower().split(":")
    fields: dict = {}
    if parts[0] == "fp":
        if len(parts) < 2 or not _FP_FORMAT.fullmatch(parts[1]):
            _fail(text, "fp format must be written e<E>m<M>, e.g. fp:e4m3:b32")
        exponent, mantissa = _FP_FORMAT.fullmatch(parts[1]).groups()
        fields.update(kind="fp", exponent_bits=int(exponent), mantissa_bits=int(mantissa))
        rest, tokens, group_letter = parts[2:], _FP_TOKENS, "b"
    elif _INT_KIND.fullmatch(parts[0]):
        fields.update(kind="int", bits=int(_INT_KIND.fullmatch(parts[0]).group(1)))
        rest, tokens, group_letter = parts[1:], _INT_TOKENS, "g"
    else:
        _fail(text, f"kind must be int<bits> or fp:e<E>m<M>, got {parts[0]!r}")
    if not rest or not rest[0]:
        _fail(text, "granularity missing: tensor, channel, token, g<N> (int), b<N> (fp), unscaled (fp)")
    granularity = rest[0]
    group = _GROUP.fullmatch(granularity)
    if group:
        if group.group(1) != group_letter:
            _fail(text, f"{fields['kind']} group size is written {group_letter}<N>, got {granularity!r}")
        fields.update(granularity="group", group_size=int(group.group(2)))
    elif granularity in ("tensor", "channel", "token", "unscaled"):
        fields["granularity"] = granularity
    else:
        named = (
            "tensor, channel, token, b<N> or unscaled" if fields["kind"] == "fp" else "tensor, channel, token or g<N>"
        )
        _fail(text, f"granularity must be {named}, got {granularity!r}")
    valid = {**tokens, **_COMMON_TOKENS}
    for token in rest[1:]:
        seed = _SEED.fullmatch(token)
        field, value = ("seed", int(seed.group(1))) if seed else valid.get(token, (None, None))
        if field is None:
            _fail(text, f"unknown option {token!r}; valid: {', '.join(list(valid) + ['seed=<n>'])}")
        if field in fields:
            _fail(text, f"option {field} given twice")
        fields[field] = value
    return QuantSpec(**fields)
