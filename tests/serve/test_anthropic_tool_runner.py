"""The anthropic SDK's tool runner against the served scenario, both ways it runs: by
default over a message thread (``thread: {"type": "create"}``, then ``continue`` turns
that send only the new messages, without ``system`` and ``tools``), and with
``thread=False`` (the whole history every turn). The session keeps each thread's messages,
so ``expect.requests``, the trace and the client checks see the whole conversation either
way; a ``continue`` from a message the session holds no thread for gets the API's
``thread_not_found`` error, on which the SDK sends the whole history again."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import httpx2
import pytest

from openprogram_sim.play import serve_scenario

KEY = "sk-ant-" + "test-placeholder-0123"
BETA = "message-threads-2026-08-12"
SYSTEM = "You are a weather assistant."

SCENARIO = """\
scenario: the tool runner asks for the weather, then converts it
tools:
  get_weather:
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    returns: "sunny, 21°C"
  to_fahrenheit:
    parameters: {type: object, properties: {celsius: {type: number}}, required: [celsius]}
    returns: "69.8°F"
exec: {content: "Weather in Paris, in Fahrenheit?"}
model:
  - tool_calls: [{get_weather: {city: Paris}}]
  - tool_calls: [{to_fahrenheit: {celsius: 21}}]
  - text: "Sunny in Paris, 69.8°F."
expect:
  requests:
    - {round: 1, message_count: 1, system_prompt: "You are a weather assistant.",
       tools: [get_weather, to_fahrenheit]}
    - {round: 2, message_count: 3, system_prompt: "You are a weather assistant.",
       tools: [get_weather, to_fahrenheit],
       last_message: {role: toolResult, tool_name: get_weather, text: "sunny, 21°C",
                      is_error: false}}
    - round: 3
      message_count: 5
      system_prompt: "You are a weather assistant."
      tools: [get_weather, to_fahrenheit]
      messages:
        - {role: user, text: "Weather in Paris, in Fahrenheit?"}
        - {role: assistant, text: "", tool_calls: [{name: get_weather, arguments: {city: Paris}}]}
        - {role: toolResult, text: "sunny, 21°C", tool_name: get_weather, is_error: false}
        - {role: assistant, text: "",
           tool_calls: [{name: to_fahrenheit, arguments: {celsius: 21}}]}
        - {role: toolResult, text: "69.8°F", tool_name: to_fahrenheit, is_error: false}
  trajectory:
    mode: exact
    calls: [{get_weather: {city: Paris}}, {to_fahrenheit: {celsius: 21}}]
  properties:
    - before: {first: get_weather, then: to_fahrenheit}
    - ends_with: {reason: stop}
"""


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "runner.yaml"
    path.write_text(SCENARIO)
    return path


def tools(anthropic: ModuleType) -> list[Any]:
    """The runner's real tools (``@beta_tool`` functions)."""

    @anthropic.beta_tool
    def get_weather(city: str) -> str:
        """The current weather in a city, in degrees Celsius.

        Args:
            city: The city.
        """
        return {"Paris": "sunny, 21°C"}[city]

    @anthropic.beta_tool
    def to_fahrenheit(celsius: float) -> str:
        """Degrees Celsius in Fahrenheit.

        Args:
            celsius: The temperature.
        """
        return f"{celsius * 9 / 5 + 32:.1f}°F"

    return [get_weather, to_fahrenheit]


def run(client: Any, anthropic: ModuleType, **options: Any) -> list[Any]:
    """The tool runner to its end: each assistant message's block types."""
    runner = client.beta.messages.tool_runner(
        model="claude-sonnet-4-5", max_tokens=200, system=SYSTEM, tools=tools(anthropic),
        messages=[{"role": "user", "content": "Weather in Paris, in Fahrenheit?"}], **options,
    )  # fmt: skip
    replies = []
    for item in runner:  # a message, or (stream=True) the stream of one
        message = item.get_final_message() if hasattr(item, "get_final_message") else item
        replies.append([b.type for b in message.content])
    return replies


