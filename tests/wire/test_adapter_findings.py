"""Adapter behaviour the wire simulator turned up, pinned so it stays fixed."""

from __future__ import annotations

import asyncio
import json

from wire_support import make_provider, one_call

from openprogram_sim.wire import ScriptedWire, WireResponse


def test_openai_chat_json_calls_without_ids_stay_separate() -> None:
    """A non-streamed body's calls without ids (some compatible servers) stay separate."""
    calls = [
        {"type": "function", "function": {"name": "a", "arguments": '{"x":1}'}},
        {"type": "function", "function": {"name": "b", "arguments": "{}"}},
    ]
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "compat",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": calls},
                "finish_reason": "tool_calls",
            }
        ],
    }
    response = WireResponse(200, {"content-type": "application/json"}, [json.dumps(body).encode()])
    wire = ScriptedWire([response])
    message = asyncio.run(one_call(make_provider("openai-chat", wire, stream=False)))
    assert [(c.name, c.arguments) for c in message.tool_calls] == [("a", {"x": 1}), ("b", {})]
