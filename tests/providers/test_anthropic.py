"""Anthropic Messages: the request body and headers."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from openprogram.providers import Context, StreamOptions
from openprogram.providers.anthropic import DEFAULT_MAX_TOKENS, AnthropicProvider
from openprogram.tools._tool import ToolSpec
from openprogram.types import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

SPEC = ToolSpec("get_weather", "Get weather", {"type": "object", "properties": {}})


def _context() -> Context:
    return Context(
        "Be brief.",
        [
            UserMessage.of("Weather in Paris and Rome?"),
            AssistantMessage(
                [
                    ThinkingContent("I should call twice.", signature="sig-1"),
                    ThinkingContent("", signature="opaque", redacted=True),
                    ThinkingContent("foreign thought"),  # no signature: not replayable
                    TextContent("Checking."),
                    ToolCall("toolu_1", "get_weather", {"city": "Paris"}),
                    ToolCall("toolu_2", "get_weather", {"city": "Rome"}),
                ],
                stop_reason="toolUse",
            ),
            ToolResultMessage("toolu_1", "get_weather", [TextContent("Sunny")]),
            ToolResultMessage("toolu_2", "get_weather", [TextContent("down")], is_error=True),
        ],
        [SPEC],
    )


def _run(kit: Any, options: StreamOptions, context: Context | None = None) -> Any:
    return kit.run(
        lambda c: AnthropicProvider("claude-sonnet-4-5", api_key="k-123", client=c),
        lambda r: httpx2.Response(
            529,
            json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ),
        context or _context(),
        options,
    )


def test_request_body_and_headers(kit: Any) -> None:
    run = _run(kit, StreamOptions(tool_choice="required", parallel_tool_calls=False))
    request = run.requests[0]
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == "k-123"
    assert request.headers["anthropic-version"] == "2023-06-01"
    body = run.body
    assert body["system"] == "Be brief."
    assert body["max_tokens"] == DEFAULT_MAX_TOKENS
    assert body["stream"] is True
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I should call twice.", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "get_weather",
                    "input": {"city": "Rome"},
                },
            ],
        },
        {
            "role": "user",  # both results in the one user message that follows the calls
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "Sunny"}],
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "down"}],
                    "is_error": True,
                },
            ],
        },
    ]
    assert body["tools"] == [
        {"name": "get_weather", "description": "Get weather", "input_schema": SPEC.parameters}
    ]
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert (
        run.message.error_message == "Anthropic API error: HTTP 529 (overloaded_error): Overloaded"
    )


def test_tool_choice_shapes(kit: Any) -> None:
    expected = {
        "auto": {"type": "auto"},
        "none": {"type": "none"},
        "required": {"type": "any"},
    }
    for choice, shape in expected.items():
        assert _run(kit, StreamOptions(tool_choice=choice)).body["tool_choice"] == shape
    forced = StreamOptions(tool_choice={"type": "function", "name": "get_weather"})
    assert _run(kit, forced).body["tool_choice"] == {"type": "tool", "name": "get_weather"}


def test_streamed_tool_use_arguments(kit: Any) -> None:
    def delta(piece: str) -> dict[str, Any]:
        inner = {"type": "input_json_delta", "partial_json": piece}
        return {"type": "content_block_delta", "index": 0, "delta": inner}

    tool_use = {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {}}
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": tool_use},
        delta(""),
        delta('{"x": '),
        delta("[1]}"),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 12},
        },
        {"type": "message_stop"},
    ]
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    run = kit.run(
        lambda c: AnthropicProvider("m", api_key="k", client=c),
        lambda r: kit.response([body], content_type="text/event-stream"),
    )
    assert [e.type for e in run.events] == [
        "start",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    call = run.message.tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("toolu_9", "f", {"x": [1]})
    assert run.message.stop_reason == "toolUse"
    assert (run.message.usage.input, run.message.usage.output) == (5, 12)
