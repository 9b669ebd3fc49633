"""A scripted turn resolved to wire values, the response type, and the helpers every
encoder shares (JSON text, SSE events, a body cut short).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from openprogram.types import Usage
from openprogram_sim.errors import WireEncodeError

__all__ = [
    "CREATED",
    "EVENT_STREAM",
    "JSON_TYPE",
    "SSE_UTF8",
    "Plan",
    "PlannedCall",
    "WireResponse",
    "cut_short",
    "json_response",
    "json_text",
    "not_object",
    "pieces",
    "signature",
    "sse_event",
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


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def sse_event(data: Any, event: str | None = None, *, crlf: bool = False) -> bytes:
    end = "\r\n" if crlf else "\n"
    head = f"event: {event}{end}" if event else ""
    payload = data if isinstance(data, str) else json_text(data)
    return f"{head}data: {payload}{end}{end}".encode()


def json_response(status: int, body: Any, content_type: str = JSON_TYPE) -> WireResponse:
    return WireResponse(status, {"content-type": content_type}, [json_text(body).encode()])


def cut_short(response: WireResponse) -> WireResponse:
    """A JSON body cut in half (a connection that closed mid-body)."""
    body = response.body
    return WireResponse(response.status, response.headers, [body[: len(body) // 2]])


def signature(plan: Plan) -> str:
    """A stand-in for the opaque signature a real thinking block carries (Anthropic and
    Bedrock)."""
    return f"c2lnbmF0dXJlLXdpcmUt{plan.seq}"


def not_object(api: str, field_name: str, *, stream: bool) -> WireEncodeError:
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
