"""Failure behaviour shared by the SSE adapters, driven through httpx2.MockTransport.

A failed call never raises: HTTP errors, errors inside a 200 stream, a stream cut short and
transport failures all end in one ``error`` event whose message says why; a cancelled call
ends ``aborted``. Keys come from the environment or fail early, and never leak.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest

from openprogram.errors import ConfigurationError
from openprogram.providers import StreamOptions, get_provider
from openprogram.providers.anthropic import AnthropicProvider
from openprogram.providers.openai_chat import OpenAIChatProvider
from openprogram.providers.openai_responses import OpenAIResponsesProvider

SECRET = "test-secret-not-a-real-key-4821"


def _sse(*events: tuple[str | None, dict[str, Any]]) -> bytes:
    out = []
    for name, data in events:
        prefix = f"event: {name}\n" if name else ""
        out.append(f"{prefix}data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


@dataclass(frozen=True)
class Adapter:
    cls: Any
    env: str
    partial: bytes
    """The start of a stream: it produces the text "Hel" and then stops."""
    stream_error: bytes
    """A 200 stream that reports an error."""
    stream_error_text: str


CHAT = Adapter(
    OpenAIChatProvider,
    "OPENAI_API_KEY",
    _sse((None, {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]})),
    _sse((None, {"error": {"message": "The server had an error", "type": "server_error"}})),
    "OpenAI stream error (server_error): The server had an error",
)
RESPONSES = Adapter(
    OpenAIResponsesProvider,
    "OPENAI_API_KEY",
    _sse(
        ("response.created", {"type": "response.created", "response": {"status": "in_progress"}}),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": "Hel",
            },
        ),
    ),
    _sse(("error", {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down"})),
    "OpenAI Responses stream error: (rate_limit_exceeded) Slow down",
)
ANTHROPIC = Adapter(
    AnthropicProvider,
    "ANTHROPIC_API_KEY",
    _sse(
        ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Hel"},
            },
        ),
    ),
    _sse(
        ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}),
        (
            "error",
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ),
    ),
    "Anthropic stream error (overloaded_error): Overloaded",
)
ADAPTERS = {"openai-chat": CHAT, "openai-responses": RESPONSES, "anthropic": ANTHROPIC}


@pytest.fixture(params=list(ADAPTERS))
def adapter(request: pytest.FixtureRequest) -> Adapter:
    return ADAPTERS[request.param]


def _factory(adapter: Adapter, **options: Any) -> Any:
    return lambda client: adapter.cls("m-1", api_key=SECRET, client=client, **options)


def _sse_response(kit: Any, *chunks: bytes) -> httpx2.Response:
    return kit.response(list(chunks), content_type="text/event-stream")


@pytest.mark.parametrize(
    ("status", "headers", "body", "expected"),
    [
        (
            400,
            {},
            {"error": {"message": "Invalid 'temperature'", "type": "invalid_request_error"}},
            "API error: HTTP 400 (invalid_request_error): Invalid 'temperature'",
        ),
        (
            429,
            {"retry-after": "17"},
            {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}},
            "HTTP 429 (rate_limit_exceeded): Rate limit reached (retry-after: 17)",
        ),
        (500, {}, "<html>upstream crashed</html>", "HTTP 500: <html>upstream crashed</html>"),
    ],
)
def test_http_error_becomes_error_event(
    adapter: Adapter, kit: Any, status: int, headers: dict[str, str], body: Any, expected: str
) -> None:
    content = body if isinstance(body, str) else json.dumps(body)

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers=headers, content=content.encode())

    run = kit.run(_factory(adapter), handler)
    assert [e.type for e in run.events] == ["start", "error"]
    assert run.events[-1].reason == "error"
    assert run.message.stop_reason == "error"
    assert expected in (run.message.error_message or "")


def test_error_inside_a_200_stream(adapter: Adapter, kit: Any) -> None:
    run = kit.run(_factory(adapter), lambda r: _sse_response(kit, adapter.stream_error))
    assert run.events[-1].type == "error"
    assert run.message.stop_reason == "error"
    assert run.message.error_message == adapter.stream_error_text


def test_stream_ending_early_is_an_error(adapter: Adapter, kit: Any) -> None:
    run = kit.run(_factory(adapter), lambda r: _sse_response(kit, adapter.partial))
    types = [e.type for e in run.events]
    assert types[0] == "start" and types[-1] == "error"
    assert "text_delta" in types
    assert run.message.text == "Hel"  # what arrived is kept
    assert "stream ended before" in (run.message.error_message or "")


def test_transport_failure_is_an_error_event(adapter: Adapter, kit: Any) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused")

    run = kit.run(_factory(adapter), handler)
    assert [e.type for e in run.events] == ["start", "error"]
    assert "request failed: ConnectError: connection refused" in (run.message.error_message or "")


def test_cancel_mid_stream_aborts(adapter: Adapter, kit: Any) -> None:
    released = asyncio.Event()  # never set: the server stalls after the first chunk

    async def body() -> AsyncIterator[bytes]:
        yield adapter.partial
        await released.wait()
        yield b""

    async def go() -> list[Any]:
        cancel = asyncio.Event()
        transport = httpx2.MockTransport(
            lambda r: httpx2.Response(
                200, headers={"content-type": "text/event-stream"}, content=body()
            )
        )
        async with httpx2.AsyncClient(transport=transport) as client:
            provider = adapter.cls("m-1", api_key=SECRET, client=client)
            events = []
            async for event in provider.stream(kit.simple_context(), StreamOptions(cancel=cancel)):
                events.append(event)
                if event.type == "text_delta":
                    cancel.set()
            return events

    events = asyncio.run(asyncio.wait_for(go(), timeout=5))
    assert events[-1].type == "error"
    assert events[-1].reason == "aborted"
    assert events[-1].error.stop_reason == "aborted"
    assert events[-1].error.text == "Hel"


def test_cancel_before_the_response_arrives(adapter: Adapter, kit: Any) -> None:
    cancel = asyncio.Event()
    cancel.set()
    run = kit.run(
        _factory(adapter),
        lambda r: _sse_response(kit, adapter.partial),
        options=StreamOptions(cancel=cancel),
    )
    assert [e.type for e in run.events] == ["start", "error"]
    assert run.message.stop_reason == "aborted"


def test_missing_key_names_the_variable(adapter: Adapter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(adapter.env, raising=False)
    with pytest.raises(ConfigurationError, match=adapter.env):
        adapter.cls("m-1")


def test_key_from_environment_and_custom_base_url(
    adapter: Adapter, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(adapter.env, SECRET)
    run = kit.run(
        lambda client: adapter.cls("m-1", client=client, base_url="http://local.test/v9/"),
        lambda r: httpx2.Response(500, json={"error": {"message": "x"}}),
    )
    request = run.requests[0]
    assert str(request.url).startswith("http://local.test/v9/")
    assert SECRET in (
        request.headers.get("authorization", "") + request.headers.get("x-api-key", "")
    )


def test_custom_base_url_needs_no_key(
    adapter: Adapter, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(adapter.env, raising=False)
    run = kit.run(
        lambda client: adapter.cls("m-1", client=client, base_url="http://sim.test"),
        lambda r: httpx2.Response(500, json={"error": {"message": "x"}}),
    )
    headers = run.requests[0].headers
    assert "authorization" not in headers and "x-api-key" not in headers


def test_key_never_leaks(adapter: Adapter, kit: Any) -> None:
    body = {
        "error": {"message": f"Incorrect API key provided: {SECRET}.", "code": "invalid_api_key"}
    }
    run = kit.run(_factory(adapter), lambda r: httpx2.Response(401, json=body))
    assert SECRET not in (run.message.error_message or "")
    assert "HTTP 401" in (run.message.error_message or "")
    provider = adapter.cls("m-1", api_key=SECRET)
    assert SECRET not in repr(provider)


@pytest.mark.parametrize(
    ("model", "env"),
    [
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
        ("openai-chat:gpt-4o-mini", "OPENAI_API_KEY"),
        ("openai-responses:gpt-5-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ],
)
def test_registry_resolves_and_fails_early(
    model: str, env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(env, raising=False)
    with pytest.raises(ConfigurationError, match=env):
        get_provider(model)
    monkeypatch.setenv(env, SECRET)
    provider = get_provider(model)
    assert provider.model_id == model.split(":", 1)[1]  # type: ignore[attr-defined]


def test_tool_calls_left_unanswered_by_an_abort_are_not_sent() -> None:
    """After an abort mid-batch the history holds calls that never ran; every adapter
    leaves them out of the next request (the APIs reject unanswered calls)."""
    from openprogram.providers._http import sendable_messages
    from openprogram.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage
    from openprogram.types import UserMessage as User

    history = [
        User.of("go"),
        AssistantMessage(
            [TextContent("on it"), ToolCall("c1", "first", {}), ToolCall("c2", "second", {})],
            stop_reason="toolUse",
        ),
        ToolResultMessage("c1", "first", [TextContent("done")]),
        AssistantMessage([ToolCall("c3", "third", {})], stop_reason="toolUse"),
        User.of("again"),
    ]
    sent = list(sendable_messages(history))
    assert [m.role for m in sent] == ["user", "assistant", "toolResult", "user"]
    assert [getattr(b, "id", None) for b in sent[1].content] == [None, "c1"]
    assert len(history[1].content) == 3  # the history itself is untouched


@pytest.mark.parametrize(
    "api", ["openai-chat", "openai-responses", "anthropic", "gemini", "bedrock"]
)
def test_a_skipped_result_is_sent_like_any_other_error_result(api: str) -> None:
    """``ToolResultMessage.skipped`` is for the application: the model sees the error text,
    and the request is the one the same result without the flag would make."""
    from openprogram.providers import Context
    from openprogram.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage
    from openprogram.types import UserMessage as User

    def body(skipped: bool) -> dict[str, Any]:
        history = [
            User.of("go"),
            AssistantMessage([ToolCall("c1", "first", {})], stop_reason="toolUse"),
            ToolResultMessage(
                "c1", "first", [TextContent("Skipped")], is_error=True, skipped=skipped
            ),
        ]
        provider = get_provider(f"{api}:m-1", base_url="http://sim.invalid")
        built: dict[str, Any] = provider.request_body(  # type: ignore[attr-defined]
            Context("", history, []), StreamOptions()
        )
        return built

    assert body(skipped=True) == body(skipped=False)
    assert "skipped" not in json.dumps(body(skipped=True))
