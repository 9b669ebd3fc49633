"""OpenAI Responses: the request body, and reasoning items carried across turns."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from openprogram.providers import Context, StreamOptions
from openprogram.providers.openai_responses import OpenAIResponsesProvider, parse_response
from openprogram.tools._tool import ToolSpec
from openprogram.types import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

SPEC = ToolSpec("get_capital", "Capital of a country", {"type": "object", "properties": {}})


def _run(kit: Any, context: Context, options: StreamOptions) -> Any:
    return kit.run(
        lambda c: OpenAIResponsesProvider("gpt-5-mini", api_key="k-123", client=c, max_tokens=50),
        lambda r: httpx2.Response(400, json={"error": {"message": "nope", "code": "bad"}}),
        context,
        options,
    )


def test_reasoning_and_calls_round_trip_into_the_next_request(kit: Any) -> None:
    # A reply parsed from the wire, then sent back as history.
    reply = parse_response(
        json.dumps(
            {
                "status": "completed",
                "output": [
                    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"},
                    {
                        "type": "message",
                        "id": "msg_1",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "Let me look."}],
                    },
                    {
                        "type": "function_call",
                        "id": "fc_1",
                        "call_id": "call_1",
                        "name": "get_capital",
                        "arguments": '{"country":"France"}',
                    },
                ],
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
        ),
        content_type="application/json",
    )
    assert reply.stop_reason == "toolUse"
    context = Context(
        "Answer in one word.",
        [
            UserMessage.of("Capital of France?"),
            reply,
            ToolResultMessage("call_1", "get_capital", [TextContent("Paris")]),
        ],
        [SPEC],
    )
    run = _run(kit, context, StreamOptions(tool_choice="auto", parallel_tool_calls=True))
    request = run.requests[0]
    assert str(request.url) == "https://api.openai.com/v1/responses"
    assert request.headers["authorization"] == "Bearer k-123"
    body = run.body
    assert body["instructions"] == "Answer in one word."
    assert body["max_output_tokens"] == 50
    assert body["input"] == [
        {"role": "user", "content": "Capital of France?"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"},
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_capital",
            "arguments": '{"country": "France"}',
            "id": "fc_1",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "Paris"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_capital",
            "description": "Capital of a country",
            "parameters": SPEC.parameters,
            "strict": False,
        }
    ]
    assert body["tool_choice"] == "auto" and body["parallel_tool_calls"] is True
    assert run.message.error_message == "OpenAI Responses API error: HTTP 400 (bad): nope"


def test_forced_function_and_foreign_history(kit: Any) -> None:
    context = Context(
        "",
        [
            UserMessage.of("hi"),
            AssistantMessage([TextContent("Hello!"), ToolCall("x1", "get_capital", "{bad json")]),
            ToolResultMessage("x1", "get_capital", [TextContent("bad arguments")], is_error=True),
        ],
        [SPEC],
    )
    options = StreamOptions(tool_choice={"type": "function", "name": "get_capital"})
    body = _run(kit, context, options).body
    assert "instructions" not in body
    assert body["input"][1:3] == [
        {"role": "assistant", "content": "Hello!"},
        {"type": "function_call", "call_id": "x1", "name": "get_capital", "arguments": "{bad json"},
    ]
    assert body["tool_choice"] == {"type": "function", "name": "get_capital"}
    assert "parallel_tool_calls" not in body


def test_failed_and_incomplete_responses() -> None:
    failed = {
        "type": "response.failed",
        "response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}},
    }
    body = f"event: response.failed\ndata: {json.dumps(failed)}\n\n"
    message = parse_response(body, content_type="text/event-stream")
    assert message.stop_reason == "error"
    assert message.error_message == "OpenAI Responses: response failed: (server_error) boom"
    incomplete = {
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [
            {"type": "message", "id": "msg_1", "content": [{"type": "output_text", "text": "Par"}]}
        ],
    }
    message = parse_response(json.dumps(incomplete), content_type="application/json")
    assert (message.stop_reason, message.text) == ("length", "Par")
