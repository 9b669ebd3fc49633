"""openai-agents on OpenAI Responses with the conversation kept on the server: each request
sends ``previous_response_id`` and only its new items, under ``auto_previous_response_id``
(within a run) and chained by hand (a second run continuing the first's last response). The
session keeps the responses it served, so ``expect.requests``, the trace and the client
checks read every request as the whole conversation, tool names and all."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from openprogram_sim.play import serve_scenario

pytest.importorskip("agents")

from agents import (  # (after the skip: the extra may be absent)
    Agent,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI, BadRequestError

set_tracing_disabled(True)  # its traces go to OpenAI's platform, unreachable here

KEY = "sk-" + "test-placeholder-0123"
READINGS = {"Paris": "sunny, 21°C", "Rome": "rainy, 17°C"}


@function_tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return READINGS[city]


TWO_QUESTIONS = """\
scenario: two questions on one conversation, the server holding it
tools:
  get_weather:
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    returns: "sunny, 21°C"
exec: {content: "Paris?"}
model:
  - tool_calls: [{get_weather: {city: Paris}}]
  - text: "Sunny in Paris."
  - tool_calls: [{get_weather: {city: Rome}}]
  - text: "Rainy in Rome."
expect:
  requests:
    - {round: 1, message_count: 1, tools: [get_weather], system_prompt: "Weather only."}
    - round: 2
      message_count: 3
      tools: [get_weather]
      last_message: {role: toolResult, tool_name: get_weather, text: "sunny, 21°C"}
    - {round: 3, message_count: 5, last_message: {role: user, text: "And Rome?"}}
    - round: 4
      message_count: 7
      messages:
        - {role: user, text: "Paris?"}
        - {role: assistant, text: "",
           tool_calls: [{name: get_weather, arguments: {city: Paris}}]}
        - {role: toolResult, tool_name: get_weather, text: "sunny, 21°C"}
        - {role: assistant, text: "Sunny in Paris.", tool_calls: []}
        - {role: user, text: "And Rome?"}
        - {role: assistant, text: "",
           tool_calls: [{name: get_weather, arguments: {city: Rome}}]}
        - {role: toolResult, tool_name: get_weather, text: "rainy, 17°C"}
  trajectory:
    mode: exact
    calls: [{get_weather: {city: Paris}}, {get_weather: {city: Rome}}]
  properties:
    - at_most: {tool: get_weather, times: 2}
    - ends_with: {reason: stop}
"""


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "agents.yaml"
    path.write_text(TWO_QUESTIONS)
    return path


def agent(url: str, **settings: Any) -> tuple[Agent[Any], AsyncOpenAI]:
    client = AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)
    model = OpenAIResponsesModel("gpt-4o", openai_client=client)
    weather = Agent(
        name="weather", instructions="Weather only.", model=model, tools=[get_weather],
        model_settings=ModelSettings(**settings),
    )  # fmt: skip
    return weather, client


async def two_questions(url: str, *, stream: bool, chain: bool) -> list[str]:
    """Two runs, the second a new question on the first's conversation: continued from the
    first run's last response (``chain``), or given the first run's items again."""
    weather, client = agent(url)
    async with client:
        first = await ask(weather, "Paris?", stream=stream, auto_previous_response_id=True)
        if chain:
            follow = {"previous_response_id": first.last_response_id}
            second = await ask(weather, "And Rome?", stream=stream, **follow)
        else:
            history = [*first.to_input_list(), {"role": "user", "content": "And Rome?"}]
            second = await ask(weather, history, stream=stream)
    return [str(first.final_output), str(second.final_output)]


async def ask(weather: Agent[Any], question: Any, *, stream: bool, **options: Any) -> Any:
    if not stream:
        return await Runner.run(weather, question, **options)
    result = Runner.run_streamed(weather, question, **options)
    async for _ in result.stream_events():
        pass
    return result


def states(server: Any, session: str) -> list[tuple[Any, int]]:
    """Each request's ``previous_response_id`` and how many input items it sent."""
    return [(r.body.get("previous_response_id"), len(r.body["input"]))
            for r in server.session(session).requests]  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_auto_previous_response_id_and_a_chained_run_are_read_whole(
    scenario: Path, stream: bool
) -> None:
    with serve_scenario(scenario) as server:
        url = server.base_url("openai", "chained")
        answers = asyncio.run(two_questions(url, stream=stream, chain=True))
        sent = states(server, "chained")
        trace = server.session("chained").trace().trace
        report = server.end_session("chained")

    assert answers == ["Sunny in Paris.", "Rainy in Rome."]
    # the client sent only what is new each time
    assert sent == [(None, 1), ("resp_wire1", 1), ("resp_wire2", 1), ("resp_wire3", 1)]
    # and the trace has the two runs whole: the tool names, results and both user turns
    kinds = [(e["type"], e["round"], e.get("tool_name") or e.get("text"))
             for e in trace if e["type"] in ("agent_start", "tool_execution_end")
             or (e.get("role") == "user" and e["type"] == "message_end")]  # fmt: skip
    assert kinds == [
        ("agent_start", 0, None),
        ("message_end", 1, "Paris?"),
        ("tool_execution_end", 1, "get_weather"),
        ("agent_start", 0, None),
        ("message_end", 1, "And Rome?"),
        ("tool_execution_end", 1, "get_weather"),
    ]
    results = [(e["tool_name"], e["result"]) for e in trace if e["type"] == "tool_execution_end"]
    assert results == [("get_weather", "sunny, 21°C"), ("get_weather", "rainy, 17°C")]
    assert (report.passed, report.render()) == (True, "")


