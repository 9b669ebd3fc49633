"""The five wire encoders behind :mod:`openprogram_sim.wire` (private).

Each ``encode_<api>(plan, stream=...)`` turns a :class:`Plan` (a scripted turn resolved to
wire values: ids, raw stop reason, chunked pieces) into a :class:`WireResponse`. They are
pure: the same plan always gives the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from openprogram.providers._eventstream import encode_message
from openprogram.types import Usage

__all__ = [
    "ENCODERS",
    "ERROR_CATALOG",
    "PlannedCall",
    "Plan",
    "WireResponse",
    "error_response",
]

CREATED = 1_700_000_000
"""A fixed ``created`` timestamp: encoded bodies are reproducible byte for byte."""

SSE_UTF8 = "text/event-stream; charset=utf-8"
EVENT_STREAM = "application/vnd.amazon.eventstream"
JSON_TYPE = "application/json"


@dataclass(slots=True)
class WireResponse:
    """One HTTP response as a real API would send it.

    ``chunks`` are the body pieces in the order a server writes them (one per SSE event or
    event-stream frame; a single piece for a JSON body). Serve them one by one to stream.
    """

    status: int
    headers: dict[str, str]
    chunks: list[bytes] = field(default_factory=list)

    @property
    def body(self) -> bytes:
        """The whole body."""
        return b"".join(self.chunks)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


@dataclass(slots=True)
class PlannedCall:
    id: str | None
    """The id the wire carries (``None``: the API sends none, as Gemini usually does)."""
    name: str
    text: str
    """The arguments as JSON text (what streaming APIs send piece by piece)."""
    value: Any
    """The arguments as a JSON value, for APIs that carry an object (``None`` if the text
    is not a JSON object)."""
    pieces: list[str]


@dataclass(slots=True)
class Plan:
    """A turn resolved to what goes on the wire."""

    seq: int
    model: str
    thinking: list[str]
    text: list[str]
    calls: list[PlannedCall]
    stop: Literal["stop", "length", "toolUse"]
    usage: Usage
    error: str | None = None
    """Set for an error stop: the provider's error message."""
    error_status: int = 500
    in_stream_error: bool = False
    """Deliver the error inside a 200 stream, after the content (else an HTTP error)."""
    truncate: bool = False
    """End the stream (or cut the JSON body) before the reply's terminal event."""

    @property
    def thinking_text(self) -> str:
        return "".join(self.thinking)

    @property
    def full_text(self) -> str:
        return "".join(self.text)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _sse(data: Any, event: str | None = None, *, crlf: bool = False) -> bytes:
    end = "\r\n" if crlf else "\n"
    head = f"event: {event}{end}" if event else ""
    payload = data if isinstance(data, str) else _json(data)
    return f"{head}data: {payload}{end}{end}".encode()


def _json_response(status: int, body: Any, content_type: str = JSON_TYPE) -> WireResponse:
    return WireResponse(status, {"content-type": content_type}, [_json(body).encode()])


