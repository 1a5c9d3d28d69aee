"""QuantSpec: canonical string form, round-trips, and one clear error per bad field."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qscaling.quant import QuantSpec, parse_spec

ISSUE_FORMS = [
    "int4:g128",
    "int8:channel",
    "int8:token",
    "int4:tensor",
    "int3:g32:asym",
    "fp:e4m3:b32",
    "fp:e2m1:channel",
    "fp:e5m2:tensor",
    "fp:e3m2:b128:stochastic",
]


@pytest.mark.parametrize("text", ISSUE_FORMS)
def test_issue_forms_are_canonical_and_round_trip(text):
    spec = parse_spec(text)
    assert str(spec) == text
    assert parse_spec(str(spec)) == spec


def test_parsed_fields():
    spec = parse_spec("int3:g32:asym")
    assert (spec.kind, spec.bits, spec.granularity, spec.group_size, spec.symmetric) == ("int", 3, "group", 32, False)
    spec = parse_spec("fp:e3m2:b128:stochastic:seed=7")
    assert (spec.exponent_bits, spec.mantissa_bits, spec.group_size, spec.rounding, spec.seed) == (
        3,
        2,
        128,
        "stochastic",
        7,
    )


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("int4:g128:sym:absmax:div:nearest-even", "int4:g128"),
        ("INT4:G128", "int4:g128"),
        ("int4:channel:mulinv:gptq", "int4:channel:gptq:mulinv"),
        ("fp:e4m3:b32:saturate:ocp:fp32", "fp:e4m3:b32"),
        ("fp:e5m2:unscaled:inf:ieee", "fp:e5m2:unscaled:ieee:inf"),
        ("fp:e2m1:b32:nearest-away:e8m0", "fp:e2m1:b32:e8m0:nearest-away"),
        ("int2:tensor:narrow:absmean", "int2:tensor:absmean:narrow"),
        ("int4:g32:mulinv:narrow:gptq", "int4:g32:gptq:narrow:mulinv"),
        ("fp:e3m2:b128:seed=3:stochastic", "fp:e3m2:b128:stochastic:seed=3"),
    ],
)
def test_options_in_any_order_print_in_one_canonical_order(text, canonical):
    assert str(parse_spec(text)) == canonical


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("int9:g128", r"^quant spec 'int9:g128': bits must be 2\.\.8$"),
        ("int1:channel", r"bits must be 2\.\.8"),
        ("int4", r"granularity missing"),
        ("int4:rows", r"granularity must be tensor, channel, token or g<N>, got 'rows'"),
        ("fp:e4m3:rows", r"granularity must be tensor, channel, token, b<N> or unscaled, got 'rows'"),
        ("int4:g0", r"group size must be a positive integer, got 0"),
        ("int4:b32", r"int group size is written g<N>"),
        ("fp:e4m3:g32", r"fp group size is written b<N>"),
        ("int4:g128:foo", r"unknown option 'foo'; valid: sym, asym"),
        ("int4:g128:asym:sym", r"option symmetric given twice"),
        ("int4:g128:ieee", r"unknown option 'ieee'"),
        ("fp:e4m3:b32:asym", r"unknown option 'asym'"),
        ("int4:unscaled", r"granularity 'unscaled' applies to fp specs only"),
        ("int4:channel:asym:gptq", r"'gptq' is a symmetric convention"),
        ("int2:tensor:asym:absmean", r"'absmean' is a symmetric convention"),
        ("int4:g32:asym:narrow", r"'narrow' is a symmetric code range"),
        ("fp:e2m1:b32:narrow", r"unknown option 'narrow'"),
        ("int4:g128:seed=3", r"seed applies to stochastic rounding only"),
        ("fp:e9m2:b32", r"exponent bits must be 0\.\.8, got 9"),
        ("fp:e4m11:b32", r"mantissa bits must be 0\.\.10, got 11"),
        ("fp:e0m0:b32", r"at least one exponent or mantissa bit"),
        ("fp:4m3:b32", r"fp format must be written e<E>m<M>"),
        ("fp:e1m2:b32:ieee", r"'ieee' reserves the top exponent code, which needs E >= 2"),
        ("fp:e8m3:tensor:unreserved", r"beyond float32; use 'ieee'"),
        ("fp:e4m3:tensor:inf", r"overflow 'inf' needs a format with Inf codes"),
        ("fp:e2m1:unscaled:pow2", r"fp scale 'pow2' needs a scaled granularity"),
        ("uint4:g128", r"kind must be int<bits> or fp:e<E>m<M>, got 'uint4'"),
    ],
)
def test_bad_fields_are_named(text, message):
    with pytest.raises(ValueError, match=message):
        parse_spec(text)


def test_constructing_an_invalid_spec_directly_fails_the_same_way():
    with pytest.raises(ValueError, match=r"^quant spec 'int9:g128': bits must be 2\.\.8$"):
        QuantSpec(kind="int", bits=9, granularity="group", group_size=128)
    with pytest.raises(ValueError, match=r"fp_scale applies to fp specs only"):
        QuantSpec(kind="int", bits=4, granularity="channel", fp_scale="e8m0")


def test_parse_spec_rejects_non_strings():
    with pytest.raises(TypeError, match="quant spec must be a str or QuantSpec, got int"):
        parse_spec(4)
    spec = parse_spec("int4:g128")
    assert parse_spec(spec) is spec


def _granularity(kind):
    letter = "g" if kind == "int" else "b"
    named = ["tensor", "channel", "token"] + (["unscaled"] if kind == "fp" else [])
    return st.one_of(st.sampled_from(named), st.integers(1, 1024).map(lambda n: f"{letter}{n}"))


@st.composite
def spec_texts(draw):
    if draw(st.booleans()):
        parts = [f"int{draw(st.integers(2, 8))}", draw(_granularity("int"))]
        parts.append(draw(st.sampled_from(["sym", "asym"])))
        if parts[-1] == "sym":
            parts.append(draw(st.sampled_from(["absmax", "gptq", "absmean"])))
            if draw(st.booleans()):
                parts.append("narrow")
        parts.append(draw(st.sampled_from(["div", "mulinv"])))
    else:
        exponent = draw(st.integers(2, 7))
        parts = ["fp", f"e{exponent}m{draw(st.integers(0, 10))}", draw(_granularity("fp"))]
        if parts[-1] != "unscaled":
            parts.append(draw(st.sampled_from(["fp32", "pow2", "e8m0"])))
        parts.append(draw(st.sampled_from(["ocp", "ieee", "unreserved"])))
        if parts[-1] == "ieee" or (parts[-1] == "ocp" and exponent >= 5):
            parts.append(draw(st.sampled_from(["saturate", "inf"])))
    rounding = draw(st.sampled_from(["nearest-even", "nearest-away", "stochastic"]))
    parts.append(rounding)
    if rounding == "stochastic":
        parts.append(f"seed={draw(st.integers(0, 2**32 - 1))}")
    body, options = parts[: 3 if parts[0] == "fp" else 2], parts[3 if parts[0] == "fp" else 2 :]
    return ":".join(body + draw(st.permutations(options)))


@settings(max_examples=300, deadline=None)
@given(spec_texts())
def test_every_valid_spec_round_trips(text):
    spec = parse_spec(text)
    canonical = str(spec)
    assert parse_spec(canonical) == spec
    assert str(parse_spec(canonical)) == canonical
    assert dataclasses.replace(spec) == spec
