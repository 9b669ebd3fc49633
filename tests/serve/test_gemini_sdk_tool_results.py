"""google-genai's automatic function calling against a served scenario (issue 22, item 8):
the SDK runs the Python tool itself and sends its return value as ``functionResponse:
{"response": {"result": X}}`` (a failure as ``{"error": "..."}``). The server reads X as
the tool result's text, non-ASCII characters kept, so an exact ``text:`` in
``expect.requests`` matches what the tool returned."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from openprogram_sim.scenario import parse_scenario

# `genai` is the fixture (tests/conftest.py) that imports the SDK when a test asks for it.

WEATHER = Path(__file__).parent / "data" / "weather_agent.yaml"

FAILING = """\
scenario: the weather lookup fails, and the model says so
tools:
  get_weather:
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    raises: "no station in Zürich"
exec: {content: "Weather in Zürich?", tools: [get_weather]}
model:
  - tool_calls: [{get_weather: {city: Zürich}}]
  - text: "No data for Zürich."
expect:
  requests:
    - call: 2
      last_message:
        role: toolResult
        tool_name: get_weather
        is_error: true
        text: {$contains: "because of error no station in Zürich"}
"""


def ask(genai: ModuleType, server: Any, question: str, tool: Any, system: str = "") -> str:
    """One ``generate_content`` with the SDK calling ``tool`` automatically."""
    options = genai.types.HttpOptions(base_url=server.base_url("gemini"))
    config = genai.types.GenerateContentConfig(system_instruction=system or None, tools=[tool])
    with genai.Client(api_key="gemini-test", http_options=options) as client:
        reply = client.models.generate_content(
            model="gemini-2.5-flash", contents=question, config=config
        )
    return str(reply.text)


def test_a_non_ascii_result_matches_an_exact_text(
    genai: ModuleType, openprogram_serve: Any
) -> None:
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return "sunny, 21°C"

    server = openprogram_serve(WEATHER)
    question = "What's the weather in Paris?"
    answer = ask(genai, server, question, get_weather, "You are a weather assistant.")
    assert answer == "It is sunny in Paris, 21°C."
    server.assert_consumed()
    report = server.check()  # the scenario's expect.requests: text: "sunny, 21°C"
    assert report.passed, report.render()
    sent = server.session().requests[1].body["contents"][-1]["parts"][0]
    assert sent["functionResponse"]["response"] == {"result": "sunny, 21°C"}  # the SDK's shape
    assert server.session().request_fields()[1]["last_message"] == {
        "role": "toolResult",
        "text": "sunny, 21°C",
        "tool_name": "get_weather",
        "is_error": False,
    }


def test_a_structured_result_reads_as_json_with_its_characters_kept(
    genai: ModuleType, openprogram_serve: Any
) -> None:
    def get_weather(city: str) -> dict[str, Any]:
        """The current weather in a city."""
        return {"sky": "sunny", "temperature": "21°C"}

    server = openprogram_serve(WEATHER)
    ask(genai, server, "What's the weather in Paris?", get_weather)
    last = server.session().request_fields()[1]["last_message"]
    assert last["text"] == '{"sky": "sunny", "temperature": "21°C"}'
    assert last["is_error"] is False


def test_a_tool_that_raises_is_read_as_an_error_result(
    genai: ModuleType, openprogram_serve: Any
) -> None:
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        raise LookupError("no station in Zürich")

    server = openprogram_serve(parse_scenario(FAILING, "failing.yaml"))
    assert ask(genai, server, "Weather in Zürich?", get_weather) == "No data for Zürich."
    sent = server.session().requests[1].body["contents"][-1]["parts"][0]
    error = sent["functionResponse"]["response"]["error"]  # the SDK's words around the tool's
    assert error.endswith("because of error no station in Zürich")
    last = server.session().request_fields()[1]["last_message"]
    assert (last["text"], last["is_error"]) == (error, True)
    report = server.check()
    assert report.passed, report.render()
