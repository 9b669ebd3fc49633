"""Three agent frameworks, each its real agent with real tools, against one served scenario
(``examples/any_agent/weather.yaml``): pydantic-ai on Anthropic Messages, openai-agents on
OpenAI Responses, langchain's ``create_agent`` (a langgraph graph) on OpenAI Chat. Each
session's trace is checked with the file's ``expect.trajectory`` and ``expect.properties``
when it ends: it passes as written; an agent whose loop is capped too low breaks the
trajectory, and one whose weather tool answers in Fahrenheit breaks a property, each with the
message the user reads."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from openprogram_sim.play import serve_scenario
from openprogram_sim.wire import WireServer

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = Path("examples/any_agent/weather.yaml")
"""From the project's root, as a user names it (the messages show it so)."""
QUESTION = "What's the weather in Paris, in Fahrenheit?"
ANSWER = "Sunny in Paris, 69.8°F."
KEY = "sk-" + "test-placeholder-0123"

Agent = Callable[[str, "Tools", int], str]


class Tools:
    """The agent's real tools, as plain functions each framework wraps its own way.
    ``units`` is the weather station's: ``F`` plants the bug the properties catch."""

    def __init__(self, units: str = "C") -> None:
        self.units = units
        self.calls: list[tuple[str, Any]] = []

    def get_weather(self, city: str) -> str:
        self.calls.append(("get_weather", city))
        readings = {"Paris": 21.0, "Rome": 25.0}
        celsius = readings[city]
        if self.units == "F":
            return f"sunny, {celsius * 9 / 5 + 32:.0f}°F"
        return f"sunny, {celsius:.0f}°C"

    def to_fahrenheit(self, celsius: float) -> str:
        self.calls.append(("to_fahrenheit", celsius))
        return f"{celsius * 9 / 5 + 32:.1f}°F"


# ---------------------------------------------------------------------------- the agents


def pydantic_ai_agent(url: str, tools: Tools, limit: int) -> str:
    """pydantic-ai's ``Agent`` on its Anthropic model; ``limit``: its request limit."""
    from anthropic import AsyncAnthropic
    from pydantic_ai import Agent, UsageLimits
    from pydantic_ai.exceptions import UsageLimitExceeded
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    async def run() -> str:
        client = AsyncAnthropic(base_url=url, api_key=KEY, max_retries=0)
        model = AnthropicModel(
            "claude-sonnet-5-5", provider=AnthropicProvider(anthropic_client=client)
        )
        agent = Agent(model, instructions="You are a weather assistant.")

        @agent.tool_plain
        def get_weather(city: str) -> str:
            """The current weather in a city, in degrees Celsius."""
            return tools.get_weather(city)

        @agent.tool_plain
        def to_fahrenheit(celsius: float) -> str:
            """Degrees Celsius in Fahrenheit."""
            return tools.to_fahrenheit(celsius)

        try:
            async with client:
                result = await agent.run(QUESTION, usage_limits=UsageLimits(request_limit=limit))
        except UsageLimitExceeded as exc:
            return f"stopped: {exc}"
        return str(result.output)

    return asyncio.run(run())


def openai_agents_agent(url: str, tools: Tools, limit: int) -> str:
    """openai-agents' ``Agent`` and ``Runner`` on its Responses model; ``limit``: its
    ``max_turns``."""
    from agents import (
        Agent,
        MaxTurnsExceeded,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # its traces go to OpenAI's platform, unreachable here

    @function_tool
    def get_weather(city: str) -> str:
        """The current weather in a city, in degrees Celsius."""
        return tools.get_weather(city)

    @function_tool
    def to_fahrenheit(celsius: float) -> str:
        """Degrees Celsius in Fahrenheit."""
        return tools.to_fahrenheit(celsius)

    async def run() -> str:
        client = AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)
        model = OpenAIResponsesModel("gpt-4o", openai_client=client)
        agent = Agent(
            name="weather", instructions="You are a weather assistant.", model=model,
            tools=[get_weather, to_fahrenheit],
        )  # fmt: skip
        try:
            async with client:
                result = await Runner.run(agent, QUESTION, max_turns=limit)
        except MaxTurnsExceeded as exc:
            return f"stopped: {exc}"
        return str(result.final_output)

    return asyncio.run(run())


