"""The README's example: property tests of your own tools with the public strategies, over
``examples/weather_agent`` (``conftest.py`` makes it importable, as pytest's ``pythonpath``
setting does in your project)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from weather_agent.tools import convert, get_weather, registry

from openprogram_sim.fuzz import check_invariants, run_generated
from openprogram_sim.fuzz.strategies import scenarios, tool_calls
from openprogram_sim.scenario import Scenario


@given(tool_calls([get_weather, convert], valid=True))
def test_a_valid_call_returns_json_or_refuses_with_valueerror(call: dict) -> None:
    ((name, arguments),) = call.items()
    tool = {"get_weather": get_weather, "convert": convert}[name]
    try:
        result = tool(**arguments)
    except ValueError:
        return  # the documented refusal: an unknown city or unit
    json.dumps(result)  # what the model is sent must be JSON


# deadline=None: the first call pays one-time costs (the validator's error reporter is
# imported on the first invalid call), which Hypothesis's 200 ms deadline can catch
@settings(deadline=None)
@given(tool_calls(registry, valid=False))
def test_invalid_arguments_never_reach_a_tool(call: dict) -> None:
    scenario = {
        "scenario": "one invalid call",
        "registry": "weather_agent.tools:registry",
        "env": {"BOOKING_API_KEY": "test"},  # so that the gated book_flight is offered
        "exec": {"content": "go"},
        "model": [{"tool_calls": [call]}, {"text": "done"}],
    }
    [end] = [e for e in run_generated(scenario).trace if e["type"] == "tool_execution_end"]
    assert end["is_error"] and end["result"].startswith("Validation failed for tool"), end


@settings(max_examples=50, deadline=None)
@given(scenarios(registry, max_turns=4))
def test_the_loop_keeps_its_invariants_over_my_tools(scenario: Scenario) -> None:
    assert check_invariants(run_generated(scenario)) == []
