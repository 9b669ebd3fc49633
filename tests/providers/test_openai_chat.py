"""OpenAI Chat Completions: the request body, sent on every call."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from openprogram.providers import Context, StreamOptions
from openprogram.providers.openai_chat import OpenAIChatProvider
from openprogram.tools._tool import ToolSpec
from openprogram.types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

WEATHER = ToolSpec("get_weather", "Get weather", {"type": "object", "properties": {}})


def _context() -> Context:
    return Context(
        "Be brief.",
        [
            UserMessage([TextContent("Look:"), ImageContent("AAAA", "image/png")]),
            AssistantMessage(
                [
                    ThinkingContent("hmm", signature="sig"),
                    TextContent("Checking."),
                    ToolCall("call_1", "get_weather", {"city": "Paris"}),
                ],
                stop_reason="toolUse",
            ),
            ToolResultMessage("call_1", "get_weather", [TextContent("boom")], is_error=True),
            AssistantMessage([ToolCall("call_2", "get_weather", {})], stop_reason="aborted"),
            ToolResultMessage("call_2", "get_weather", [TextContent("Skipped")], is_error=True),
        ],
        [WEATHER],
    )


def _body(kit: Any, options: StreamOptions, **provider_options: Any) -> dict[str, Any]:
    run = kit.run(
        lambda c: OpenAIChatProvider("gpt-4o-mini", api_key="k-123", client=c, **provider_options),
        lambda r: httpx2.Response(500, json={"error": {"message": "x"}}),
        _context(),
        options,
    )
    request = run.requests[0]
    assert str(request.url) == "https://api.openai.com/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer k-123"
    return run.body  # type: ignore[no-any-return]


def test_request_body(kit: Any) -> None:
    body = _body(
        kit,
        StreamOptions(
            tool_choice={"type": "function", "name": "get_weather"}, parallel_tool_calls=False
        ),
        max_tokens=99,
    )
    assert body["model"] == "gpt-4o-mini"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 99
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "boom"},
    ]  # the aborted reply and its result are left out
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Get weather",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["parallel_tool_calls"] is False


def test_tool_choice_sent_on_every_call_and_parallel_default_left_out(kit: Any) -> None:
    for choice in ("auto", "required", "none"):
        body = _body(kit, StreamOptions(tool_choice=choice))
        assert body["tool_choice"] == choice
        assert "parallel_tool_calls" not in body


def test_no_tools_no_tool_choice(kit: Any) -> None:
    run = kit.run(
        lambda c: OpenAIChatProvider("m", api_key="k", client=c, stream=False),
        lambda r: httpx2.Response(
            200,
            json={
                "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1},
            },
        ),
        options=StreamOptions(tool_choice="required"),
    )
    assert "tools" not in run.body and "tool_choice" not in run.body
    assert run.body["stream"] is False and "stream_options" not in run.body
    assert [e.type for e in run.events] == ["start", "text_start", "text_delta", "text_end", "done"]
    assert run.message.text == "hi" and run.message.usage.input == 3


def test_streamed_tool_call_events(kit: Any) -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {json.dumps({'choices': [choice]})}\n\n".encode()

    def call(**fields: Any) -> dict[str, Any]:
        return {"tool_calls": [{"index": 0, **fields}]}

    chunks = [
        chunk(call(id="c1", function={"name": "f", "arguments": ""})),
        chunk(call(function={"arguments": '{"a":'})),
        chunk(call(function={"arguments": "1}"})),
        chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]
    run = kit.run(
        lambda c: OpenAIChatProvider("m", api_key="k", client=c),
        lambda r: kit.response(chunks, content_type="text/event-stream"),
    )
    types = [e.type for e in run.events]
    assert types == [
        "start",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    assert [e.delta for e in run.events if e.type == "toolcall_delta"] == ['{"a":', "1}"]
    assert run.message.tool_calls[0].arguments == {"a": 1}
    assert run.message.stop_reason == "toolUse"