def langchain_agent(url: str, tools: Tools, limit: int) -> str:
    """langchain's ``create_agent`` (a langgraph graph) on ``ChatOpenAI`` (OpenAI Chat);
    ``limit``: the graph's ``recursion_limit``."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.errors import GraphRecursionError

    @tool
    def get_weather(city: str) -> str:
        """The current weather in a city, in degrees Celsius."""
        return tools.get_weather(city)

    @tool
    def to_fahrenheit(celsius: float) -> str:
        """Degrees Celsius in Fahrenheit."""
        return tools.to_fahrenheit(celsius)

    model = ChatOpenAI(model="gpt-4o-mini", base_url=url, api_key=KEY, max_retries=0)
    agent = create_agent(
        model, tools=[get_weather, to_fahrenheit], system_prompt="You are a weather assistant."
    )
    try:
        state = agent.invoke(
            {"messages": [{"role": "user", "content": QUESTION}]},
            {"recursion_limit": limit},
        )
    except GraphRecursionError as exc:
        return f"stopped: {str(exc).splitlines()[0]}"
    return str(state["messages"][-1].content)


# Each framework: its agent, the API it speaks, and the cap that stops it after one model
# call (pydantic-ai counts requests, openai-agents model turns, langgraph graph steps).
FRAMEWORKS: dict[str, tuple[Agent, str, int, str]] = {
    "pydantic-ai": (pydantic_ai_agent, "anthropic", 1, "pydantic_ai.models.anthropic"),
    "openai-agents": (openai_agents_agent, "openai", 1, "agents"),
    "langchain": (langchain_agent, "openai", 2, "langchain.agents"),
}
UNLIMITED = {"pydantic-ai": 50, "openai-agents": 10, "langchain": 25}


@pytest.fixture(params=sorted(FRAMEWORKS))
def framework(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(ROOT)
    name: str = request.param
    pytest.importorskip(FRAMEWORKS[name][3])
    return name


def run_session(
    server: WireServer, framework: str, session: str, tools: Tools, *, capped: bool = False
) -> str:
    agent, api, cap, _ = FRAMEWORKS[framework]
    url = server.base_url(api, session)
    return agent(url, tools, cap if capped else UNLIMITED[framework])


def served_calls(trace: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each tool call as the trace has it: round, name, arguments, the result sent back."""
    ends = {e["tool_call_id"]: e for e in trace if e["type"] == "tool_execution_end"}
    return [
        (e["round"], e["tool_name"], e["args"], ends.get(e["tool_call_id"], {}).get("result"))
        for e in trace
        if e["type"] == "tool_execution_start"
    ]


def test_each_frameworks_session_holds_the_trajectory_and_the_properties(framework: str) -> None:
    tools = Tools()
    with serve_scenario(SCENARIO) as server:
        output = run_session(server, framework, "weather", tools)
        trace = server.session("weather").trace().trace
        report = server.end_session("weather")

    assert output == ANSWER
    assert tools.calls == [("get_weather", "Paris"), ("to_fahrenheit", 21)]
    assert served_calls(trace) == [
        (1, "get_weather", {"city": "Paris"}, "sunny, 21°C"),
        (2, "to_fahrenheit", {"celsius": 21}, "69.8°F"),
    ]
    ends = [(e["type"], e.get("reason")) for e in trace if e["type"].startswith("agent_")]
    assert ends == [("agent_start", None), ("agent_end", "stop")]
    assert (report.passed, report.render()) == (True, "")


def test_an_agent_capped_too_low_breaks_the_trajectory(framework: str) -> None:
    with serve_scenario(SCENARIO) as server:
        output = run_session(server, framework, "capped", Tools(), capped=True)
        report = server.end_session("capped")

    assert output.startswith("stopped: ")
    assert report.render() == (
        "- 2 of 3 scripted turns were never requested (the client made 1 model call(s))\n"
        "  remove them, or check why the client stopped early\n"
        "- trajectory (exact) did not match: score 0.67, min_score 1.0\n"
        f"  at {SCENARIO}:18\n"
        "  score 0.67 (F1); precision 1/1 = 1.00, recall 1/2 = 0.50, F1 0.67\n"
        "  expected call 2 of 2 had no match: to_fahrenheit {celsius: 21} (line 20)\n"
        "    no call of to_fahrenheit was made\n"
        "  calls made at depth 0, by round:\n"
        '    #6 get_weather({"city": "Paris"}) d0 r1  <- expected call 1\n'
        '- property 3 (ends_with) does not hold: ends_with: {"reason": "stop"}\n'
        f"  at {SCENARIO}:24\n"
        '  the run ended with reason "aborted" at #8, expected "stop"\n'
        "    #8   agent_end              d0 r1 reason=aborted"
    )


def test_a_weather_tool_in_fahrenheit_breaks_a_property(framework: str) -> None:
    tools = Tools(units="F")
    with serve_scenario(SCENARIO) as server:
        output = run_session(server, framework, "fahrenheit", tools)
        trace = server.session("fahrenheit").trace().trace
        report = server.end_session("fahrenheit")

    assert output == ANSWER  # the scripted model answers the same: only the trace tells
    assert served_calls(trace)[0] == (1, "get_weather", {"city": "Paris"}, "sunny, 70°F")
    assert tools.calls == [("get_weather", "Paris"), ("to_fahrenheit", 21)]
    assert report.render() == (
        '- property 1 (before) does not hold: before: {"first": {"tool": "get_weather", '
        '"result": {"$contains": "°C"}}, "then": "to_fahrenheit"}\n'
        f"  at {SCENARIO}:22\n"
        '  to_fahrenheit at #14 has no get_weather {result: contains "°C"} that ended before it\n'
        '    #14  tool_execution_start   d0 r2 to_fahrenheit({"celsius": 21})'
    )


@pytest.mark.parametrize("name", ["weather.yaml", "two_cities.yaml"])
def test_the_docs_show_the_example_files_as_they_are(name: str) -> None:
    """docs/your-agent.md's "Testing any agent" shows each file whole (tests/test_docs.py
    runs its blocks against the file on disk): the page and the file must not drift."""
    page = (ROOT / "docs" / "your-agent.md").read_text()
    blocks = re.findall(r"^```yaml\n(.*?)^```$", page, re.S | re.M)
    text = (ROOT / "examples" / "any_agent" / name).read_text()
    assert text in blocks, f"docs/your-agent.md has no yaml block equal to {name}"
    assert f'serve_scenario("examples/any_agent/{name}")' in page
