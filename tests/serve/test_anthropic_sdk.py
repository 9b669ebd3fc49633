"""The official ``anthropic`` client against the wire server, streaming and not."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import httpx2
import pytest
from serve_support import CALL_ARGS, SEARCH_SCHEMA, TEXT, turns

from openprogram_sim.wire import WireServer, serve

# `anthropic` is the fixture (tests/conftest.py) that imports the SDK when a test asks for it.

TOOLS = [{"name": "search", "description": "Search.", "input_schema": SEARCH_SCHEMA}]
HI = [{"role": "user", "content": "Why are there tides?"}]


@pytest.fixture(scope="module")
def server() -> Iterator[WireServer]:
    with serve(turns(1)) as running:
        yield running


@pytest.fixture
def client(anthropic: ModuleType) -> Callable[..., Any]:
    def make(server: WireServer, session: str | None = None) -> Any:
        url = server.base_url("anthropic", session)
        return anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0)

    return make


def _ask(c: Any, stream: bool, **extra: object) -> Any:
    options = {"model": "claude-scripted", "max_tokens": 256, "messages": HI, **extra}
    if not stream:
        return c.messages.create(**options)
    with c.messages.stream(**options) as s:
        return s.get_final_message()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_messages_reconstruct_the_script(
    server: WireServer, client: Callable[..., Any], stream: bool
) -> None:
    session = f"anthropic-{stream}"
    with client(server, session) as c:
        first = _ask(c, stream, tools=TOOLS)
        second = _ask(c, stream)
    assert [b.type for b in first.content] == ["thinking", "tool_use"]
    assert first.content[0].thinking == "I should search first."
    use = first.content[1]
    assert (use.name, use.input) == ("search", CALL_ARGS)
    assert first.stop_reason == "tool_use"
    assert (first.usage.input_tokens, first.usage.output_tokens) == (11, 7)
    assert [b.text for b in second.content] == [TEXT]
    assert second.stop_reason == "end_turn"
    server.assert_consumed(session)


def test_529_is_the_overloaded_error(anthropic: ModuleType, client: Callable[..., Any]) -> None:
    script = [{"stop_reason": "error", "error": "Overloaded", "wire": {"status": 529}}]
    with serve(script) as s, client(s) as c, pytest.raises(anthropic.OverloadedError) as caught:
        _ask(c, False)
    assert caught.value.status_code == 529
    assert caught.value.body["error"]["type"] == "overloaded_error"


def test_429_is_a_rate_limit_error_with_its_retry_after(
    anthropic: ModuleType, client: Callable[..., Any]
) -> None:
    script = [{"stop_reason": "error", "error": "slow", "wire": {"status": 429, "retry_after": 4}}]
    with serve(script) as s, client(s) as c, pytest.raises(anthropic.RateLimitError) as caught:
        _ask(c, True)
    assert caught.value.response.headers["retry-after"] == "4"


def test_an_in_stream_error_event_is_raised(
    anthropic: ModuleType, client: Callable[..., Any]
) -> None:
    script = [{"text": TEXT, "stop_reason": "error", "error": "Overloaded mid-reply"}]
    with serve(script) as s, client(s) as c, pytest.raises(anthropic.APIStatusError) as caught:
        _ask(c, True)
    assert "Overloaded mid-reply" in str(caught.value)


def _version(module: ModuleType) -> tuple[int, ...]:
    return tuple(int(part) for part in module.__version__.split(".")[:2])


def test_a_stream_cut_after_a_chunk_is_a_broken_transfer(
    anthropic: ModuleType, client: Callable[..., Any]
) -> None:
    # Before anthropic 2.17 the SDK let the transport's error through once the stream had
    # begun; from 2.17 it raises its own connection error, the transport's error its cause.
    cut = [{"text": TEXT, "wire": {"cut_after": 4}}]
    wraps = _version(anthropic) >= (2, 17)
    raised = anthropic.APIConnectionError if wraps else httpx2.RemoteProtocolError
    with serve(cut) as s, client(s) as c, pytest.raises(raised) as caught:
        _ask(c, True)
    transport = caught.value.__cause__ if wraps else caught.value
    assert isinstance(transport, httpx2.RemoteProtocolError)
    assert "incomplete chunked read" in str(transport)
    if wraps:
        assert str(caught.value) == f"Connection to {s.host}:{s.port} failed: {transport}"


def test_models_list_in_anthropics_shape(server: WireServer, client: Callable[..., Any]) -> None:
    with client(server, "models") as c:
        assert [m.id for m in c.models.list()] == ["scripted"]
