"""A 2xx answer that holds no reply is an error naming what was missing, on every adapter
(issue 11, item 6). Before, OpenAI Chat and Anthropic called ``{}`` a successful empty
reply, and so ``exec`` returned ``''``."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

MISSING = {
    "openai-chat": "'choices'",
    "openai-responses": "'output'",
    "anthropic": "'content'",
    "gemini": "'candidates'",
    "bedrock": "'output'",
}

# Error bodies in each API's shape, as a proxy or a misrouted request might send with 200.
FOREIGN_ERRORS = {
    "anthropic": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    "openai": {"error": {"message": "Rate limit reached", "type": "requests", "code": "429"}},
    "gemini": {
        "error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}
    },
    "bedrock": {"message": "Too many requests, please wait before trying again."},
}


def _run(kit: Any, api: str, body: Any, *, stream: bool) -> Any:
    return kit.run(
        lambda c: kit.provider(api, c, stream=stream),
        lambda r: httpx2.Response(200, json=body),
    )


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_an_empty_object_is_an_error_naming_what_is_missing(
    kit: Any, each_api: str, stream: bool
) -> None:
    run = _run(kit, each_api, {}, stream=stream)
    assert [e.type for e in run.events] == ["start", "error"]
    assert run.message.stop_reason == "error"
    text = run.message.error_message or ""
    assert MISSING[each_api] in text, text
    assert "HTTP 200" in text or "response" in text


@pytest.mark.parametrize("shape", list(FOREIGN_ERRORS))
def test_an_error_body_in_any_apis_shape_is_an_error_quoting_it(
    kit: Any, each_api: str, shape: str
) -> None:
    body = FOREIGN_ERRORS[shape]
    run = _run(kit, each_api, body, stream=False)
    assert [e.type for e in run.events] == ["start", "error"]
    assert run.message.stop_reason == "error"
    error = body.get("error", body)
    assert error["message"] in (run.message.error_message or "")


def test_a_chat_stream_without_any_choice_is_an_error(kit: Any) -> None:
    body = b'data: {}\n\ndata: {"id": "x", "object": "chat.completion.chunk"}\n\ndata: [DONE]\n\n'
    run = kit.run(
        lambda c: kit.provider("openai-chat", c),
        lambda r: kit.response([body], content_type="text/event-stream"),
    )
    assert run.message.stop_reason == "error"
    assert "'choices'" in (run.message.error_message or "")


def test_a_real_empty_reply_is_still_a_reply(kit: Any) -> None:
    """What the check must not catch: a well-formed reply whose text happens to be empty."""
    reply = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}
        ]
    }
    run = _run(kit, "openai-chat", reply, stream=False)
    assert run.events[-1].type == "done" and run.message.text == ""
    anthropic = {"type": "message", "role": "assistant", "content": [], "stop_reason": "end_turn"}
    run = _run(kit, "anthropic", anthropic, stream=False)
    assert run.events[-1].type == "done" and run.message.text == ""
