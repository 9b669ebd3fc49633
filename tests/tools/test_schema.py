"""Specs from Python functions: what the model sees, and every decoration-time error."""

from __future__ import annotations

import asyncio
import datetime
import enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from openprogram import Runtime, ToolDefinitionError, ToolRegistry, agentic_function, function
from openprogram.tools._schema import parse_docstring


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


class Point(BaseModel):
    x: int
    title: str = "origin"  # a property named "title" must survive title stripping


def test_spec_from_signature_and_google_docstring(registry: ToolRegistry) -> None:
    @function(registry=registry)
    def forecast(
        city: str,
        days: int = 3,
        unit: Unit = Unit.C,
        detail: Literal["short", "long"] = "short",
        tags: list[str] | None = None,
        runtime: Runtime | None = None,
        on_update: Any = None,
        tool_call_id: str = "",
    ) -> str:
        """Forecast the weather
        for a city.

        Longer text that the model does not need.

        Args:
            city: The city name,
                as people write it.
            days (int): How many days.
        Returns:
            A summary.
        """
        return city

    assert forecast.spec.name == "forecast"
    assert forecast.spec.description == "Forecast the weather for a city."
    assert forecast.spec.parameters == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "city": {"type": "string", "description": "The city name, as people write it."},
            "days": {"type": "integer", "default": 3, "description": "How many days."},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
            "detail": {"type": "string", "enum": ["short", "long"], "default": "short"},
            "tags": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
            },
        },
        "required": ["city"],
    }


def test_nested_models_are_inlined_and_titles_dropped(registry: ToolRegistry) -> None:
    @function(registry=registry)
    def move(to: Point, at: datetime.date) -> str:
        """Move."""
        return f"{to.x}"

    props = move.spec.parameters["properties"]
    assert props["to"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "title": {"type": "string", "default": "origin"}},
        "required": ["x"],
    }
    assert props["at"] == {"type": "string", "format": "date"}
    assert "$defs" not in move.spec.parameters


def test_name_and_description_overrides_and_annotated_descriptions(
    registry: ToolRegistry,
) -> None:
    @function(registry=registry, name="lookup-v2", description="Look it up.")
    def lookup(key: Annotated[str, Field(description="The key.")]) -> str:
        """Ignored summary."""
        return key

    assert (lookup.spec.name, lookup.spec.description) == ("lookup-v2", "Look it up.")
    assert lookup.spec.parameters["properties"]["key"]["description"] == "The key."
    assert "lookup-v2" in registry


def test_model_path_converts_json_to_python_types(registry: ToolRegistry) -> None:
    seen: list[Any] = []

    @function(registry=registry)
    def place(to: Point, unit: Unit, when: datetime.date) -> str:
        """Place."""
        seen.extend([to, unit, when])
        return "ok"

    assert place.execute(to={"x": "4"}, unit="fahrenheit", when="2024-05-01") == "ok"
    assert seen == [Point(x=4), Unit.F, datetime.date(2024, 5, 1)]


def test_async_functions_are_async_tools(registry: ToolRegistry) -> None:
    @function(registry=registry)
    async def slow(n: int) -> int:
        """Wait."""
        await asyncio.sleep(0)
        return n * 2

    assert slow.tool.is_async
    assert asyncio.run(slow(3)) == 6
    assert asyncio.run(slow.execute(n="4")) == 8


def test_docstring_parsing_edge_cases() -> None:
    assert parse_docstring("") == ("", {})
    assert parse_docstring("Summary only") == ("Summary only", {})
    doc = "Do it.\nArgs:\n    *items: Things.\n    **opts: Options.\nRaises:\n    X: never"
    assert parse_docstring(doc) == ("Do it.", {"items": "Things.", "opts": "Options."})


# -- decoration-time errors: each names the parameter (or tool) and says what to do -------


def _error(fn: Any, **options: Any) -> str:
    with pytest.raises(ToolDefinitionError) as info:
        function(registry=ToolRegistry(), **options)(fn)
    return str(info.value)


class Opaque:
    pass


