"""OpenAI Responses: ``POST /v1/responses`` as the API answers it, and the conversations a
session keeps for ``previous_response_id`` (:class:`ResponseStore`)."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from openprogram.types import Usage
from openprogram_sim.wire._errors import error_kind
from openprogram_sim.wire._plan import (
    CREATED,
    JSON_TYPE,
    SSE_UTF8,
    Plan,
    WireResponse,
    cut_short,
    json_response,
    json_text,
    sse_event,
)
from openprogram_sim.wire._trace import Served

__all__ = [
    "KEPT",
    "ResponseStore",
    "ResponsesRefused",
    "UnknownResponse",
    "UnsupportedConversation",
    "encode_openai_responses",
    "response_id",
]


KEPT = 1000
"""Responses a session keeps for ``previous_response_id``, the most recent."""


def response_id(seq: int) -> str:
    """The id of response ``seq`` (its request's number in the session)."""
    return f"resp_wire{seq}"


class ResponsesRefused(Exception):
    """A request whose conversation the session cannot rebuild, answered with an error in
    the API's shape (HTTP ``status``, ``type`` ``invalid_request_error``)."""

    def __init__(self, message: str, *, status: int, param: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param
        self.code = code

    def answer(self) -> WireResponse:
        body = {"error": {"message": self.message, "type": "invalid_request_error",
                          "param": self.param, "code": self.code}}  # fmt: skip
        headers = {"content-type": JSON_TYPE, "x-should-retry": "false"}
        return WireResponse(self.status, headers, [json_text(body).encode()])


class UnknownResponse(ResponsesRefused):
    """A request's ``previous_response_id`` names no response the session keeps: the API's
    own error (HTTP 400, ``previous_response_not_found``)."""

    def __init__(self, previous: str, label: str) -> None:
        self.previous = previous
        super().__init__(
            f"Previous response with id {previous!r} not found. (openprogram-sim: {label} "
            "served no response with that id, or served it under store: false; a session "
            "keeps the responses it served, ids resp_wire1, resp_wire2, ... by request)",
            status=400, param="previous_response_id", code="previous_response_not_found",
        )  # fmt: skip


class UnsupportedConversation(ResponsesRefused):
    """A request on an OpenAI Conversation (``conversation``), whose items live in the
    Conversations API: the server keeps none, so it refuses it rather than read the
    request without its history."""

    def __init__(self, conversation: Any, label: str) -> None:
        super().__init__(
            f"openprogram-sim: {label} cannot serve a request on a Conversation "
            f"(conversation: {json.dumps(conversation)}): the server keeps no Conversations, "
            "and read without its items the request would be checked as a conversation it "
            "is not. Send previous_response_id with the new items, or the whole input "
            "(openai-agents: drop conversation_id; use auto_previous_response_id=True or "
            "previous_response_id=result.last_response_id)",
            status=400, param="conversation", code="unsupported_parameter",
        )  # fmt: skip


def _items(raw: Any) -> list[Any]:
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    return list(raw) if isinstance(raw, list) else []


class ResponseStore:
    """A session's served Responses, each as the whole conversation it ends (every input
    item, the earlier responses' included, and its output), so a request that sends only
    ``previous_response_id`` and its new items is read as the whole conversation."""

    def __init__(self, limit: int = KEPT) -> None:
        self.limit = limit
        """Conversations kept, the most recent: an id older than that is one not kept
        (a long-lived default session's memory stays bounded)."""
        self._kept: OrderedDict[str, list[Any]] = OrderedDict()

    def expand(self, body: dict[str, Any], label: str) -> dict[str, Any]:
        """``body`` with its ``input`` preceded by the conversation its
        ``previous_response_id`` ends (``body`` itself without one); raises
        :class:`UnknownResponse` for an id not kept, :class:`UnsupportedConversation` for a
        request on a Conversation."""
        conversation = body.get("conversation")
        if conversation is not None:
            raise UnsupportedConversation(conversation, label)
        previous = body.get("previous_response_id")
        if previous is None:
            return body
        kept = self._kept.get(str(previous))
        if kept is None:
            raise UnknownResponse(str(previous), label)
        return {**body, "input": [*kept, *_items(body.get("input"))]}

    def keep(self, seq: int, body: dict[str, Any], served: Served) -> None:
        """Keep response ``seq``, answered to ``body`` (expanded), unless it asked for
        ``store: false`` or the answer failed."""
        if body.get("store") is False or served.failed:
            return
        output: list[Any] = []
        if served.text:
            text = {"type": "output_text", "text": served.text, "annotations": []}
            output.append({"type": "message", "role": "assistant", "content": [text]})
        for c in served.calls:
            args = c.args if isinstance(c.args, str) else json.dumps(c.args, ensure_ascii=False)
            output.append(
                {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": args}
            )
        self._kept[response_id(seq)] = [*_items(body.get("input")), *output]
        if len(self._kept) > self.limit:
            self._kept.popitem(last=False)


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
        "id": response_id(plan.seq),
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
        kind, code = error_kind("openai-responses", plan.error_status)
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
        response = json_response(200, _responses_object(plan, status, items))
        return cut_short(response) if plan.truncate else response
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
        self.chunks.append(sse_event(data, kind))

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
