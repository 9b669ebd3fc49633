"""Requests the real APIs would reject (issue 11, items 13-15), checked against the
official SDKs' request types."""

from __future__ import annotations

import json
from typing import Any

from openprogram.providers import Context, StreamOptions
from openprogram.providers.anthropic import build_request as anthropic_request
from openprogram.providers.openai_chat import build_request as chat_request
from openprogram.providers.openai_responses import build_request as responses_request
from openprogram.types import (
    AnyMessage,
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

SHOT = ImageContent("iVBORw0KGgo=", "image/png")
SPEC = ToolSpec("screenshot", "Take a screenshot", {"type": "object", "properties": {}})


def _batch(first: list[Any], second: list[Any]) -> list[AnyMessage]:
    return [
        UserMessage.of("Look at both pages."),
        AssistantMessage(
            [ToolCall("call_1", "screenshot", {"page": 1}), ToolCall("call_2", "screenshot", {})],
            stop_reason="toolUse",
        ),
        ToolResultMessage("call_1", "screenshot", first),
        ToolResultMessage("call_2", "screenshot", second),
    ]


def _build(build: Any, history: list[AnyMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    body: dict[str, Any] = build(
        Context("", history, tools), StreamOptions(), model="m", stream=True, max_tokens=None
    )
    return body


# --------------------------------------------------------------------------- item 13


def test_chat_images_of_a_batch_follow_all_its_tool_messages() -> None:
    history = _batch([TextContent("page one"), SHOT], [TextContent("page two"), SHOT])
    history.append(UserMessage.of("And now?"))
    messages = _build(chat_request, history, [SPEC])["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user", "user"]
    assert [m.get("tool_call_id") for m in messages[2:4]] == ["call_1", "call_2"]
    images = messages[4]["content"]
    assert [p["type"] for p in images] == ["text", "image_url", "text", "image_url"]
    assert "call_1" in images[0]["text"] and "call_2" in images[2]["text"]
    assert messages[5]["content"] == "And now?"


def test_chat_images_at_the_end_of_the_history_still_follow_the_batch() -> None:
    messages = _build(chat_request, _batch([SHOT], [TextContent("none")]), [SPEC])["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]


# --------------------------------------------------------------------------- item 14


def test_responses_input_images_carry_detail_auto() -> None:
    history: list[AnyMessage] = [UserMessage([TextContent("What is this?"), SHOT])]
    history += _batch([SHOT], [TextContent("none")])[1:]
    items = _build(responses_request, history, [SPEC])["input"]
    parts = items[0]["content"] + items[3]["output"]
    images = [p for p in parts if p["type"] == "input_image"]
    assert len(images) == 2
    assert all(p["detail"] == "auto" for p in images)


# --------------------------------------------------------------------------- item 15


def _text_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for message in body["messages"]:
        for block in message["content"]:
            blocks.append(block)
            blocks.extend(b for b in block.get("content") or [] if isinstance(b, dict))
    return [b for b in blocks if b.get("type") == "text"]


def test_anthropic_a_tool_that_returned_none_sends_no_empty_text_block() -> None:
    # normalize_result(None) is [TextContent("")]; an image-only result has no text at all.
    body = _build(anthropic_request, _batch([TextContent("")], [TextContent(""), SHOT]), [SPEC])
    assert all(b["text"] for b in _text_blocks(body))
    first, second = body["messages"][2]["content"]
    assert first == {"type": "tool_result", "tool_use_id": "call_1", "is_error": False}
    assert [b["type"] for b in second["content"]] == ["image"]


def test_anthropic_without_tools_past_tool_blocks_are_sent_as_text() -> None:
    """No ``tools`` may be sent with tool_use/tool_result blocks in the history: like the
    Bedrock adapter, the blocks become text saying what was called and what came back."""
    history = _batch([TextContent("page one")], [TextContent("boom")])
    history[3] = ToolResultMessage("call_2", "screenshot", [TextContent("boom")], is_error=True)
    history.append(UserMessage.of("Summarise."))
    body = _build(anthropic_request, history, [])
    assert "tools" not in body and "tool_choice" not in body
    kinds = {b["type"] for m in body["messages"] for b in m["content"]}
    assert kinds == {"text"}
    text = json.dumps(body["messages"])
    assert 'called tool screenshot (id call_1) with {\\"page\\": 1}' in text
    assert "result of tool screenshot (id call_1): page one" in text
    assert "result of tool screenshot (id call_2) (error): boom" in text
    # With tools offered, the same history keeps its tool blocks.
    with_tools = _build(anthropic_request, history, [SPEC])
    assert {b["type"] for b in with_tools["messages"][1]["content"]} == {"tool_use"}
