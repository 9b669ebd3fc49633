"""validate_tool_arguments: lenient coercion, the fast path, and every error text."""

from __future__ import annotations

import copy
from typing import Any

import fastjsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram import OpenProgramError
from openprogram.tools import ArgumentsError, compile_validator, validate_tool_arguments

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "x": {"type": "number"},
        "flag": {"type": "boolean"},
        "name": {"type": "string"},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "items": {"type": "array", "items": {"type": "integer"}},
        "point": {"type": "object", "properties": {"x": {"type": "integer"}}},
        "level": {"enum": [1, 2, 3]},
    },
    "required": ["n"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"n": "3"}, {"n": 3}),
        ({"n": "3.0"}, {"n": 3}),
        ({"n": 3.0}, {"n": 3}),
        ({"n": 1, "x": "2.5"}, {"n": 1, "x": 2.5}),
        ({"n": 1, "flag": "true"}, {"n": 1, "flag": True}),
        ({"n": 1, "flag": "False"}, {"n": 1, "flag": False}),
        ({"n": 1, "name": 42}, {"n": 1, "name": "42"}),
        ({"n": 1, "maybe": "7"}, {"n": 1, "maybe": 7}),
        ({"n": 1, "maybe": None}, {"n": 1, "maybe": None}),
        ({"n": 1, "items": "[1, 2]"}, {"n": 1, "items": [1, 2]}),
        ({"n": 1, "items": ["1", 2]}, {"n": 1, "items": [1, 2]}),
        ({"n": 1, "point": '{"x": "5"}'}, {"n": 1, "point": {"x": 5}}),
        ({"n": 1, "level": "2"}, {"n": 1, "level": 2}),
    ],
)
def test_lenient_coercion(given: dict[str, Any], expected: dict[str, Any]) -> None:
    assert validate_tool_arguments("t", SCHEMA, given) == expected


def test_valid_arguments_take_the_fast_path_unchanged() -> None:
    args = {"n": 1, "name": "a"}
    assert validate_tool_arguments("t", SCHEMA, args) is args  # no copy, no coercion
    assert compile_validator(dict(SCHEMA)) is compile_validator(SCHEMA)  # compiled once


def test_error_lists_each_failing_path_and_the_received_arguments() -> None:
    with pytest.raises(ArgumentsError) as info:
        validate_tool_arguments(
            "t", SCHEMA, {"n": "three", "flag": "perhaps", "point": {"x": "y"}, "extra": 1}
        )
    assert str(info.value) == (
        'Validation failed for tool "t":\n'
        "  - root: Additional properties are not allowed ('extra' was unexpected)\n"
        "  - flag: 'perhaps' is not of type 'boolean'\n"
        "  - n: 'three' is not of type 'integer'\n"
        "  - point.x: 'y' is not of type 'integer'\n"
        "\n"
        "Received arguments:\n"
        "{\n"
        '  "n": "three",\n'
        '  "flag": "perhaps",\n'
        '  "point": {\n'
        '    "x": "y"\n'
        "  },\n"
        '  "extra": 1\n'
        "}"
    )
    assert isinstance(info.value, OpenProgramError)


def test_missing_required_argument() -> None:
    with pytest.raises(ArgumentsError) as info:
        validate_tool_arguments("t", SCHEMA, {})
    assert str(info.value) == (
        'Validation failed for tool "t":\n'
        "  - root: 'n' is a required property\n\nReceived arguments:\n{}"
    )


def test_arguments_that_are_not_an_object() -> None:
    with pytest.raises(ArgumentsError) as info:
        validate_tool_arguments("t", SCHEMA, '{"n": 1')
    assert str(info.value) == (
        'Validation failed for tool "t": arguments must be a JSON object, got str.\n\n'
        'Received arguments:\n"{\\"n\\": 1"'
    )


def test_an_invalid_schema_is_reported() -> None:
    with pytest.raises(ValueError, match="invalid JSON Schema for tool parameters"):
        compile_validator({"type": "object", "properties": {"a": {"type": 5}}})


_TYPES = ["string", "integer", "number", "boolean", "null"]
_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=3)
)
_NAMES = st.one_of(st.sampled_from(["a", "b", "c"]), st.text(max_size=6))


@st.composite
def _flat_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """Flat object schemas, the kind the fast check takes: scalar-typed properties (one
    type or a list), required names with or without a property, open or closed; names
    that need escaping in code (quotes, backslashes, newlines) included. (A closed schema
    requires only names it has properties for: fastjsonschema refuses any other.)"""
    names = draw(st.lists(_NAMES, max_size=4, unique=True))
    props = {
        n: {"type": draw(st.one_of(st.sampled_from(_TYPES), st.lists(
            st.sampled_from(_TYPES), min_size=1, max_size=3, unique=True)))}
        for n in names
    }  # fmt: skip
    schema: dict[str, Any] = {"type": "object", "properties": props}
    required = draw(
        st.lists(st.one_of(st.sampled_from(names or ["a"]), _NAMES), max_size=4, unique=True)
    )
    if draw(st.booleans()):
        schema["additionalProperties"] = draw(st.booleans())
    if schema.get("additionalProperties") is False:  # else fastjsonschema refuses it
        required = [n for n in required if n in props]
    if required:
        schema["required"] = required
    return schema


_EXAMPLE = {"string": "x", "integer": 3, "number": 2.5, "boolean": True, "null": None}


@settings(max_examples=400, deadline=None)
@given(schema=_flat_schemas(), data=st.data())
def test_the_fast_check_accepts_only_what_the_full_validator_accepts(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    """The fast check of a flat schema is made as code from its property names: whatever
    it accepts, fastjsonschema accepts too, and a call it accepts gets its arguments back
    unchanged (the same dict). Arguments that name each required property once, with a
    value of one of its types, take it."""
    props, required = schema["properties"], schema.get("required", [])
    names = [*props, *required]
    args = data.draw(st.dictionaries(st.one_of(st.sampled_from(names or ["a"]), _NAMES), _VALUES,
                                     max_size=5))  # fmt: skip
    validator = compile_validator(schema)
    fast = validator._fast
    assert fast is not None  # every schema drawn is flat
    if fast(args):
        assert _valid(schema, args), (schema, args)
        assert validator.validate("t", args) is args
    if all(n in props for n in required):
        typical = {}
        for n in required:
            kind = props[n]["type"]
            typical[n] = _EXAMPLE[kind if isinstance(kind, str) else kind[0]]
        assert fast(typical), (schema, typical)
        assert validator.validate("t", typical) is typical


def _valid(schema: dict[str, Any], args: dict[str, Any]) -> bool:
    try:
        fastjsonschema.compile(schema)(copy.deepcopy(args))
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True