def sent(server: Any, session: str) -> list[tuple[Any, ...]]:
    """Each request as the client sent it: its ``thread``, whether it carried ``system``
    and ``tools``, its message count and the threads beta header."""
    return [
        (
            r.body.get("thread"),
            "system" in r.body,
            "tools" in r.body,
            len(r.body["messages"]),
            BETA in r.headers.get("anthropic-beta", ""),
        )
        for r in server.session(session).requests
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_the_tool_runner_on_a_thread_is_read_as_the_whole_conversation(
    anthropic: ModuleType, scenario: Path, stream: bool
) -> None:
    with serve_scenario(scenario) as server:
        client = anthropic.Anthropic(
            base_url=server.base_url("anthropic", "t"), api_key=KEY, max_retries=0
        )
        with client:
            replies = run(client, anthropic, stream=stream)
        requests = sent(server, "t")
        trace = server.session("t").trace().trace
        report = server.end_session("t")

    assert replies == [["tool_use"], ["tool_use"], ["text"]]
    # what the runner sent: a thread created, then continued with the new results only
    assert requests == [
        ({"type": "create"}, True, True, 1, True),
        ({"type": "continue", "previous_message_id": "msg_wire1"}, False, False, 1, True),
        ({"type": "continue", "previous_message_id": "msg_wire2"}, False, False, 1, True),
    ]
    ends = [(e["tool_name"], e["result"], e["is_error"])
            for e in trace if e["type"] == "tool_execution_end"]  # fmt: skip
    assert ends == [("get_weather", "sunny, 21°C", False), ("to_fahrenheit", "69.8°F", False)]
    assert (report.passed, report.render()) == (True, "")


def test_the_tool_runner_without_a_thread_sends_the_history_and_passes_the_same_file(
    anthropic: ModuleType, scenario: Path
) -> None:
    with serve_scenario(scenario) as server:
        client = anthropic.Anthropic(
            base_url=server.base_url("anthropic", "full"), api_key=KEY, max_retries=0
        )
        with client:
            replies = run(client, anthropic, thread=False)
        requests = sent(server, "full")
        report = server.end_session("full")

    assert replies == [["tool_use"], ["tool_use"], ["text"]]
    assert requests == [(None, True, True, 1, False), (None, True, True, 3, False),
                        (None, True, True, 5, False)]  # fmt: skip
    assert (report.passed, report.render()) == (True, "")


def test_a_thread_the_session_does_not_hold_is_sent_again_whole(
    anthropic: ModuleType, scenario: Path
) -> None:
    """The session ends between two turns (as a server restart would lose its threads):
    the next ``continue`` gets ``thread_not_found`` and the SDK sends the whole history
    under a new thread, which the new session serves from its first turn."""
    with serve_scenario(scenario) as server:
        client = anthropic.Anthropic(
            base_url=server.base_url("anthropic", "lost"), api_key=KEY, max_retries=0
        )
        runner = client.beta.messages.tool_runner(
            model="claude-sonnet-4-5", max_tokens=200, system=SYSTEM, tools=tools(anthropic),
            messages=[{"role": "user", "content": "Weather in Paris, in Fahrenheit?"}],
        )  # fmt: skip
        with client:
            first = next(iter(runner))
            before = server.end_session("lost")
            second = next(iter(runner))
        requests = sent(server, "lost")
        report = server.end_session("lost")

    assert [b.name for b in first.content] == [b.name for b in second.content] == ["get_weather"]
    assert before.model_calls == 1
    assert requests == [
        ({"type": "continue", "previous_message_id": "msg_wire1"}, False, False, 1, True),
        ({"type": "create"}, True, True, 3, True),
    ]
    message = (
        "Thread message 'msg_wire1' not found. (openprogram-sim: session 'lost' holds no "
        "thread ending in that message; it keeps the messages it served on a thread, ids "
        "msg_wire1, msg_wire2, ... by request. The SDK sends the whole history again under "
        "a new thread; tool_runner(..., thread=False) sends it every turn)"
    )
    assert report.errors == [f"request #1 (anthropic): {message}"]


def test_the_thread_errors_are_the_apis_shape(anthropic: ModuleType, scenario: Path) -> None:
    with serve_scenario(scenario) as server:
        client = anthropic.Anthropic(
            base_url=server.base_url("anthropic", "bad"), api_key=KEY, max_retries=0
        )
        ask = {"model": "claude-sonnet-4-5", "max_tokens": 50, "betas": [BETA],
               "messages": [{"role": "user", "content": "Hi."}]}  # fmt: skip
        with client:
            with pytest.raises(anthropic.NotFoundError) as unknown:
                client.beta.messages.create(
                    **ask, thread={"type": "continue", "previous_message_id": "msg_nope"}
                )
            first = client.beta.messages.create(**ask, thread={"type": "create"})
            with pytest.raises(anthropic.BadRequestError) as repeated:
                client.beta.messages.create(
                    **ask, system="Be brief.",
                    thread={"type": "continue", "previous_message_id": first.id},
                )  # fmt: skip
        with httpx2.Client(base_url=server.base_url("anthropic", "bad")) as http:
            odd = http.post("/v1/messages", json={**ask, "thread": {"type": "fork"}})
            bare = http.post("/v1/messages", json={**ask, "thread": {"type": "continue"}})
        server.end_session("bad")

    assert unknown.value.status_code == 404
    assert unknown.value.body["error"]["type"] == "not_found_error"
    assert unknown.value.body["error"]["details"] == {"error_code": "thread_not_found"}
    assert unknown.value.body["error"]["message"].startswith(
        "Thread message 'msg_nope' not found. (openprogram-sim: session 'bad' holds no thread"
    )
    assert repeated.value.status_code == 400
    assert repeated.value.body == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "`system` cannot be sent on a thread `continue`: the thread keeps the "
            "ones it was created with; start a new thread (`create`) to change them",
        },
        "request_id": "req_wire",
    }
    assert (odd.status_code, odd.json()["error"]["message"]) == (
        400,
        'thread: {"type": "fork"} is not a thread; send {"type": "create"} or '
        '{"type": "continue", "previous_message_id": "msg_..."}',
    )
    assert (bare.status_code, bare.json()["error"]["message"]) == (
        400,
        'thread.previous_message_id must be the id of a message (a string, e.g. "msg_wire1"), '
        "got null",
    )


