"""Arguments from a tool's real JSON Schema (``openprogram_sim.fuzz._schemas``): valid ones are
instances of the schema (checked by ``jsonschema`` with formats, and accepted by the tool
layer), invalid ones are rejected by the tool layer, for a zoo of schemas; and the public
``tool_calls``/``scenarios`` strategies over a user's tools check their arguments when
built."""

from __future__ import annotations

from collections import Counter
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from openprogram import ToolRegistry, agentic_function, function
from openprogram.tools import ArgumentsError, validate_tool_arguments
from openprogram_sim.fuzz import strategies
from openprogram_sim.scenario import Scenario

SOME = settings(max_examples=60, derandomize=True, deadline=None, database=None)

ZOO: dict[str, dict[str, Any]] = {
    "numbers with bounds": {
        "type": "object",
        "properties": {
            "x": {"type": "number", "minimum": -3.5, "exclusiveMaximum": 10},
            "n": {"type": "integer", "minimum": 1, "maximum": 9, "multipleOf": 2},
        },
        "required": ["x", "n"],
        "additionalProperties": False,
    },
    "enums": {
        "type": "object",
        "properties": {
            "unit": {"enum": ["c", "f", "k"]},
            "mode": {"type": "string", "enum": ["a", "b"]},
        },
        "required": ["unit"],
    },
    "nested objects": {
        "type": "object",
        "properties": {
            "trip": {
                "type": "object",
                "properties": {
                    "to": {"$ref": "#/$defs/place"},
                    "nights": {"type": "integer", "minimum": 1},
                },
                "required": ["to"],
            }
        },
        "required": ["trip"],
        "$defs": {
            "place": {
                "type": "object",
                "properties": {"city": {"type": "string", "minLength": 1}},
                "required": ["city"],
            }
        },
    },
    "arrays": {
        "type": "object",
        "properties": {
            "days": {
                "type": "array",
                "items": {"type": "integer", "minimum": 0, "maximum": 6},
                "minItems": 1,
                "maxItems": 4,
                "uniqueItems": True,
            },
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["days"],
        "additionalProperties": False,
    },
    "anyOf": {
        "type": "object",
        "properties": {
            "limit": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
            "q": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "boolean"}]},
        },
        "required": ["limit", "q"],
    },
    "string formats": {
        "type": "object",
        "properties": {
            "day": {"type": "string", "format": "date"},
            "at": {"type": "string", "format": "date-time"},
            "mail": {"type": "string", "format": "email"},
            "ip": {"type": "string", "format": "ipv4"},
        },
        "required": ["day", "at", "mail", "ip"],
        "additionalProperties": False,
    },
}


def _schema_valid(schema: dict[str, Any], value: Any) -> bool:
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value)


def _layer_accepts(schema: dict[str, Any], value: Any) -> bool:
    try:
        validate_tool_arguments("tool", schema, value)
    except ArgumentsError:
        return False
    return True


@pytest.mark.parametrize("name", list(ZOO))
def test_valid_arguments_are_instances_of_any_schema(name: str) -> None:
    schema = ZOO[name]

    @SOME
    @given(strategies.tool_arguments(schema))
    def check(arguments: Any) -> None:
        assert _schema_valid(schema, arguments), arguments  # numbers, enums: never None
        assert _layer_accepts(schema, arguments), arguments

    check()


@pytest.mark.parametrize("name", list(ZOO))
def test_invalid_arguments_are_rejected_by_the_tool_layer(name: str) -> None:
    schema = ZOO[name]

    @SOME
    @given(strategies.tool_arguments(schema, valid=False))
    def check(arguments: Any) -> None:
        assert not _layer_accepts(schema, arguments), arguments

    check()


def _draw_many(strategy: st.SearchStrategy[Any], n: int = 200) -> list[Any]:
    out: list[Any] = []

    @settings(max_examples=n, derandomize=True, deadline=None, database=None)
    @given(strategy)
    def collect(value: Any) -> None:
        out.append(value)

    collect()
    return out


def test_either_draws_both() -> None:
    schema = ZOO["numbers with bounds"]
    drawn = _draw_many(strategies.tool_arguments(schema, valid=None), 60)
    assert {_layer_accepts(schema, a) for a in drawn} == {True, False}


