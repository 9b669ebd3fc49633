"""The official ``openai`` client (Chat Completions and Responses, streaming and not)
against the wire server: the scripted text, tool calls and stop reasons come back exactly,
and injected faults arrive as the SDK's own error types."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
from serve_support import CALL_ARGS, SEARCH_SCHEMA, TEXT, TEXT_TURN, TOOL_TURN

from openprogram_sim.wire import WireServer, serve

# `openai` is the fixture (tests/conftest.py) that imports the SDK when a test asks for it.

CHAT_TOOLS = [{"type": "function", "function": {"name": "search", "parameters": SEARCH_SCHEMA}}]
RESPONSES_TOOLS = [{"type": "function", "name": "search", "parameters": SEARCH_SCHEMA}]
HI = [{"role": "user", "content": "Why are there tides?"}]


@pytest.fixture(scope="module")
def server() -> Iterator[WireServer]:
    # Each test plays its own session (a fresh copy of this script).
    with serve([TOOL_TURN, TEXT_TURN]) as running:
        yield running


@pytest.fixture
def client(openai: ModuleType) -> Callable[..., Any]:
    def make(server: WireServer, session: str, **options: object) -> Any:
        """A client of ``session``; close it (``with``) so no socket is left open."""
        url = server.base_url("openai", session)
        return openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0, **options)

    return make


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_chat_completions_reconstruct_the_script(
    server: WireServer, client: Callable[..., Any], stream: bool
) -> None:
    session = f"chat-{stream}"
    with client(server, session) as c:
        got, finish, text, last = _chat_twice(c, stream)
    assert got == [("search", CALL_ARGS)]
    assert finish == "tool_calls"
    assert (text, last) == (TEXT, "stop")
    server.assert_consumed(session)


def _chat_twice(c: Any, stream: bool) -> tuple[object, object, object, object]:
    if stream:
        chunks = list(
            c.chat.completions.create(
                model="gpt-4o-mini", messages=HI, tools=CHAT_TOOLS, stream=True
            )
        )
        calls: dict[int, dict[str, str]] = {}
        for chunk in chunks:
            for delta in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
                entry = calls.setdefault(delta.index, {"name": "", "arguments": ""})
                entry["name"] += delta.function.name or ""
                entry["arguments"] += delta.function.arguments or ""
        finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1]
        got = [(e["name"], json.loads(e["arguments"])) for e in calls.values()]
        texts = list(c.chat.completions.create(model="gpt-4o-mini", messages=HI, stream=True))
        text = "".join(ch.choices[0].delta.content or "" for ch in texts if ch.choices)
        pieces = sum(1 for ch in texts if ch.choices and ch.choices[0].delta.content)
        assert pieces > 1  # really streamed, piece by piece
        last = [ch.choices[0].finish_reason for ch in texts if ch.choices][-1]
    else:
        reply = c.chat.completions.create(model="gpt-4o-mini", messages=HI, tools=CHAT_TOOLS)
        message = reply.choices[0].message
        got = [(t.function.name, json.loads(t.function.arguments)) for t in message.tool_calls]
        finish = reply.choices[0].finish_reason
        assert reply.usage is not None and reply.usage.prompt_tokens == 11
        second = c.chat.completions.create(model="gpt-4o-mini", messages=HI)
        text, last = second.choices[0].message.content, second.choices[0].finish_reason
    return got, finish, text, last


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_responses_reconstruct_the_script(
    server: WireServer, client: Callable[..., Any], stream: bool
) -> None:
    session = f"responses-{stream}"
    with client(server, session) as c:
        first, second = _respond_twice(c, stream)
    calls = [(i.name, json.loads(i.arguments)) for i in first.output if i.type == "function_call"]
    reasoning = [i for i in first.output if i.type == "reasoning"]
    assert calls == [("search", CALL_ARGS)]
    assert reasoning[0].summary[0].text == "I should search first."
    assert (first.status, second.status) == ("completed", "completed")
    assert second.output_text == TEXT
    server.assert_consumed(session)


def _respond_twice(c: Any, stream: bool) -> tuple[object, object]:
    if stream:
        with c.responses.stream(model="gpt-5-mini", input="tides?", tools=RESPONSES_TOOLS) as s:
            first = s.get_final_response()
        with c.responses.stream(model="gpt-5-mini", input="tides?") as s:
            deltas = [e.delta for e in s if e.type == "response.output_text.delta"]
            second = s.get_final_response()
        assert "".join(deltas) == TEXT and len(deltas) > 1
    else:
        first = c.responses.create(model="gpt-5-mini", input="tides?", tools=RESPONSES_TOOLS)
        second = c.responses.create(model="gpt-5-mini", input="tides?")
    return first, second


def test_a_429_is_a_rate_limit_error_with_its_retry_after(
    openai: ModuleType, client: Callable[..., Any]
) -> None:
    fault = {"status": 429, "retry_after": 7, "retry_after_ms": 6500}
    script = [{"stop_reason": "error", "error": "Rate limit reached", "wire": fault}]
    with serve(script) as s, client(s, "x") as c, pytest.raises(openai.RateLimitError) as caught:
        c.chat.completions.create(model="gpt-4o-mini", messages=HI)
    error = caught.value
    assert error.status_code == 429
    assert error.response.headers["retry-after"] == "7"
    assert error.response.headers["retry-after-ms"] == "6500"
    assert error.code == "rate_limit_exceeded"
    assert "Rate limit reached" in error.message


def test_the_sdk_retries_after_the_delay_the_server_asks_for(openai: ModuleType) -> None:
    # retry-after-ms is what the SDK obeys: it waits 300 ms, retries, gets the next turn.
    fault = {"status": 429, "retry_after_ms": 300}
    script = [{"stop_reason": "error", "error": "slow down", "wire": fault}, TEXT_TURN]
    with serve(script) as s:
        with openai.OpenAI(base_url=s.base_url("openai"), api_key="k", max_retries=1) as c:
            start = time.perf_counter()
            reply = c.chat.completions.create(model="gpt-4o-mini", messages=HI)
            waited = time.perf_counter() - start
        s.assert_consumed()
    assert reply.choices[0].message.content == TEXT
    assert 0.25 < waited < 3


@pytest.mark.parametrize(
    ("status", "error_type"),
    [(500, "InternalServerError"), (503, "InternalServerError"), (400, "BadRequestError")],
)
def test_http_errors_arrive_as_the_sdks_types(
    openai: ModuleType, client: Callable[..., Any], status: int, error_type: str
) -> None:
    script = [{"stop_reason": "error", "error": "scripted failure", "wire": {"status": status}}]
    expected = pytest.raises(getattr(openai, error_type))
    with serve(script) as s, client(s, "x") as c, expected as caught:
        c.responses.create(model="gpt-5-mini", input="hi")
    assert caught.value.status_code == status
    assert "scripted failure" in caught.value.message


def test_an_in_stream_error_is_raised_by_the_stream(
    openai: ModuleType, client: Callable[..., Any]
) -> None:
    script = [{"text": TEXT, "stop_reason": "error", "error": "overloaded mid-reply"}]
    with serve(script) as s, client(s, "x") as c:
        stream = c.chat.completions.create(model="gpt-4o-mini", messages=HI, stream=True)
        with pytest.raises(openai.APIError, match="overloaded mid-reply"):
            for _ in stream:
                pass


@pytest.mark.parametrize("wire", [{"cut_after": 3}, {"cut_after": 0}], ids=["mid-way", "at-once"])
def test_a_cut_stream_is_a_connection_error(
    openai: ModuleType, client: Callable[..., Any], wire: dict[str, int]
) -> None:
    got = []
    with serve([{"text": TEXT, "wire": wire}]) as s, client(s, "x") as c:
        stream = c.chat.completions.create(model="gpt-4o-mini", messages=HI, stream=True)
        with pytest.raises(openai.APIConnectionError):
            for chunk in stream:
                got.append(chunk)
    assert len(got) == max(0, wire["cut_after"])


def test_a_corrupt_chunk_fails_the_parse(client: Callable[..., Any]) -> None:
    with serve([{"text": TEXT, "wire": {"corrupt_chunk": 2}}]) as s, client(s, "x") as c:
        stream = c.chat.completions.create(model="gpt-4o-mini", messages=HI, stream=True)
        with pytest.raises(json.JSONDecodeError):
            list(stream)


def test_a_hang_holds_the_connection_until_the_client_times_out(
    openai: ModuleType, client: Callable[..., Any]
) -> None:
    hang = {"text": TEXT, "fault": "hang"}
    with serve([hang, hang]) as s, client(s, "x", timeout=0.5) as c:
        start = time.perf_counter()
        with pytest.raises(openai.APITimeoutError):
            c.chat.completions.create(model="gpt-4o-mini", messages=HI)
        assert 0.4 < time.perf_counter() - start < 3
        streamed = c.chat.completions.create(model="gpt-4o-mini", messages=HI, stream=True)
        with pytest.raises(openai.APITimeoutError):
            list(streamed)  # the body arrives, then nothing


def test_latency_is_real_time_before_the_first_byte_and_between_chunks(
    client: Callable[..., Any],
) -> None:
    script = [{"text": "a" * 24 * 4, "latency": 0.3, "wire": {"interval": 0.1}}]
    with serve(script) as s, client(s, "x") as c:
        start = time.perf_counter()
        stream = c.chat.completions.create(model="gpt-4o-mini", messages=HI, stream=True)
        times = [time.perf_counter() - start for ch in stream if ch.choices]
    assert times[0] >= 0.29
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 0.08
    assert times[-1] >= 0.3 + 0.1 * (len(times) - 1) - 0.05


def test_models_list_in_openais_shape(server: WireServer, client: Callable[..., Any]) -> None:
    with client(server, "models") as c:
        assert [m.id for m in c.models.list()] == ["scripted"]
