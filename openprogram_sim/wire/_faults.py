"""Delivering a turn and its wire fault (:class:`~openprogram_sim.models.WireFault`: what a
scripted turn does to the HTTP exchange itself) to a client: the :class:`Delivery`.

The turn's own keys keep their meaning on the wire: an ``error`` stop's ``error_reason``
picks the HTTP status (``rate_limit`` 429, ``overloaded`` 503 or Anthropic's 529,
``server`` 500, ``auth`` 401, ``invalid_request`` 400, ``timeout`` 504 or Bedrock's 408;
``wire.status`` wins), ``retry_after`` becomes ``retry-after`` (and OpenAI's
``retry-after-ms``), ``retryable`` becomes ``x-should-retry``; ``latency`` is the real time
before the first byte, ``fault: truncate`` ends the stream cleanly before its terminal event,
``fault: raise`` drops the connection after the body (a provider that crashed), and
``fault: hang`` sends the body, then holds the connection open until the client gives
up (a non-streamed reply sends nothing at all).

A :class:`Delivery` is played the same way by both transports: the loopback server over a
real socket, and :class:`~openprogram_sim.wire.ScriptedWire` in process. Each walks
:meth:`Delivery.steps` in its own medium.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from enum import Enum

from openprogram_sim.models import NO_FAULT, ErrorMode, Turn, WireFault
from openprogram_sim.wire._encode import encode
from openprogram_sim.wire._errors import error_response
from openprogram_sim.wire._plan import EVENT_STREAM, WireResponse

__all__ = ["Delivery", "Step", "deliver"]


class Step(Enum):
    """The markers of :meth:`Delivery.steps` (besides waits and chunks)."""

    HEAD = "head"
    """Send the status line and the headers."""
    CUT = "cut"
    """Drop the connection: the response stays unfinished."""
    HOLD = "hold"
    """Send nothing more and keep the connection open until the client gives up."""
    END = "end"
    """The response is complete."""


DeliveryStep = float | list[bytes] | Step
"""One step of a delivery: a wait (real seconds), body chunks sent back to back, or a
:class:`Step`."""


@dataclass(slots=True, kw_only=True)
class Delivery:
    """A response and how to deliver it over a connection."""

    response: WireResponse
    delay: float = 0.0
    """Seconds before the status line (time to first byte)."""
    interval: float = 0.0
    """Seconds between body chunks."""
    cut_after: int | None = None
    """Drop the connection after this many chunks."""
    hang: bool = False
    """After the chunks (or, with ``hang_first``, before anything), hold the connection
    until the client gives up or the server stops."""
    hang_first: bool = False

    @property
    def whole(self) -> bool:
        """The body goes out in one piece of known length (a ``content-length`` header)."""
        return (
            self.cut_after is None
            and not self.hang
            and not self.hang_first
            and len(self.response.chunks) == 1
        )

    def steps(self) -> Iterator[DeliveryStep]:
        """The delivery in the order a client sees it: the wait before the first byte, the
        head, the chunks with their pauses, then the end, a cut or a hold.

        The server writes the chunks of one step at once (the client reads the same bytes);
        ScriptedWire hands them over one by one.
        """
        if self.delay:
            yield self.delay
        if self.hang_first:
            yield Step.HOLD
            return
        yield Step.HEAD
        cut = self.cut_after
        chunks = self.response.chunks if cut is None else self.response.chunks[:cut]
        if self.interval:
            for i, chunk in enumerate(chunks):
                if i:
                    yield self.interval
                yield [chunk]
        elif chunks:
            yield chunks
        if cut is not None:
            yield Step.CUT
        else:
            yield Step.HOLD if self.hang else Step.END


def deliver(
    api: str,
    turn: Turn,
    fault: WireFault = NO_FAULT,
    *,
    stream: bool,
    model: str = "scripted",
    seq: int = 1,
    chunk_size: int = 24,
    error_status: int = 500,
    error_mode: ErrorMode = "auto",
) -> Delivery:
    """How ``turn`` (with ``fault``) is answered on ``api``. ``error_status`` and
    ``error_mode`` apply where the turn and its fault say nothing (an ``error`` stop with
    no ``error_reason`` nor ``wire.status``; ``wire.error_mode`` left ``auto``).

    Raises:
        WireEncodeError: the turn cannot be expressed on this wire.
        ValueError: the fault cannot be applied to this response (e.g. ``corrupt_chunk``
            past its last chunk).
    """
    if fault.error_mode == "auto" and error_mode != "auto":
        fault = replace(fault, error_mode=error_mode)
    http_error = fault.status is not None and fault.error_mode != "stream"
    status = _status(api, turn, fault, error_status)
    if http_error:
        message = turn.error or f"scripted HTTP {status}"
        response = error_response(api, status, message)
    else:
        shown = turn
        if turn.fault in ("raise", "hang"):
            # the body as sent before the failure: a stream without its end, a whole
            # JSON body (cut on the socket, or never sent)
            shown = replace(turn, fault="truncate" if stream else None)
        response = encode(
            api,
            shown,
            stream=stream,
            model=model,
            seq=seq,
            chunk_size=chunk_size,
            error_status=status,
            error_mode=fault.error_mode,
        )
    response = _with_headers(api, response, turn, fault)
    if fault.corrupt_chunk is not None:
        response = _corrupt(response, fault.corrupt_chunk)
    out = Delivery(
        response=response, delay=turn.latency, interval=fault.interval, cut_after=fault.cut_after
    )
    if not http_error and turn.fault == "raise":
        out.cut_after = _raise_cut(out)
    elif not http_error and turn.fault == "hang":
        out.hang = True
        out.hang_first = not stream
    return out


_REASON_STATUS = {
    "rate_limit": 429,
    "overloaded": 503,
    "server": 500,
    "auth": 401,
    "invalid_request": 400,
    "timeout": 504,
}
"""The HTTP status an error turn's ``error_reason`` is served with (no ``wire.status``);
any other reason, or none, gets the default (500)."""


def _status(api: str, turn: Turn, fault: WireFault, default: int = 500) -> int:
    if fault.status is not None:
        return fault.status
    reason = turn.error_reason
    if reason == "overloaded" and api == "anthropic":
        return 529
    if reason == "timeout" and api == "bedrock":
        return 408  # ModelTimeoutException
    return _REASON_STATUS.get(reason or "", default)


def _with_headers(api: str, response: WireResponse, turn: Turn, fault: WireFault) -> WireResponse:
    """The fault's headers, and an error turn's ``retry_after`` / ``retryable`` as the
    provider says them (``retry-after``, OpenAI's ``retry-after-ms``, ``x-should-retry``).
    ``response`` itself when there are none (every encoding is a new response)."""
    said = response.status >= 400 and (turn.retry_after is not None or turn.retryable is not None)
    retry = fault.retry_after is not None or fault.retry_after_ms is not None
    if not (said or retry or fault.headers):
        return response
    headers = dict(response.headers)
    if response.status >= 400 and turn.retry_after is not None:
        headers["retry-after"] = f"{turn.retry_after:g}"
        if api.startswith("openai"):
            headers["retry-after-ms"] = str(round(turn.retry_after * 1000))
    if response.status >= 400 and turn.retryable is not None:
        headers["x-should-retry"] = "true" if turn.retryable else "false"
    if fault.retry_after is not None:
        headers["retry-after"] = f"{fault.retry_after:g}"
    if fault.retry_after_ms is not None:
        headers["retry-after-ms"] = str(fault.retry_after_ms)
    headers.update({k.lower(): v for k, v in fault.headers.items()})
    return WireResponse(response.status, headers, list(response.chunks))


def _raise_cut(out: Delivery) -> int:
    """A crashed provider: the body (a streamed reply's events, half a JSON body), then
    the connection drops."""
    chunks = out.response.chunks
    if out.response.content_type.startswith("application/json") and len(chunks) == 1:
        whole = chunks[0]
        out.response.chunks = [whole[: len(whole) // 2], whole[len(whole) // 2 :]]
        return 1
    return len(chunks)


_CORRUPT_JSON = b'{"openprogram_sim": corrupt chunk'


def _corrupt(response: WireResponse, n: int) -> WireResponse:
    chunks = list(response.chunks)
    if n > len(chunks):
        raise ValueError(f"wire.corrupt_chunk is {n}, but the response has {len(chunks)} chunk(s)")
    chunk = chunks[n - 1]
    if response.content_type.startswith(EVENT_STREAM):
        broken = bytearray(chunk)
        broken[-5] ^= 0xFF  # a payload byte: the message checksum no longer matches
        chunks[n - 1] = bytes(broken)
    elif response.content_type.startswith("text/event-stream"):
        head, sep, _ = chunk.partition(b"data: ")
        end = b"\r\n\r\n" if chunk.endswith(b"\r\n\r\n") else b"\n\n"
        chunks[n - 1] = head + (sep or b"data: ") + _CORRUPT_JSON + end
    else:
        chunks[n - 1] = _CORRUPT_JSON
    return WireResponse(response.status, response.headers, chunks)
