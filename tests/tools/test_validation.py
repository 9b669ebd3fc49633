"""validate_tool_arguments: lenient coercion, the fast path, and every error text."""

from __future__ import annotations

from typing import Any

import pytest

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