def test_a_session_keeps_the_most_recent_conversations_only() -> None:
    """A long-lived session (the default one never ends) keeps the last ``KEPT`` thread
    messages and responses: continuing an older one is continuing one not kept."""
    from openprogram_sim.wire._anthropic import KEPT, ThreadRefused, ThreadStore
    from openprogram_sim.wire._openai_responses import ResponseStore, UnknownResponse
    from openprogram_sim.wire._trace import Served

    threads, responses = ThreadStore(limit=2), ResponseStore(limit=2)
    for seq in (1, 2, 3):
        ask = {"thread": {"type": "create"}, "messages": [{"role": "user", "content": "Hi."}]}
        threads.keep(seq, ask, Served(status=200, text=f"reply {seq}"))
        responses.keep(seq, {"input": "Hi."}, Served(status=200, text=f"reply {seq}"))

    def go_on(previous: str) -> dict[str, Any]:
        body = {"thread": {"type": "continue", "previous_message_id": previous}, "messages": []}
        return threads.expand(body, "session 's'")

    assert go_on("msg_wire3")["messages"][-1] == {
        "role": "assistant", "content": [{"type": "text", "text": "reply 3"}],
    }  # fmt: skip
    with pytest.raises(ThreadRefused) as lost:
        go_on("msg_wire1")
    assert lost.value.code == "thread_not_found"
    assert len(responses.expand({"previous_response_id": "resp_wire2"}, "s")["input"]) == 2
    with pytest.raises(UnknownResponse):
        responses.expand({"previous_response_id": "resp_wire1"}, "s")
    assert KEPT == 1000 and ThreadStore().limit == ResponseStore().limit == KEPT


RATE_LIMITED = """\
scenario: the second turn of a thread is rate limited once
tools:
  get_weather:
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
  to_fahrenheit:
    parameters: {type: object, properties: {celsius: {type: number}}, required: [celsius]}
exec: {content: "Weather in Paris, in Fahrenheit?"}
model:
  - tool_calls: [{get_weather: {city: Paris}}]
  - {stop_reason: error, error: "slow down", error_reason: rate_limit,
     wire: {retry_after_ms: 200}}
  - tool_calls: [{to_fahrenheit: {celsius: 21}}]
  - text: "Sunny in Paris, 69.8°F."
expect:
  trajectory:
    mode: exact
    calls: [{get_weather: {city: Paris}}, {to_fahrenheit: {celsius: 21}}]
  properties:
    - ends_with: {reason: stop}
"""


def test_a_rate_limited_continue_is_retried_as_it_was_sent(
    anthropic: ModuleType, tmp_path: Path
) -> None:
    """The SDK retries the same ``continue`` after the ``retry-after`` it was sent: the
    thread still holds its message, the trace reads the retry as one, and the client
    checks (``retry_after``, ``max_retries``) hold."""
    path = tmp_path / "limited.yaml"
    path.write_text(RATE_LIMITED)
    with serve_scenario(path) as server:
        client = anthropic.Anthropic(
            base_url=server.base_url("anthropic", "slow"), api_key=KEY, max_retries=2
        )
        with client:
            replies = run(client, anthropic)
        requests = sent(server, "slow")
        rounds = server.session("slow").trace().rounds
        report = server.end_session("slow")

    assert replies == [["tool_use"], ["tool_use"], ["text"]]
    assert [thread for thread, *_ in requests] == [
        {"type": "create"},
        {"type": "continue", "previous_message_id": "msg_wire1"},
        {"type": "continue", "previous_message_id": "msg_wire1"},  # the retry
        {"type": "continue", "previous_message_id": "msg_wire3"},
    ]
    assert [(r.index, r.retry_of, len(r.exchange.messages)) for r in rounds] == [
        (1, None, 1), (2, None, 3), (3, 2, 3), (4, None, 5),
    ]  # fmt: skip
    assert (report.passed, report.render()) == (True, "")
