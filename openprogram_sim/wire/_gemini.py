"""Gemini: ``generateContent`` and ``streamGenerateContent?alt=sse`` as the API answers them."""

from __future__ import annotations

from typing import Any

from openprogram.types import Usage
from openprogram_sim.wire._errors import error_kind
from openprogram_sim.wire._plan import (
    Plan,
    PlannedCall,
    WireResponse,
    cut_short,
    json_response,
    not_object,
    sse_event,
)

__all__ = ["encode_gemini"]


def _gemini_usage(u: Usage) -> dict[str, Any]:
    prompt = u.input + u.cache_read
    meta: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": u.output - u.reasoning,
        "totalTokenCount": prompt + u.output,
    }
    if u.cache_read:
        meta["cachedContentTokenCount"] = u.cache_read
    if u.reasoning:
        meta["thoughtsTokenCount"] = u.reasoning
    return meta


def _gemini_call(call: PlannedCall) -> dict[str, Any]:
    function: dict[str, Any] = {"name": call.name, "args": call.value}
    if call.id is not None:
        function["id"] = call.id
    return {"functionCall": function}


def encode_gemini(plan: Plan, *, stream: bool) -> WireResponse:
    """``:streamGenerateContent?alt=sse``: ``data:`` chunks with CRLF line ends and no end
    marker; thinking as ``thought: true`` parts; function calls whole (``args`` is an
    object, never partial JSON), with no ``id`` unless the turn names one; ``finishReason``
    on the last chunk. ``:generateContent``: one JSON body."""
    if any(c.value is None for c in plan.calls):
        raise not_object("gemini", "functionCall.args", stream=stream)
    finish = "MAX_TOKENS" if plan.stop == "length" else "STOP"
    usage = plan.usage if plan.error is None else Usage()
    head = {"modelVersion": plan.model, "responseId": f"wire{plan.seq}"}

    def chunk(parts: list[dict[str, Any]], *, last: bool) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if last and not plan.truncate and plan.error is None:
            candidate["finishReason"] = finish
        meta = (
            _gemini_usage(usage) if last else {"promptTokenCount": usage.input + usage.cache_read}
        )
        return {"candidates": [candidate], "usageMetadata": meta, **head}

    thought_parts = [{"text": p, "thought": True} for p in plan.thinking]
    text_parts = [{"text": p} for p in plan.text]
    call_parts = [_gemini_call(c) for c in plan.calls]
    if not stream:
        parts: list[dict[str, Any]] = []
        if plan.thinking:
            parts.append({"text": plan.thinking_text, "thought": True})
        if plan.text:
            parts.append({"text": plan.full_text})
        body = chunk(parts + call_parts, last=True)
        response = json_response(200, body, "application/json; charset=UTF-8")
        return cut_short(response) if plan.truncate else response
    groups = [[p] for p in thought_parts + text_parts]
    if call_parts:
        groups.append(call_parts)  # the calls of one reply come in one chunk
    if not groups:
        groups.append([])
    chunks = [
        sse_event(chunk(group, last=i == len(groups) - 1), crlf=True)
        for i, group in enumerate(groups)
    ]
    if plan.error is not None:
        status, _ = error_kind("gemini", plan.error_status)
        error = {"code": plan.error_status, "message": plan.error, "status": status}
        chunks.append(sse_event({"error": error}, crlf=True))
    return WireResponse(200, {"content-type": "text/event-stream"}, chunks)
