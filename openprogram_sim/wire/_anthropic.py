"""Anthropic Messages: ``POST /v1/messages`` as the API answers it, and the message threads
a session keeps for the ``thread`` field (:class:`ThreadStore`)."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from openprogram.types import Usage
from openprogram_sim.wire._errors import error_kind
from openprogram_sim.wire._plan import (
    JSON_TYPE,
    SSE_UTF8,
    Plan,
    WireResponse,
    cut_short,
    json_response,
    json_text,
    not_object,
    signature,
    sse_event,
)
from openprogram_sim.wire._trace import Served

__all__ = ["KEPT", "ThreadRefused", "ThreadStore", "encode_anthropic", "message_id"]

KEPT = 1000
"""Thread messages a session keeps, the most recent: a ``continue`` from an older one gets
``thread_not_found``, and the SDK sends the whole history again."""

_CREATE_ONLY = ("system", "tools")
"""What a thread keeps from the request that created it: a ``continue`` sends neither."""


def message_id(seq: int) -> str:
    """The id of message ``seq`` (its request's number in the session)."""
    return f"msg_wire{seq}"


class ThreadRefused(Exception):
    """A request's ``thread`` the session cannot take: a ``continue`` from a message it holds
    no thread for (``thread_not_found``, on which the SDK sends the whole history again
    under a new thread), or a malformed ``thread`` field."""

    def __init__(self, status: int, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code

    def answer(self) -> WireResponse:
        """The API's error shape, with ``error.details.error_code`` when there is one."""
        kind, _ = error_kind("anthropic", self.status)
        error: dict[str, Any] = {"type": kind, "message": self.message}
        if self.code is not None:
            error["details"] = {"error_code": self.code}
        body = {"type": "error", "error": error, "request_id": "req_wire"}
        headers = {"content-type": JSON_TYPE, "x-should-retry": "false"}
        return WireResponse(self.status, headers, [json_text(body).encode()])


class ThreadStore:
    """A session's message threads: each message it served on a thread (``thread: {"type":
    "create"}``, or a ``continue``) as the whole conversation it ends, with the ``system``
    and ``tools`` the thread was created with. A ``continue`` that sends only the new
    messages is then read as the whole request a client without threads sends."""

    def __init__(self, limit: int = KEPT) -> None:
        self.limit = limit
        """Conversations kept, the most recent: an id older than that is one not kept
        (a long-lived default session's memory stays bounded)."""
        self._kept: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def expand(self, body: dict[str, Any], label: str) -> dict[str, Any]:
        """``body`` as the whole conversation: a ``continue``'s messages preceded by the
        thread's, its ``system`` and ``tools`` the thread's (``body`` itself when it
        starts a thread or names none); raises :class:`ThreadRefused`."""
        thread = body.get("thread")
        if thread is None:
            return body
        kind = thread.get("type") if isinstance(thread, dict) else None
        if kind == "create":
            return body
        if kind != "continue":
            raise ThreadRefused(
                400, f"thread: {json.dumps(thread)} is not a thread; send {{\"type\": "
                '"create"} or {"type": "continue", "previous_message_id": "msg_..."}',
            )  # fmt: skip
        repeated = [f for f in _CREATE_ONLY if f in body]
        if repeated:
            fields = " and ".join(f"`{f}`" for f in repeated)
            raise ThreadRefused(
                400, f"{fields} cannot be sent on a thread `continue`: the thread keeps the "
                "ones it was created with; start a new thread (`create`) to change them",
            )  # fmt: skip
        previous = thread.get("previous_message_id")
        if not isinstance(previous, str):
            raise ThreadRefused(
                400, "thread.previous_message_id must be the id of a message (a string, "
                f"e.g. \"msg_wire1\"), got {json.dumps(previous)}",
            )  # fmt: skip
        kept = self._kept.get(previous)
        if kept is None:
            raise ThreadRefused(
                404, f"Thread message {previous!r} not found. (openprogram-sim: {label} holds "
                "no thread ending in that message; it keeps the messages it served on a "
                "thread, ids msg_wire1, msg_wire2, ... by request. The SDK sends the whole "
                "history again under a new thread; tool_runner(..., thread=False) sends it "
                "every turn)", code="thread_not_found",
            )  # fmt: skip
        messages = body.get("messages")
        new = list(messages) if isinstance(messages, list) else []
        return {**body, **kept["fields"], "messages": [*kept["messages"], *new]}

    def keep(self, seq: int, body: dict[str, Any], served: Served) -> None:
        """Keep message ``seq``, answered to ``body`` (expanded) on a thread, unless the
        answer failed (the server holds no turn it did not finish)."""
        if not isinstance(body.get("thread"), dict) or served.failed:
            return
        content: list[dict[str, Any]] = []
        if served.text:
            content.append({"type": "text", "text": served.text})
        for c in served.calls:
            content.append({"type": "tool_use", "id": c.id, "name": c.name, "input": c.args})
        messages = body.get("messages")
        history = list(messages) if isinstance(messages, list) else []
        fields = {f: body[f] for f in _CREATE_ONLY if f in body}
        reply = {"role": "assistant", "content": content}
        self._kept[message_id(seq)] = {"messages": [*history, reply], "fields": fields}
        if len(self._kept) > self.limit:
            self._kept.popitem(last=False)


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
        "id": message_id(plan.seq),
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
