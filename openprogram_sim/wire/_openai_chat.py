"""OpenAI Chat Completions: ``POST /v1/chat/completions`` as the API answers it."""

from __future__ import annotations

from typing import Any

from openprogram.types import Usage
from openprogram_sim.wire._errors import error_kind
from openprogram_sim.wire._plan import (
    CREATED,
    SSE_UTF8,
    Plan,
    WireResponse,
    cut_short,
    json_response,
    sse_event,
)

__all__ = ["encode_openai_chat"]


_CHAT_STOP = {"stop": "stop", "length": "length", "toolUse": "tool_calls"}


def _chat_usage(u: Usage) -> dict[str, Any]:
    prompt = u.input + u.cache_read
    return {
        "prompt_tokens": prompt,
        "completion_tokens": u.output,
        "total_tokens": prompt + u.output,
        "prompt_tokens_details": {"cached_tokens": u.cache_read, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning, "audio_tokens": 0},
    }


def _chat_error(plan: Plan) -> dict[str, Any]:
    kind, code = error_kind("openai-chat", plan.error_status)
    return {"message": plan.error, "type": kind, "param": None, "code": code or None}


def encode_openai_chat(plan: Plan, *, stream: bool) -> WireResponse:
    """``POST /v1/chat/completions``: ``data:`` chunks, tool-call deltas keyed by index,
    a usage chunk (the adapter asks for ``stream_options.include_usage``), ``[DONE]``.
    Thinking travels as ``reasoning_content``, the field compatible servers use."""
    head = {
        "id": f"chatcmpl-wire{plan.seq}",
        "object": "chat.completion.chunk" if stream else "chat.completion",
        "created": CREATED,
        "model": plan.model,
    }
    if not stream:
        return _chat_json(plan, head)

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse_event({**head, "choices": [choice]})

    chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
    chunks += [chunk({"reasoning_content": piece}) for piece in plan.thinking]
    chunks += [chunk({"content": piece}) for piece in plan.text]
    for index, call in enumerate(plan.calls):
        opening = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [opening]}))
        for piece in call.pieces:
            delta = {"index": index, "function": {"arguments": piece}}
            chunks.append(chunk({"tool_calls": [delta]}))
    if plan.error is not None:
        chunks.append(sse_event({"error": _chat_error(plan)}))
    elif not plan.truncate:
        chunks.append(chunk({}, _CHAT_STOP[plan.stop]))
        chunks.append(sse_event({**head, "choices": [], "usage": _chat_usage(plan.usage)}))
        chunks.append(sse_event("[DONE]"))
    return WireResponse(200, {"content-type": SSE_UTF8}, chunks)


def _chat_json(plan: Plan, head: dict[str, Any]) -> WireResponse:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": plan.full_text or None,
        "refusal": None,
    }
    if plan.thinking:
        message["reasoning_content"] = plan.thinking_text
    if plan.calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.text},
            }
            for c in plan.calls
        ]
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": _CHAT_STOP[plan.stop],
    }
    body = {**head, "choices": [choice], "usage": _chat_usage(plan.usage)}
    response = json_response(200, body)
    return cut_short(response) if plan.truncate else response