def test_what_is_drawn_reaches_the_schema_s_values_and_defects() -> None:
    units = Counter(a["unit"] for a in _draw_many(strategies.tool_arguments(ZOO["enums"])))
    assert set(units) == {"c", "f", "k"}
    bad = _draw_many(strategies.tool_arguments(ZOO["numbers with bounds"], valid=False), 300)
    texts = [a for a in bad if isinstance(a, str)]
    objects = [a for a in bad if isinstance(a, dict)]
    assert texts and objects
    assert any("x" not in a or "n" not in a for a in objects)  # a required key left out
    assert any(set(a) - {"x", "n"} for a in objects)  # a key the tool does not take
    props = ZOO["numbers with bounds"]["properties"]
    broken = [a for a in objects if set(a) == {"x", "n"}]  # one property breaks its schema
    assert any(not _schema_valid(props["n"], a["n"]) for a in broken)
    assert any(not _schema_valid(props["x"], a["x"]) for a in broken)


# --------------------------------------------------------------------------- your tools

registry = ToolRegistry()


@function(registry=registry, toolset="math")
def scale(x: float, times: int = 2) -> float:
    """Scale a number.

    Args:
        x: The number.
        times: How many times.
    """
    return x * times


@agentic_function(registry=registry)
def explain(topic: str, runtime: Any) -> str:
    """Explain a topic (a nested run).

    Args:
        topic: What to explain.
    """
    return str(runtime.exec(f"Explain {topic}.", tools=[scale]))


def test_tool_calls_are_calls_to_your_tools_valid_or_invalid_as_asked() -> None:
    schemas = {t.name: t.spec.parameters for t in registry.tools()}
    for valid in (True, False):
        for call in _draw_many(strategies.tool_calls(registry, valid=valid), 80):
            name = call.get("name") if "name" in call else next(iter(call))
            arguments = call.get("arguments") if "name" in call else call[name]
            assert name in schemas
            assert _layer_accepts(schemas[name], arguments) is valid, call
    either = _draw_many(strategies.tool_calls([scale], valid=None), 80)
    accepted = {_layer_accepts(schemas["scale"], c.get("arguments", c.get("scale"))) for c in
                either}  # fmt: skip
    assert accepted == {True, False}
    unknown = _draw_many(strategies.tool_calls([scale], unknown=True), 80)
    assert {next(iter(c)) for c in unknown if "name" not in c} - {"scale"}


def test_scenarios_over_your_tools_name_them_by_import_path() -> None:
    drawn = _draw_many(strategies.scenarios(registry, max_turns=3), 30)
    assert all(isinstance(s, Scenario) for s in drawn)
    assert {s.registry for s in drawn} == {f"{__name__}:registry"}
    by_ref = _draw_many(strategies.scenario_dicts([scale, explain], max_turns=2), 10)
    assert by_ref[0]["tools"] == {
        "scale": {"python": f"{__name__}:scale"},
        "explain": {"python": f"{__name__}:explain"},
    }


def _local_registry() -> ToolRegistry:
    local = ToolRegistry()

    @function(registry=local)
    def ping() -> str:
        """Ping."""
        return "pong"

    return local


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: strategies.tool_arguments(ZOO["enums"], valid="yes"), "valid='yes' must be"),
        (lambda: strategies.tool_calls(object()), "is not a registry, a tool or a list"),
        (lambda: strategies.tool_calls(ToolRegistry()), "no tools"),
        (lambda: strategies.tool_calls("no_such_module_here:registry"), "cannot import module"),
        (lambda: strategies.tool_calls([scale], unknown="yes"), "unknown='yes' must be a bool"),
        (lambda: strategies.scenarios(_local_registry()), "is not importable"),
        (lambda: strategies.scenarios(registry, bogus=1), "unknown option(s) bogus"),
        (lambda: strategies.scenarios(registry, kinds=["hang"]), "'hang'"),
        (lambda: strategies.scenarios(registry, timeout=0), "timeout=0 must be"),
        (lambda: strategies.scenarios(max_turns=3, bogus=1), "unknown option(s) bogus"),
    ],
)
def test_bad_arguments_fail_when_the_strategy_is_built(build: Any, message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        build()
    assert message in str(raised.value)
