"""Adapting tools= entries, normalizing results, coercion corners, registry basics."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest
from _support import make_runtime, tool

from openprogram import (
    ToolDefinitionError,
    ToolRegistry,
    ToolResult,
    ToolSpec,
    as_tool,
    validate_tool_arguments,
)
from openprogram.tools import ArgumentsError, normalize_result
from openprogram.types import ImageContent, TextContent


class Weather:
    spec = ToolSpec("weather", "Weather now.", {"type": "object", "properties": {}})

    def execute(self) -> str:
        return "sunny"


def test_objects_with_spec_and_execute_are_tools_and_injections_work() -> None:
    seen: dict[str, Any] = {}

    def probe(tool_call_id: str, cancel: Any, signal: Any, on_update: Any) -> str:
        seen.update(id=tool_call_id, cancel=cancel, same=cancel is signal, update=on_update)
        on_update("half")
        return "probed"

    runtime, _, rec = make_runtime(
        [{"tool_calls": [{"weather": {}}, {"id": "c7", "name": "probe"}]}, "ok"]
    )
    runtime.exec("go", tools=[Weather(), tool("probe", probe)])
    ends = [e["result"] for e in rec.trace if e["type"] == "tool_execution_end"]
    assert ends == ["sunny", "probed"]
    assert seen["id"] == "c7" and seen["same"] and isinstance(seen["cancel"], asyncio.Event)
    assert callable(seen["update"])
    assert repr(as_tool(Weather())) == "Tool('weather')"
    tool_obj = as_tool(Weather())
    assert as_tool(tool_obj) is tool_obj


def test_bad_specs_are_rejected_with_the_fix() -> None:
    with pytest.raises(TypeError, match="'parameters' must be a JSON Schema object"):
        as_tool({"spec": {"name": "x", "parameters": "oops"}, "execute": print})
    with pytest.raises(ToolDefinitionError, match="tool 'x': invalid JSON Schema for tool para"):
        as_tool({"spec": {"name": "x", "parameters": {"type": "no-such-type"}}, "execute": print})


class Unprintable:
    def __repr__(self) -> str:
        return "<unprintable>"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        (None, ""),
        (3, "3"),
        (2.5, "2.5"),
        (True, "true"),
        ({"a": [1, 2]}, '{"a": [1, 2]}'),
        ({"x": Unprintable()}, "{'x': <unprintable>}"),
        (TextContent("block"), "block"),
    ],
)
def test_return_values_are_normalized(value: Any, text: str) -> None:
    result = normalize_result(value)
    assert "".join(getattr(b, "text", "") for b in result.content) == text


def test_tool_results_and_images_pass_through() -> None:
    image = ImageContent("aGk=", "image/png")
    assert normalize_result(image).content == [image]
    given = ToolResult.text("bad", is_error=True, details={"k": 1})
    assert normalize_result(given) is given
    runtime, _, rec = make_runtime([{"tool_calls": [{"check": {}}]}, "ok"])
    runtime.exec(
        "go", tools=[tool("check", lambda: ToolResult.text("failed check", is_error=True))]
    )
    end = next(e for e in rec.trace if e["type"] == "tool_execution_end")
    assert (end["result"], end["is_error"]) == ("failed check", True)


@pytest.mark.parametrize(
    ("schema", "args", "expected"),
    [
        ({"type": ["integer", "null"]}, "4", 4),
        ({"type": "integer"}, 4.0, 4),
        ({"type": "string"}, True, "true"),
        ({"type": "string"}, 12, "12"),
        ({"type": "array", "items": {"type": "integer"}}, '["1", 2]', [1, 2]),
        ({"type": "object", "properties": {"n": {"type": "integer"}}}, '{"n": "5"}', {"n": 5}),
        ({"type": ["null", "string"]}, "null", "null"),
        ({"type": ["null", "integer"]}, "none", None),
        ({"allOf": [{"type": "integer"}]}, "6", 6),
        ({"anyOf": [{"type": "integer"}, {"type": "boolean"}]}, "false", False),
    ],
)
def test_lenient_coercion_corners(schema: dict[str, Any], args: Any, expected: Any) -> None:
    full = {"type": "object", "properties": {"v": schema}, "required": ["v"]}
    assert validate_tool_arguments("t", full, {"v": args}) == {"v": expected}


def test_values_that_cannot_be_coerced_keep_failing() -> None:
    full = {"type": "object", "properties": {"v": {"type": "boolean"}}}
    with pytest.raises(ArgumentsError, match=r"  - v: 'maybe' is not of type 'boolean'"):
        validate_tool_arguments("t", full, {"v": "maybe"})
    with pytest.raises(ArgumentsError, match="Received arguments:"):
        validate_tool_arguments("t", full, {"v": object()})


def test_registry_basics() -> None:
    registry = ToolRegistry([Weather()])
    assert "weather" in registry and len(registry) == 1
    assert [t.name for t in registry] == ["weather"]
    assert registry.get("weather") is not None
    registry.unregister("weather")
    assert len(registry) == 0 and registry.get("weather") is None
    with pytest.raises(TypeError, match="must be a list of names, not a string"):
        registry.define_toolset("s", "weather")
    registry.register(Weather())
    snap = registry.snapshot()
    registry.clear()
    assert len(registry) == 0
    registry.restore(snap)
    assert registry.names() == ["weather"]
    assert [t.name for t in registry.resolve("full")] == ["weather"]


def test_image_content_in_tool_results_reaches_the_model() -> None:
    image = ImageContent("aGk=", "image/png")
    runtime, model, _ = make_runtime([{"tool_calls": [{"shot": {}}]}, "seen"])
    runtime.exec("go", tools=[tool("shot", lambda: ToolResult([TextContent("a"), image]))])
    result = model.requests[1].messages[-1]
    assert result.content[1] == image


@pytest.mark.parametrize(
    ("args", "ok"),
    [
        ({"a": 1, "b": 2}, True),
        ({"a": True, "b": 2}, False),  # bool is not an integer in JSON Schema
        ({"a": 1}, False),  # required b missing
        ({"a": 1, "b": 2, "c": 3}, False),  # closed object
        ({"a": 1.0, "b": 2}, True),  # the slow path: 1.0 is an integer, coerced
        ({"a": "1", "b": 2}, True),  # the slow path: coercion
    ],
)
def test_the_fast_path_agrees_with_the_full_validator(args: dict[str, Any], ok: bool) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": ["integer", "null"]}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    if ok:
        result = validate_tool_arguments("t", schema, args)
        assert result == {k: int(v) for k, v in args.items()}
    else:
        with pytest.raises(ArgumentsError):
            validate_tool_arguments("t", schema, args)


def test_jsonschema_is_imported_only_for_arguments_that_fail() -> None:
    """A run whose arguments fit never imports jsonschema (40 modules and about 10,000
    objects every later garbage collection scans); the first arguments that fail do, and
    get every failing path in the text the model sees."""
    code = (
        "import sys\n"
        "from openprogram.tools import validate_tool_arguments as v\n"
        "s = {'type': 'object', 'properties': {'a': {'type': 'integer'},"
        " 'b': {'type': 'string', 'minLength': 2}}, 'required': ['a', 'b']}\n"
        "print(v('t', s, {'a': 1, 'b': 'xy'}), 'jsonschema' in sys.modules)\n"
        "try:\n"
        "    v('t', s, {'a': 'x', 'b': 'y'})\n"
        "except ValueError as e:\n"
        "    print(str(e).splitlines()[:3], 'jsonschema' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "{'a': 1, 'b': 'xy'} False",
        "['Validation failed for tool \"t\":', \"  - a: 'x' is not of type 'integer'\", "
        "\"  - b: 'y' is too short\"] True",
    ]
