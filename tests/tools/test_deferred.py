"""Deferred loading: held back from the provider, found by tool_search, callable at once,
and in the provider's tool list from the next pass."""

from __future__ import annotations

import json

import pytest
from tools_support import run_with, tool_results

from openprogram import Runtime, ToolRegistry, agentic_function, function
from openprogram_sim.models import Turn


@pytest.fixture
def deferred(registry: ToolRegistry) -> ToolRegistry:
    @function(registry=registry)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @function(registry=registry, defer=True)
    def weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny in {city}"

    @function(registry=registry, defer=True)
    def forecast_weekly(city: str) -> str:
        """Seven-day forecast."""
        return f"rain all week in {city}"

    @function(registry=registry, defer=True)
    def stock_price(symbol: str) -> str:
        """Latest stock price for a ticker symbol."""
        return f"{symbol}: 100"

    return registry


WEATHER_SCHEMA = {
    "additionalProperties": False,
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "type": "object",
}


def test_found_called_in_the_same_run_and_offered_from_the_next_pass(
    deferred: ToolRegistry,
) -> None:
    turns = [
        {"tool_calls": [{"tool_search": {"query": "select:weather"}}]},
        {"tool_calls": [{"weather": {"city": "Oslo"}}]},  # not in this pass's list, callable
        "It is sunny.",
        {"tool_calls": [{"weather": {"city": "Rome"}}]},
        "Also sunny.",
    ]
    runtime, model, rec = run_with(turns, deferred)
    runtime.follow_up("And Rome?")  # starts a second pass of the same run
    assert runtime.exec("Weather in Oslo?") == "Also sunny."
    assert [(r.round, r.tools) for r in model.requests] == [
        (1, ["add", "tool_search"]),
        (2, ["add", "tool_search"]),
        (3, ["add", "tool_search"]),
        (4, ["add", "weather", "tool_search"]),  # next pass: loaded tool joins
        (5, ["add", "weather", "tool_search"]),
    ]
    assert model.requests[3].tool_specs[1].parameters == WEATHER_SCHEMA
    assert tool_results(rec) == [
        (
            "tool_search",
            False,
            "Loaded 1 tool(s); call them now:\n- weather: Current weather for a city.\n"
            f"  parameters: {json.dumps(WEATHER_SCHEMA, sort_keys=True)}",
        ),
        ("weather", False, "sunny in Oslo"),
        ("weather", False, "sunny in Rome"),
    ]
    assert rec.lines("tool_execution_end", "agent_end") == [
        "tool_execution_end:tool_search:ok@0.1",
        "tool_execution_end:weather:ok@0.2",
        "tool_execution_end:weather:ok@0.4",
        "agent_end:stop@0.5",
    ]


def test_the_search_tool_describes_the_catalog(deferred: ToolRegistry) -> None:
    runtime, model, _ = run_with(["ok"], deferred)
    runtime.exec("hi")
    search = model.requests[0].tool_specs[-1]
    assert search.description == (
        "Load tools that are available but not yet in your tool list (3: forecast_weekly, "
        "stock_price, weather). Pass query 'select:name1,name2' to load exact names, or "
        "keywords to search names and descriptions ('+word' requires the word in the name). "
        "Loaded tools can be called right away."
    )


def test_keyword_search_ranks_names_over_descriptions(deferred: ToolRegistry) -> None:
    turns = [
        {"tool_calls": [{"tool_search": {"query": "weather", "max_results": 1}}]},
        {"tool_calls": [{"tool_search": {"query": "+stock ticker"}}]},
        {"tool_calls": [{"tool_search": {"query": "select:nope,stock_price"}}]},
        {"tool_calls": [{"tool_search": {"query": "zebra"}}]},
        "done",
    ]
    runtime, _, rec = run_with(turns, deferred)
    runtime.exec("find")
    texts = [text for _, _, text in tool_results(rec)]
    assert texts[0].splitlines()[:2] == [
        "Loaded 1 tool(s); call them now:",
        "- weather: Current weather for a city.",  # name hit + description hit ranks first
    ]
    assert texts[1].splitlines()[1].startswith("- stock_price:")
    assert texts[2].splitlines()[-1] == (
        "Not found: nope (deferred tools: forecast_weekly, stock_price, weather)."
    )
    assert texts[3] == (
        "No deferred tool matches 'zebra'. Deferred tools: forecast_weekly, stock_price, weather."
    )


def test_the_loaded_set_belongs_to_one_run(deferred: ToolRegistry) -> None:
    turns = [
        {"tool_calls": [{"tool_search": {"query": "select:weather"}}]},
        "first",
        "second",
    ]
    runtime, model, _ = run_with(turns, deferred)
    runtime.follow_up("more")
    runtime.exec("one")
    assert model.requests[-1].tools == ["add", "weather", "tool_search"]
    model.turns.append(Turn(text="fresh"))
    runtime.exec("two")  # a new run on the same runtime starts with nothing loaded
    assert model.requests[-1].tools == ["add", "tool_search"]


def test_nested_exec_shares_the_run_loaded_set(deferred: ToolRegistry) -> None:
    @agentic_function
    def helper(runtime: Runtime) -> str:
        """Helper."""
        return str(runtime.exec("inner"))

    deferred.register(helper)
    turns = [
        {"tool_calls": [{"tool_search": {"query": "select:stock_price"}}]},
        {"tool_calls": [{"helper": {}}]},
        "inner done",
        "outer done",
    ]
    runtime, model, _ = run_with(turns, deferred)
    runtime.exec("go")
    assert model.requests[2].depth == 1
    assert model.requests[2].tools == ["add", "stock_price", "helper", "tool_search"]
    assert model.requests[3].tools == ["add", "helper", "tool_search"]  # same pass


def test_gating_applies_before_deferral(deferred: ToolRegistry) -> None:
    """A denied deferred tool is not in the catalog: tool_search cannot load it."""
    turns = [{"tool_calls": [{"tool_search": {"query": "select:weather"}}]}, "done"]
    runtime, model, rec = run_with(turns, deferred)
    runtime.exec("go", tools_deny=["weather", "forecast_weekly"])
    assert "(1: stock_price)" in model.requests[0].tool_specs[-1].description
    assert tool_results(rec)[0][2] == (
        "No deferred tool matches 'select:weather'. Deferred tools: stock_price."
    )


def test_no_deferred_tool_means_no_search_tool(registry: ToolRegistry) -> None:
    function(registry=registry, name="only")(lambda: None)
    runtime, model, _ = run_with(["ok"], registry)
    runtime.exec("go")
    assert model.requests[0].tools == ["only"]


def test_tool_dicts_carry_gating_keys(registry: ToolRegistry) -> None:
    """How scenario files mark simulated tools: gating flags as keys of the tool dict."""
    registry.register(
        {"spec": {"name": "lookup"}, "execute": lambda: "found", "defer": True, "toolset": "kb"}
    )
    registry.register({"spec": {"name": "secret"}, "execute": lambda: "", "unsafe_in": "chat"})
    turns = [{"tool_calls": [{"lookup": {}}]}, "done"]
    runtime, model, rec = run_with(turns, registry)
    runtime.exec("go", tools_source="chat")
    assert model.requests[0].tools == ["tool_search"]
    assert tool_results(rec) == [("lookup", False, "found")]  # callable before loading
    assert registry.select(toolset="kb").names == ["lookup"]