def _cut(response: WireResponse) -> WireResponse:
    """A JSON body cut in half (a connection that closed mid-body)."""
    body = response.body
    return WireResponse(response.status, response.headers, [body[: len(body) // 2]])


# --------------------------------------------------------------------------- HTTP errors

ERROR_CATALOG: dict[str, dict[int, tuple[str, str]]] = {
    # status -> (type or status name, code) as each API reports it
    "openai": {
        400: ("invalid_request_error", "invalid_request_error"),
        401: ("invalid_request_error", "invalid_api_key"),
        403: ("invalid_request_error", "unsupported_country_region_territory"),
        404: ("invalid_request_error", "model_not_found"),
        429: ("requests", "rate_limit_exceeded"),
        500: ("server_error", ""),
        503: ("service_unavailable_error", "server_is_overloaded"),
    },
    "anthropic": {
        400: ("invalid_request_error", ""),
        401: ("authentication_error", ""),
        403: ("permission_error", ""),
        404: ("not_found_error", ""),
        413: ("request_too_large", ""),
        429: ("rate_limit_error", ""),
        500: ("api_error", ""),
        529: ("overloaded_error", ""),
    },
    "gemini": {
        400: ("INVALID_ARGUMENT", ""),
        403: ("PERMISSION_DENIED", ""),
        404: ("NOT_FOUND", ""),
        429: ("RESOURCE_EXHAUSTED", ""),
        500: ("INTERNAL", ""),
        503: ("UNAVAILABLE", ""),
        504: ("DEADLINE_EXCEEDED", ""),
    },
    "bedrock": {
        400: ("ValidationException", "validationException"),
        403: ("AccessDeniedException", "accessDeniedException"),
        404: ("ResourceNotFoundException", "resourceNotFoundException"),
        408: ("ModelTimeoutException", "modelTimeoutException"),
        424: ("ModelErrorException", "modelStreamErrorException"),
        429: ("ThrottlingException", "throttlingException"),
        500: ("InternalServerException", "internalServerException"),
        503: ("ServiceUnavailableException", "serviceUnavailableException"),
    },
}
"""What each API calls an error of a given HTTP status (its error ``type``/``status``/
exception name). A status missing here gets the entry of 500 (>= 500) or 400."""


def _family(api: str) -> str:
    return "openai" if api.startswith("openai") else api


def _kind(api: str, status: int) -> tuple[str, str]:
    table = ERROR_CATALOG[_family(api)]
    return table.get(status) or table[500 if status >= 500 else 400]


def error_response(api: str, status: int, message: str) -> WireResponse:
    """The HTTP error ``api`` answers with for ``status``: its error body shape, its error
    type for that status, and the headers that go with it (``retry-after`` on 429,
    ``x-amzn-ErrorType`` on Bedrock)."""
    kind, code = _kind(api, status)
    family = _family(api)
    headers = {"content-type": JSON_TYPE}
    if status == 429:
        headers["retry-after"] = "1"
    body: Any
    if family == "openai":
        body = {"error": {"message": message, "type": kind, "param": None, "code": code or None}}
    elif family == "anthropic":
        body = {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": "req_wire",
        }
    elif family == "gemini":
        body = {"error": {"code": status, "message": message, "status": kind}}
        headers["content-type"] = "application/json; charset=UTF-8"
    else:
        body = {"message": message}
        headers["x-amzn-errortype"] = f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"
    return WireResponse(status, headers, [_json(body).encode()])


# --------------------------------------------------------------------------- OpenAI Chat

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
    kind, code = _kind("openai-chat", plan.error_status)
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
        return _sse({**head, "choices": [choice]})

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
        chunks.append(_sse({"error": _chat_error(plan)}))
    elif not plan.truncate:
        chunks.append(chunk({}, _CHAT_STOP[plan.stop]))
        chunks.append(_sse({**head, "choices": [], "usage": _chat_usage(plan.usage)}))
        chunks.append(_sse("[DONE]"))
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
    response = _json_response(200, body)
    return _cut(response) if plan.truncate else response


# --------------------------------------------------------------------------- OpenAI Responses


def _responses_usage(u: Usage) -> dict[str, Any]:
    prompt = u.input + u.cache_read
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": u.cache_read},
        "output_tokens": u.output,
        "output_tokens_details": {"reasoning_tokens": u.reasoning},
        "total_tokens": prompt + u.output,
    }


def _responses_items(plan: Plan) -> list[dict[str, Any]]:
    """The finished output items, in order: reasoning, message, function calls."""
    items: list[dict[str, Any]] = []
    if plan.thinking:
        summary = [{"type": "summary_text", "text": plan.thinking_text}]
        items.append({"id": f"rs_wire{plan.seq}", "type": "reasoning", "summary": summary})
    if plan.text:
        part = {"type": "output_text", "text": plan.full_text, "annotations": [], "logprobs": []}
        items.append(
            {
                "id": f"msg_wire{plan.seq}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        )
    for index, call in enumerate(plan.calls):
        items.append(
            {
                "id": f"fc_wire{plan.seq}_{index}",
                "type": "function_call",
                "status": "completed",
                "arguments": call.text,
                "call_id": call.id,
                "name": call.name,
            }
        )
    return items


def _responses_object(plan: Plan, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    final = status != "in_progress"
    body: dict[str, Any] = {
        "id": f"resp_wire{plan.seq}",
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": plan.model,
        "output": output,
        "parallel_tool_calls": True,
        "usage": _responses_usage(plan.usage) if final and plan.error is None else None,
    }
    if status == "incomplete":
        body["incomplete_details"] = {"reason": "max_output_tokens"}
    if status == "failed":
        kind, code = _kind("openai-responses", plan.error_status)
        body["error"] = {"code": code or kind, "message": plan.error}
    return body


def _responses_final_status(plan: Plan) -> str:
    if plan.error is not None:
        return "failed"
    return "incomplete" if plan.stop == "length" else "completed"


def encode_openai_responses(plan: Plan, *, stream: bool) -> WireResponse:
    """``POST /v1/responses``: ``event:``-typed SSE from ``response.created`` through
    ``response.completed`` (``response.incomplete`` for a length stop, ``response.failed``
    for an in-stream error). Thinking is a ``reasoning`` item's summary."""
    items = _responses_items(plan)
    status = _responses_final_status(plan)
    if not stream:
        response = _json_response(200, _responses_object(plan, status, items))
        return _cut(response) if plan.truncate else response
    events = _ResponsesEvents()
    events.add("response.created", response=_responses_object(plan, "in_progress", []))
    events.add("response.in_progress", response=_responses_object(plan, "in_progress", []))
    for output_index, item in enumerate(items):
        if item["type"] == "reasoning":
            events.reasoning(output_index, item, plan.thinking)
        elif item["type"] == "message":
            events.message(output_index, item, plan.text)
        else:
            call = plan.calls[output_index - len(items) + len(plan.calls)]
            events.function_call(output_index, item, call.pieces)
    if not plan.truncate:
        events.add(f"response.{status}", response=_responses_object(plan, status, items))
    return WireResponse(200, {"content-type": SSE_UTF8}, events.chunks)


class _ResponsesEvents:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def add(self, kind: str, **fields: Any) -> None:
        data = {"type": kind, "sequence_number": len(self.chunks), **fields}
        self.chunks.append(_sse(data, kind))

    def reasoning(self, at: int, item: dict[str, Any], pieces: list[str]) -> None:
        item_id = item["id"]
        self.add("response.output_item.added", output_index=at, item={**item, "summary": []})
        where = {"item_id": item_id, "output_index": at, "summary_index": 0}
        self.add("response.reasoning_summary_part.added", **where, part=_summary(""))
        for piece in pieces:
            self.add("response.reasoning_summary_text.delta", **where, delta=piece)
        text = "".join(pieces)
        self.add("response.reasoning_summary_text.done", **where, text=text)
        self.add("response.reasoning_summary_part.done", **where, part=_summary(text))
        self.add("response.output_item.done", output_index=at, item=item)

    def message(self, at: int, item: dict[str, Any], pieces: list[str]) -> None:
        opened = {**item, "status": "in_progress", "content": []}
        self.add("response.output_item.added", output_index=at, item=opened)
        where = {"item_id": item["id"], "output_index": at, "content_index": 0}
        empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        self.add("response.content_part.added", **where, part=empty)
        for piece in pieces:
            self.add("response.output_text.delta", **where, delta=piece, logprobs=[])
        text = "".join(pieces)
        self.add("response.output_text.done", **where, text=text, logprobs=[])
        self.add("response.content_part.done", **where, part=item["content"][0])
        self.add("response.output_item.done", output_index=at, item=item)

    def function_call(self, at: int, item: dict[str, Any], pieces: list[str]) -> None:
        opened = {**item, "status": "in_progress", "arguments": ""}
        self.add("response.output_item.added", output_index=at, item=opened)
        where = {"item_id": item["id"], "output_index": at}
        for piece in pieces:
            self.add("response.function_call_arguments.delta", **where, delta=piece)
        self.add(
            "response.function_call_arguments.done",
            **where,
            arguments=item["arguments"],
            name=item["name"],
        )
        self.add("response.output_item.done", output_index=at, item=item)


def _summary(text: str) -> dict[str, str]:
    return {"type": "summary_text", "text": text}


# --------------------------------------------------------------------------- Anthropic

_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "toolUse": "tool_use"}


def _signature(plan: Plan) -> str:
    """A stand-in for the opaque signature a real thinking block carries."""
    return f"c2lnbmF0dXJlLXdpcmUt{plan.seq}"


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
            {"type": "thinking", "thinking": plan.thinking_text, "signature": _signature(plan)}
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
            raise _not_object("anthropic", "tool_use.input", stream=False)
        body = {
            **message,
            "content": _anthropic_blocks(plan),
            "stop_reason": _ANTHROPIC_STOP[plan.stop],
            "usage": _anthropic_usage(usage),
        }
        response = _json_response(200, body)
        return _cut(response) if plan.truncate else response
    chunks: list[bytes] = []

    def add(kind: str, **fields: Any) -> None:
        chunks.append(_sse({"type": kind, **fields}, kind))

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
        signature = {"type": "signature_delta", "signature": _signature(plan)}
        add("content_block_delta", index=index, delta=signature)
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
        kind, _ = _kind("anthropic", plan.error_status)
        add("error", error={"type": kind, "message": plan.error})
    elif not plan.truncate:
        stop = {"stop_reason": _ANTHROPIC_STOP[plan.stop], "stop_sequence": None}
        add("message_delta", delta=stop, usage={"output_tokens": usage.output})
        add("message_stop")
    return WireResponse(200, {"content-type": SSE_UTF8}, chunks)


# --------------------------------------------------------------------------- Gemini


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
        raise _not_object("gemini", "functionCall.args", stream=stream)
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
        response = _json_response(200, body, "application/json; charset=UTF-8")
        return _cut(response) if plan.truncate else response
    groups = [[p] for p in thought_parts + text_parts]
    if call_parts:
        groups.append(call_parts)  # the calls of one reply come in one chunk
    if not groups:
        groups.append([])
    chunks = [
        _sse(chunk(group, last=i == len(groups) - 1), crlf=True) for i, group in enumerate(groups)
    ]
    if plan.error is not None:
        status, _ = _kind("gemini", plan.error_status)
        error = {"code": plan.error_status, "message": plan.error, "status": status}
        chunks.append(_sse({"error": error}, crlf=True))
    return WireResponse(200, {"content-type": "text/event-stream"}, chunks)


# --------------------------------------------------------------------------- Bedrock

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
    return encode_message(headers, _json(padded).encode())


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
        signature = {"reasoningContent": {"signature": _signature(plan)}}
        add("contentBlockDelta", contentBlockIndex=index, delta=signature)
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
        _, exception = _kind("bedrock", plan.error_status)
        headers = {
            ":exception-type": exception,
            ":content-type": JSON_TYPE,
            ":message-type": "exception",
        }
        frames.append(encode_message(headers, _json({"message": plan.error}).encode()))
    elif not plan.truncate:
        add("messageStop", stopReason=_BEDROCK_STOP[plan.stop])
        add("metadata", usage=_bedrock_usage(plan.usage), metrics={"latencyMs": 0})
    return WireResponse(200, {"content-type": EVENT_STREAM}, frames)


def _bedrock_json(plan: Plan) -> WireResponse:
    if any(c.value is None for c in plan.calls):
        raise _not_object("bedrock", "toolUse.input", stream=False)
    content: list[dict[str, Any]] = []
    if plan.thinking:
        text = {"text": plan.thinking_text, "signature": _signature(plan)}
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
    response = _json_response(200, body)
    return _cut(response) if plan.truncate else response


# --------------------------------------------------------------------------- shared


class WireEncodeError(ValueError):
    """The turn cannot be expressed on this API's wire."""


def _not_object(api: str, field_name: str, *, stream: bool) -> WireEncodeError:
    mode = "streaming" if stream else "non-streaming"
    return WireEncodeError(
        f"{api} ({mode}) carries tool-call arguments as a JSON object ({field_name}), so a "
        "scripted call whose arguments are not a JSON object (malformed JSON text, a list) "
        "cannot be encoded; use openai-chat or openai-responses (which carry arguments as "
        "text), or the streaming anthropic/bedrock wire (partial JSON text)"
    )


def pieces(text: str, size: int) -> Iterator[str]:
    """``text`` in ``size``-character pieces (the whole text when short or ``size <= 0``)."""
    if size <= 0 or len(text) <= size:
        if text:
            yield text
        return
    for i in range(0, len(text), size):
        yield text[i : i + size]


ENCODERS: dict[str, Callable[..., WireResponse]] = {
    "openai-chat": encode_openai_chat,
    "openai-responses": encode_openai_responses,
    "anthropic": encode_anthropic,
    "gemini": encode_gemini,
    "bedrock": encode_bedrock,
}