def test_the_same_file_passes_when_the_client_sends_the_whole_history(scenario: Path) -> None:
    with serve_scenario(scenario) as server:
        url = server.base_url("openai", "whole")
        answers = asyncio.run(two_questions(url, stream=False, chain=False))
        sent = states(server, "whole")
        report = server.end_session("whole")

    assert answers == ["Sunny in Paris.", "Rainy in Rome."]
    # the first run chains within itself; the second sends everything, with no id
    assert sent == [(None, 1), ("resp_wire1", 1), (None, 5), (None, 7)]
    assert (report.passed, report.render()) == (True, "")


def test_store_false_with_chaining_is_the_apis_own_error_in_the_agent(scenario: Path) -> None:
    async def run(url: str) -> None:
        weather, client = agent(url, store=False)
        async with client:
            await Runner.run(weather, "Paris?", auto_previous_response_id=True)

    with serve_scenario(scenario) as server:
        with pytest.raises(BadRequestError) as caught:
            asyncio.run(run(server.base_url("openai", "unstored")))
        report = server.end_session("unstored")

    assert (caught.value.status_code, caught.value.code) == (400, "previous_response_not_found")
    assert report.errors == [
        "request #2 (openai-responses): Previous response with id 'resp_wire1' not found. "
        "(openprogram-sim: session 'unstored' served no response with that id, or served it "
        "under store: false; a session keeps the responses it served, ids resp_wire1, "
        "resp_wire2, ... by request)"
    ]


def test_a_run_on_a_conversation_is_refused_naming_what_to_send_instead(scenario: Path) -> None:
    """The server keeps no OpenAI Conversations: a request on one would be read without its
    history, so it is answered with an error rather than a silent 200."""

    async def run(url: str) -> None:
        weather, client = agent(url)
        async with client:
            await Runner.run(weather, "Paris?", conversation_id="conv_demo")

    with serve_scenario(scenario) as server:
        with pytest.raises(BadRequestError) as caught:
            asyncio.run(run(server.base_url("openai", "conv")))
        report = server.end_session("conv")

    message = (
        "openprogram-sim: session 'conv' cannot serve a request on a Conversation "
        '(conversation: "conv_demo"): the server keeps no Conversations, and read without '
        "its items the request would be checked as a conversation it is not. Send "
        "previous_response_id with the new items, or the whole input (openai-agents: drop "
        "conversation_id; use auto_previous_response_id=True or "
        "previous_response_id=result.last_response_id)"
    )
    assert caught.value.body == {
        "message": message, "type": "invalid_request_error", "param": "conversation",
        "code": "unsupported_parameter",
    }  # fmt: skip
    assert report.errors == [f"request #1 (openai-responses): {message}"]


def test_the_conversations_api_is_refused_naming_what_to_use_instead(scenario: Path) -> None:
    """openai-agents' ``OpenAIConversationsSession`` keeps the history in OpenAI's
    Conversations API, which the server does not serve: its first call (``POST
    /v1/conversations``) gets a 404 that says so and what to use instead."""
    from agents import OpenAIConversationsSession
    from openai import NotFoundError

    async def run(url: str) -> None:
        weather, client = agent(url)
        async with client:
            memory = OpenAIConversationsSession(openai_client=client)
            await Runner.run(weather, "Paris?", session=memory)

    with serve_scenario(scenario) as server:
        with pytest.raises(NotFoundError) as caught:
            asyncio.run(run(server.base_url("openai", "memory")))
        report = server.end_session("memory")

    message = (
        "openprogram-sim: POST '/s/memory/v1/conversations' is OpenAI's Conversations API, "
        "which this server does not serve: a session keeps the Responses it served instead. "
        "Chain requests with previous_response_id, or send the whole input (openai-agents: "
        "auto_previous_response_id=True, or a session kept on your side such as SQLiteSession "
        "in place of OpenAIConversationsSession)"
    )
    assert caught.value.body == {
        "message": message, "type": "invalid_request_error", "param": None,
        "code": "unsupported_api",
    }  # fmt: skip
    assert (report.model_calls, report.errors) == (0, [message])


def test_a_session_kept_on_the_clients_side_passes_the_same_file(scenario: Path) -> None:
    """openai-agents' ``SQLiteSession`` keeps the history itself and sends it whole."""
    from agents import SQLiteSession

    async def run(url: str) -> list[str]:
        weather, client = agent(url)
        memory = SQLiteSession("weather")  # in memory
        try:
            async with client:
                first = await Runner.run(weather, "Paris?", session=memory)
                second = await Runner.run(weather, "And Rome?", session=memory)
        finally:
            memory.close()
        return [str(first.final_output), str(second.final_output)]

    with serve_scenario(scenario) as server:
        answers = asyncio.run(run(server.base_url("openai", "sqlite")))
        sent = states(server, "sqlite")
        report = server.end_session("sqlite")

    assert answers == ["Sunny in Paris.", "Rainy in Rome."]
    assert sent == [(None, 1), (None, 3), (None, 5), (None, 7)]
    assert (report.passed, report.render()) == (True, "")
