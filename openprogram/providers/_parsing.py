"""Response bodies to provider events: one code path for streams and whole bodies.

Each wire adapter subclasses :class:`WireParser` and implements :meth:`WireParser.on_sse`
(one decoded SSE event) and :meth:`WireParser.on_json` (a whole JSON body). The provider
feeds network chunks as they arrive; :func:`parse_body` feeds a recorded body in one piece.
Both end in exactly one ``done`` or ``error`` event, built by the adapter's
:class:`~openprogram.providers.builder.MessageBuilder`.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from openprogram.events import ProviderEvent
from openprogram.providers._errors import carried_error, clip, details_for_codes, http_error
from openprogram.providers._sse import SSEDecoder, SSEEvent, SSELimitError
from openprogram.providers.builder import MessageBuilder
from openprogram.types import AssistantMessage, ErrorDetails, Usage

__all__ = ["WireParser", "is_event_stream", "parse_body", "to_int"]


def is_event_stream(content_type: str) -> bool:
    """True for an SSE body (``text/event-stream``, with or without parameters)."""
    return content_type.split(";", 1)[0].strip().lower() == "text/event-stream"


class WireParser:
    """Turns one response body, chunk by chunk, into provider events.

    Subclasses set ``terminal`` (the name of the stream's last event, for the "ended early"
    error) and ``label`` (the provider's name in error messages).
    """

    terminal = "the final event"
    label = "provider"

    def __init__(self, builder: MessageBuilder, content_type: str) -> None:
        self.builder = builder
        self.finished = False
        """True once the ``done`` or ``error`` event has been produced."""
        self._sse = SSEDecoder() if is_event_stream(content_type) else None
        self._json: list[bytes] = []
        self._out: list[ProviderEvent] = []

    # -- what subclasses implement -------------------------------------------------------

    def on_sse(self, event: SSEEvent) -> None:
        """Handle one SSE event, calling :meth:`emit`, :meth:`done` or :meth:`fail`."""
        raise NotImplementedError

    def on_json(self, body: Any) -> None:
        """Handle a whole (non-streamed) JSON response body."""
        raise NotImplementedError

    def on_end(self) -> None:
        """The stream ended without its terminal event; a subclass that can still tell how
        the reply ended may finish here. Default: nothing (the call then fails)."""

    # -- what subclasses call ------------------------------------------------------------

    def emit(self, event: ProviderEvent) -> None:
        self._out.append(event)

    def done(self, stop_reason: Literal["stop", "length", "toolUse"] | None, usage: Usage) -> None:
        """Close what is open and finish normally (``None``: toolUse if calls, else stop)."""
        self._out.extend(self.builder.close_open_blocks())
        self._out.append(self.builder.done(stop_reason, usage))
        self.finished = True

    def fail(
        self, message: str, usage: Usage | None = None, *, details: ErrorDetails | None = None
    ) -> None:
        """Close what is open and finish with ``stop_reason="error"``. ``details`` default:
        a ``stream`` failure (the answer could not be read as a reply)."""
        details = details if details is not None else ErrorDetails(reason="stream")
        self._out.extend(self.builder.close_open_blocks())
        self._out.append(self.builder.error(message, usage=usage, details=details))
        self.finished = True

    def fail_no_reply(self, body: Any, missing: str) -> None:
        """A 2xx body that is not a reply: quote the error it carries in any API's shape,
        or name what is ``missing`` (e.g. ``"'choices'"``)."""
        found = carried_error(body)
        if found is not None:
            message, code = found
            text = f"{self.label}: the response (HTTP 2xx) carried an error instead of a reply"
            text += f" ({code})" if code else ""
            self.fail(f"{text}: {message}" if message else text, details=details_for_codes(code))
            return
        if isinstance(body, dict):
            held = f"keys {', '.join(map(repr, body))}" if body else "an empty object"
        else:
            held = f"a JSON {type(body).__name__}"
        self.fail(clip(f"{self.label}: the response is not a reply: it has no {missing} ({held})"))

    # -- what the provider calls ---------------------------------------------------------

    def feed(self, chunk: bytes) -> list[ProviderEvent]:
        """The events completed by ``chunk`` (a whole JSON body waits for :meth:`finish`)."""
        if self.finished:
            return []
        if self._sse is None:
            self._json.append(chunk)
            return []
        try:
            events = self._sse.feed(chunk)
        except SSELimitError as exc:  # a line with no end: stop reading, do not buffer it
            self.fail(f"{self.label} {exc}")
            return self._take()
        self._handle(events)
        return self._take()

    def finish(self) -> list[ProviderEvent]:
        """End of body: the remaining events, always ending in ``done`` or ``error``."""
        if self._sse is not None:
            try:
                self._handle(self._sse.flush())
            except SSELimitError as exc:
                self.fail(f"{self.label} {exc}")
            if not self.finished:
                self._guarded(self.on_end)
            if not self.finished:
                # Most often a dropped connection: the same call may well succeed.
                self.fail(
                    f"{self.label} stream ended before {self.terminal}",
                    details=ErrorDetails(reason="stream", retryable=True),
                )
        elif not self.finished:
            self._guarded(self._whole_json)
            if not self.finished:
                self.fail(f"{self.label} response body held no reply")
        return self._take()

    def abort(self, message: str) -> list[ProviderEvent]:
        """Finish as cancelled (``stop_reason="aborted"``)."""
        if self.finished:
            return self._take()
        self._out.extend(self.builder.close_open_blocks())
        self._out.append(self.builder.error(message, aborted=True))
        self.finished = True
        return self._take()

    # -- internals -----------------------------------------------------------------------

    def _whole_json(self) -> None:
        self.on_json(json.loads(b"".join(self._json)))

    def _handle(self, events: list[SSEEvent]) -> None:
        for event in events:
            if self.finished:
                return
            self._guarded(self.on_sse, event)

    def _guarded(self, handler: Any, *args: Any) -> None:
        # A body we cannot make sense of is a failed call, not a crash of the loop.
        try:
            handler(*args)
        except RecursionError:
            self.fail(f"{self.label} sent JSON nested too deeply to parse")
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            self.fail(f"{self.label} sent a response that could not be parsed: {exc!r}")

    def _take(self) -> list[ProviderEvent]:
        out, self._out = self._out, []
        return out


def parse_body(parser: WireParser, body: bytes | str, *, status: int) -> AssistantMessage:
    """Run a whole recorded body through ``parser``; a ``status`` outside 2xx makes the
    body an error body instead. The error text is cut as a live call's is."""
    message = parser.builder.message
    if not 200 <= status < 300:
        text, details = http_error(parser.label, status, body)
        parser.builder.error(text, details=details)
    else:
        parser.feed(body.encode() if isinstance(body, str) else body)
        parser.finish()
    if message.error_message is not None:
        message.error_message = clip(message.error_message)
    return message


def to_int(value: Any) -> int:
    """A token count from JSON (missing or null is 0)."""
    return value if isinstance(value, int) else 0