def test_unsupported_annotation_names_the_parameter() -> None:
    def f(handle: Opaque) -> None:
        """F."""

    assert _error(f) == (
        "tool 'f', parameter 'handle': annotation Opaque has no JSON Schema "
        "(PydanticSchemaGenerationError); use a JSON-compatible type (str, int, float, bool, "
        "list, dict, Literal, an Enum, a TypedDict or a pydantic model), or, if the runtime "
        "should supply it, name it one of cancel, on_update, runtime, signal, tool_call_id"
    )


def test_var_args_kwargs_positional_only_and_methods_are_refused() -> None:
    def star(*items: str) -> None:
        """S."""

    def kw(**opts: str) -> None:
        """K."""

    def pos(a: int, /) -> None:
        """P."""

    def method(self: Any, a: int) -> None:
        """M."""

    assert _error(star) == (
        "tool 'star', parameter 'items': the model passes arguments by name, so *args "
        "cannot be filled; use a list parameter"
    )
    assert _error(kw) == (
        "tool 'kw', parameter 'opts': **kwargs has no schema the model can follow; declare "
        "each parameter, or a dict one"
    )
    assert _error(pos) == (
        "tool 'pos', parameter 'a': positional-only parameters cannot be passed by name; "
        "remove the '/'"
    )
    assert _error(method) == (
        "tool 'method', parameter 'self': decorate a plain function, not a method (wrap the "
        "method in a function)"
    )


def test_bad_names_unresolvable_hints_and_stale_docs_are_refused() -> None:
    def ok(a: int) -> None:
        """Ok.

        Args:
            a: A.
            b: Gone.
        """

    def fwd(a: Missing) -> None:  # type: ignore[name-defined]  # noqa: F821
        """Fwd."""

    assert _error(ok, name="has space") == (
        f"{ok.__module__}.{ok.__qualname__}: 'has space' is not a valid tool name (1-64 "
        "letters, digits, '_' or '-', as providers require); pass name='...' to the decorator"
    )
    assert _error(ok) == (
        f"tool 'ok': the docstring's Args section documents b, which is not a parameter of "
        f"{ok.__module__}.{ok.__qualname__}; fix the name or remove the entry"
    )
    assert _error(fwd) == (
        "tool 'fwd': cannot resolve its type hints (NameError: name 'Missing' is not "
        "defined); define or import every annotated type before the decorated function"
    )


def test_decorator_misuse_is_refused() -> None:
    with pytest.raises(ToolDefinitionError) as info:
        function("search")  # type: ignore[call-overload]
    assert str(info.value) == (
        "@function applies to a function, got 'search'; options are keywords: "
        "@function(name='...', description='...')"
    )

    @agentic_function
    def once() -> None:
        """Once."""

    with pytest.raises(ToolDefinitionError, match="already decorated; decorate it once"):
        function(registry=None)(once)
    with pytest.raises(ToolDefinitionError, match=r"max_depth=0 must be >= 1"):
        agentic_function(max_depth=0)

    def plain() -> None:
        """Plain."""

    with pytest.raises(ToolDefinitionError, match="must be a function returning True/False"):
        function(registry=None, check=True)(plain)  # type: ignore[call-overload]
    with pytest.raises(ToolDefinitionError, match=r"registry=.* is not a ToolRegistry"):
        function(registry="default")(plain)  # type: ignore[call-overload]


def test_an_unknown_decorator_keyword_is_refused_when_the_decorator_is_applied() -> None:
    with pytest.raises(ToolDefinitionError) as info:
        function(toolsets="web")  # type: ignore[call-overload]
    assert str(info.value) == "@function: unknown keyword 'toolsets'; did you mean 'toolset'?"
    with pytest.raises(ToolDefinitionError, match=r"@function: unknown keyword 'max_depth'"):
        function(max_depth=2)  # type: ignore[call-overload]
    with pytest.raises(ToolDefinitionError, match=r"unknown keyword 'zzz'; known: available_if, "):
        agentic_function(zzz=1)  # type: ignore[call-overload]
