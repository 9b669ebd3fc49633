"""Anthropic, Gemini and Bedrock reject an empty text block. An empty text in a user message
(a steering or follow-up message of "", a text beside an image) is left out; a user message
with nothing else is not sent; an empty last message fails before anything is sent, since
leaving it out would turn the model's previous reply into a prefill to continue."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from openprogram.providers.base import Context, StreamOptions
from openprogram.types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    UserMessage,
)

STRICT = ("anthropic", "gemini", "bedrock")
PIXEL = "iVBORw0KGgo="


def _ok(kit: Any, api: str) -> httpx2.Response:
    if api == "anthropic":
        body = kit.stream_lines(
            api,
            ("message_start", json.dumps({"message": {"usage": {}}})),
            ("message_delta", json.dumps({"delta": {"stop_reason": "end_turn"}, "usage": {}})),
            ("message_stop", "{}"),
        )
    elif api == "gemini":
        body = kit.stream_lines(
            api,
            (
                "",
                json.dumps(
                    {
                        "candidates": [
                            {"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}
                        ]
                    }
                ),
            ),
        )
    else:
        body = kit.stream_lines(
            api,
            ("messageStop", json.dumps({"stopReason": "end_turn"})),
            ("metadata", json.dumps({"usage": {}})),
        )
    return httpx2.Response(200, headers={"content-type": kit.STREAM_TYPES[api]}, content=body)


def _user_texts(api: str, body: dict[str, Any]) -> list[list[Any]]:
    """Each user turn's blocks, as (kind, text) pairs, in the API's own shape."""
    turns = body["contents"] if api == "gemini" else body["messages"]
    out = []
    for turn in turns:
        if turn["role"] != "user":
            continue
        blocks = turn["parts"] if api == "gemini" else turn["content"]
        out.append(
            [
                ("text", b["text"]) if "text" in b else ("image", None)
                for b in blocks
                if b.get("type", "text" if "text" in b else "image") in ("text", "image")
            ]
        )
    return out


def _run(kit: Any, api: str, messages: list[Any]) -> Any:
    context = Context("", messages, [])
    return kit.run(
        lambda c: kit.provider(api, c), lambda r: _ok(kit, api), context, StreamOptions()
    )


@pytest.mark.parametrize("api", STRICT)
def test_an_empty_message_before_the_last_is_not_sent(kit: Any, api: str) -> None:
    run = _run(
        kit,
        api,
        [
            UserMessage.of("hi"),
            AssistantMessage([TextContent("ok")]),
            UserMessage.of(""),
            UserMessage.of("go on"),
        ],
    )
    assert run.events[-1].type == "done"
    assert _user_texts(api, run.body) == [[("text", "hi")], [("text", "go on")]]


@pytest.mark.parametrize("api", STRICT)
def test_an_empty_text_beside_an_image_is_left_out(kit: Any, api: str) -> None:
    image = UserMessage([ImageContent(PIXEL, "image/png"), TextContent("")])
    run = _run(kit, api, [image])
    assert run.events[-1].type == "done"
    assert _user_texts(api, run.body) == [[("image", None)]]


@pytest.mark.parametrize("api", STRICT)
def test_an_empty_last_message_fails_before_sending(kit: Any, api: str) -> None:
    run = _run(
        kit, api, [UserMessage.of("hi"), AssistantMessage([TextContent("ok")]), UserMessage.of("")]
    )
    assert run.requests == []  # nothing reached the API
    error = run.message
    assert error.stop_reason == "error"
    assert error.error_details.reason == "invalid_request"
    assert "the last user message is empty" in error.error_message
    assert "send some text" in error.error_message


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses"])
def test_the_openai_apis_take_an_empty_text_as_it_is(kit: Any, api: str) -> None:
    response = kit.response(
        [kit.stream_lines(api, *_openai_done(api))], content_type="text/event-stream"
    )
    context = Context("", [UserMessage.of("")], [])
    run = kit.run(lambda c: kit.provider(api, c), lambda r: response, context, StreamOptions())
    assert run.requests, "the request was sent"
    text = json.dumps(run.body)
    assert '"content": ""' in text or '"text": ""' in text


def _openai_done(api: str) -> list[tuple[str, str]]:
    if api == "openai-chat":
        choice = {"index": 0, "delta": {}, "finish_reason": "stop"}
        return [("", json.dumps({"choices": [choice]})), ("", "[DONE]")]
    return [("response.completed", json.dumps({"response": {"status": "completed"}}))]
