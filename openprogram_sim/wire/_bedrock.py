"""Bedrock Converse: ``/converse`` (JSON) and ``/converse-stream`` (AWS event-stream)."""

from __future__ import annotations

from typing import Any

from openprogram.providers.eventstream import encode_message
from openprogram.types import Usage
from openprogram_sim.wire._errors import error_kind
from openprogram_sim.wire._plan import (
    EVENT_STREAM,
    JSON_TYPE,
    Plan,
    WireResponse,
    cut_short,
    json_response,
    json_text,
    not_object,
    signature,
)

__all__ = ["encode_bedrock"]


_BEDROCK_STOP = {"stop": "end_turn", "length": "max_tokens", "toolUse": "tool_use"}
_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123"


def _bedrock_usage(u: Usage) -> dict[str, Any]:
    usage = {
        "inputTokens": u.input,
        "outputTokens": u.output,
        "totalTokens": u.input + u.output + u.cache_read + u.cache_write,
    }
    if u.cache_read:
        usage["cacheReadInputTokens"] = u.cache_read
    if u.cache_write:
        usage["cacheWriteInputTokens"] = u.cache_write
    return usage


def _frame(event: str, payload: dict[str, Any], serial: int) -> bytes:
    # Real events carry a random-length "p" padding field; a deterministic one here.
    padded = {**payload, "p": _PADDING[: 1 + serial % len(_PADDING)]}
    headers = {
        ":event-type": event,
        ":content-type": JSON_TYPE,
        ":message-type": "event",
    }
    return encode_message(headers, json_text(padded).encode())


def encode_bedrock(plan: Plan, *, stream: bool) -> WireResponse:
    """``/converse-stream``: binary AWS event-stream frames (``messageStart``, per block
    ``contentBlockStart`` for tool use only, ``contentBlockDelta`` pieces,
    ``contentBlockStop``, then ``messageStop`` and ``metadata``); an in-stream failure is an
    exception frame. ``/converse``: one JSON body."""
    if not stream:
        return _bedrock_json(plan)
    frames: list[bytes] = []

    def add(event: str, **payload: Any) -> None:
        frames.append(_frame(event, payload, len(frames)))

    add("messageStart", role="assistant")
    index = 0
    if plan.thinking:
        for piece in plan.thinking:
            add(
                "contentBlockDelta",
                contentBlockIndex=index,
                delta={"reasoningContent": {"text": piece}},
            )
        signed = {"reasoningContent": {"signature": signature(plan)}}
        add("contentBlockDelta", contentBlockIndex=index, delta=signed)
        add("contentBlockStop", contentBlockIndex=index)
        index += 1
    if plan.text:
        for piece in plan.text:  # text blocks have no contentBlockStart on this API
            add("contentBlockDelta", contentBlockIndex=index, delta={"text": piece})
        add("contentBlockStop", contentBlockIndex=index)
        index += 1
    for call in plan.calls:
        start = {"toolUse": {"toolUseId": call.id, "name": call.name}}
        add("contentBlockStart", contentBlockIndex=index, start=start)
        for piece in call.pieces:
            add("contentBlockDelta", contentBlockIndex=index, delta={"toolUse": {"input": piece}})
        add("contentBlockStop", contentBlockIndex=index)
        index += 1
    if plan.error is not None:
        _, exception = error_kind("bedrock", plan.error_status)
        headers = {
            ":exception-type": exception,
            ":content-type": JSON_TYPE,
            ":message-type": "exception",
        }
        frames.append(encode_message(headers, json_text({"message": plan.error}).encode()))
    elif not plan.truncate:
        add("messageStop", stopReason=_BEDROCK_STOP[plan.stop])
        add("metadata", usage=_bedrock_usage(plan.usage), metrics={"latencyMs": 0})
    return WireResponse(200, {"content-type": EVENT_STREAM}, frames)


def _bedrock_json(plan: Plan) -> WireResponse:
    if any(c.value is None for c in plan.calls):
        raise not_object("bedrock", "toolUse.input", stream=False)
    content: list[dict[str, Any]] = []
    if plan.thinking:
        text = {"text": plan.thinking_text, "signature": signature(plan)}
        content.append({"reasoningContent": {"reasoningText": text}})
    if plan.text:
        content.append({"text": plan.full_text})
    for call in plan.calls:
        tool = {"toolUseId": call.id, "name": call.name, "input": call.value}
        content.append({"toolUse": tool})
    body = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": _BEDROCK_STOP[plan.stop],
        "usage": _bedrock_usage(plan.usage),
        "metrics": {"latencyMs": 0},
    }
    response = json_response(200, body)
    return cut_short(response) if plan.truncate else response
