"""Anthropic Messages: ``POST /v1/messages`` as the API answers it."""

from __future__ import annotations

from typing import Any

from openprogram.types import Usage
from openprogram_sim.wire._errors import error_kind
from openprogram_sim.wire._plan import (
    SSE_UTF8,
    Plan,
    WireResponse,
    cut_short,
    json_response,
    not_object,
    signature,
    sse_event,
)

__all__ = ["encode_anthropic"]


_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "toolUse": "tool_use"}


def _anthropic_usage(u: Usage, *, output: int | None = None) -> dict[str, Any]:
    return {
        "input_tokens": u.input,
        "cache_creation_input_tokens": u.cache_write,
        "cache_read_input_tokens": u.cache_read,
        "output_tokens": u.output if output is None else output,
    }


def _anthropic_blocks(plan: Plan) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if plan.thinking:
        blocks.append(
            {"type": "thinking", "thinking": plan.thinking_text, "signature": signature(plan)}
        )
    if plan.text:
        blocks.append({"type": "text", "text": plan.full_text})
    for call in plan.calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.value})
    return blocks


def encode_anthropic(plan: Plan, *, stream: bool) -> WireResponse:
    """``POST /v1/messages``: ``message_start``, a ``ping``, ``content_block_start`` /
    ``_delta`` / ``_stop`` per block (thinking with its ``signature_delta``, text,
    ``tool_use`` with ``input_json_delta`` pieces), ``message_delta``, ``message_stop``.
    An in-stream failure is ``event: error`` and the connection closes."""
    message: dict[str, Any] = {
        "id": f"msg_wire{plan.seq}",
        "type": "message",
        "role": "assistant",
        "model": plan.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
    }
    usage = plan.usage if plan.error is None else Usage()
    if not stream:
        if any(c.value is None for c in plan.calls):
            raise not_object("anthropic", "tool_use.input", stream=False)
        body = {
            **message,
            "content": _anthropic_blocks(plan),
            "stop_reason": _ANTHROPIC_STOP[plan.stop],
            "usage": _anthropic_usage(usage),
        }
        response = json_response(200, body)
        return cut_short(response) if plan.truncate else response
    chunks: list[bytes] = []

    def add(kind: str, **fields: Any) -> None:
        chunks.append(sse_event({"type": kind, **fields}, kind))

    add(
        "message_start",
        message={**message, "usage": _anthropic_usage(usage, output=min(1, usage.output))},
    )
    add("ping")
    index = 0
    if plan.thinking:
        add(
            "content_block_start",
            index=index,
            content_block={"type": "thinking", "thinking": "", "signature": ""},
        )
        for piece in plan.thinking:
            add(
                "content_block_delta",
                index=index,
                delta={"type": "thinking_delta", "thinking": piece},
            )
        signed = {"type": "signature_delta", "signature": signature(plan)}
        add("content_block_delta", index=index, delta=signed)
        add("content_block_stop", index=index)
        index += 1
    if plan.text:
        add("content_block_start", index=index, content_block={"type": "text", "text": ""})
        for piece in plan.text:
            add("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
        add("content_block_stop", index=index)
        index += 1
    for call in plan.calls:
        block: dict[str, Any] = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        add("content_block_start", index=index, content_block=block)
        for piece in ["", *call.pieces]:  # the real API opens with an empty piece
            delta = {"type": "input_json_delta", "partial_json": piece}
            add("content_block_delta", index=index, delta=delta)
        add("content_block_stop", index=index)
        index += 1
    if plan.error is not None:
        kind, _ = error_kind("anthropic", plan.error_status)
        add("error", error={"type": kind, "message": plan.error})
    elif not plan.truncate:
        stop = {"stop_reason": _ANTHROPIC_STOP[plan.stop], "stop_sequence": None}
        add("message_delta", delta=stop, usage={"output_tokens": usage.output})
        add("message_stop")
    return WireResponse(200, {"content-type": SSE_UTF8}, chunks)
