"""The agent's own Python tests, using the harness's pytest fixtures."""

from weather_agent.agent import answer
from weather_agent.tools import registry

from openprogram import Runtime
from openprogram_sim import assert_events


def test_answer_runs_the_real_tools(openprogram_model, openprogram_trace):
    model = openprogram_model(
        [{"tool_calls": [{"get_weather": {"city": "Cairo"}}]}, "31°C and clear in Cairo."]
    )
    runtime = Runtime(provider=model, registry=registry)
    runtime.subscribe(openprogram_trace)
    assert answer("Weather in Cairo?", runtime) == "31°C and clear in Cairo."
    assert_events(
        openprogram_trace,
        [
            {"tool_execution_end": {"tool_name": "get_weather", "is_error": False}},
            {"agent_end": {"reason": "stop"}},
        ],
    )
    # chat never offers book_flight, whatever the environment
    assert "book_flight" not in model.requests[0].tools
