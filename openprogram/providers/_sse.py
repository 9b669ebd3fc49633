"""An incremental Server-Sent Events decoder.

Bytes go in, in whatever chunks the network delivers them; complete events come out. It
follows the WHATWG event-stream rules: lines end in CRLF, CR or LF (a CR at the end of one
chunk and an LF at the start of the next are one line ending), a multi-byte UTF-8 character
may be split across chunks, lines starting with ``:`` are comments, several ``data:`` lines
join with ``\\n``, and a blank line dispatches the event.

What it holds is bounded: a line still open, and an event's ``data:`` lines not yet
dispatched, are each at most :data:`MAX_LINE` characters; past that, :meth:`SSEDecoder.feed`
raises :class:`SSELimitError` (a stream with no line end would otherwise grow without end).

Example::

    >>> decoder = SSEDecoder()
    >>> decoder.feed(b"event: ping\\r\\ndata: {}\\r")
    []
    >>> decoder.feed(b"\\n\\r\\n")
    [SSEEvent(event='ping', data='{}', id=None, retry=None)]
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

__all__ = ["MAX_LINE", "SSEDecoder", "SSEEvent", "SSELimitError"]

_LINE_END = re.compile(r"\r\n|\r|\n")

MAX_LINE = 16 * 1024 * 1024
"""The most characters a line, or one event's data, may hold (16 Mi; fixed: no API sends
a line this long; a base64 image in one line is a few MiB)."""


class SSELimitError(ValueError):
    """The stream holds a line or an event longer than :data:`MAX_LINE` characters."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event."""

    event: str
    """The ``event:`` field, ``"message"`` when the server sent none."""
    data: str
    """The ``data:`` lines joined with ``\\n``."""
    id: str | None = None
    """The last ``id:`` seen on the stream, if any."""
    retry: int | None = None
    """A ``retry:`` reconnection time in milliseconds sent with this event."""


class SSEDecoder:
    """Feed bytes with :meth:`feed`, then call :meth:`flush` once at end of stream."""

    __slots__ = (
        "_data",
        "_data_size",
        "_event",
        "_held",
        "_id",
        "_pending",
        "_retry",
        "_skip_lf",
        "_started",
        "_utf8",
    )

    def __init__(self) -> None:
        # "replace" rather than "strict": one bad byte must not lose the whole stream.
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending: list[str] = []
        self._held = 0  # characters in _pending
        self._data_size = 0  # characters in _data
        self._skip_lf = False
        self._started = False
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode ``chunk`` and return the events it completed (often none)."""
        return self._feed_text(self._utf8.decode(chunk))

    def flush(self) -> list[SSEEvent]:
        """End of stream: decode what is left and dispatch a final event that lacks its
        trailing blank line (lenient, as some servers omit it)."""
        events = self._feed_text(self._utf8.decode(b"", final=True))
        if self._pending:
            self._line("".join(self._pending))
            self._pending.clear()
        dispatched = self._dispatch()
        if dispatched is not None:
            events.append(dispatched)
        return events

    def _feed_text(self, text: str) -> list[SSEEvent]:
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._skip_lf and text:
            # The previous chunk ended in CR: an LF right here belongs to that line ending.
            text = text.removeprefix("\n")
            self._skip_lf = False
        if "\r" not in text:
            return self._feed_lf(text)
        events: list[SSEEvent] = []
        start = 0
        # Only the new text is scanned, so a long line arriving in tiny chunks stays linear.
        for match in _LINE_END.finditer(text):
            line = text[start : match.start()]
            if self._pending:
                line = "".join(self._pending) + line
                self._pending.clear()
                self._held = 0
            if len(line) > MAX_LINE:
                raise _too_long("line", len(line))
            start = match.end()
            if match.group() == "\r" and start == len(text):
                self._skip_lf = True
            event = self._line(line)
            if event is not None:
                events.append(event)
        if start < len(text):
            self._hold(text[start:])
        return events

    def _hold(self, rest: str) -> None:
        """Keep the start of a line still to come, within :data:`MAX_LINE`."""
        self._held += len(rest)
        if self._held > MAX_LINE:
            raise _too_long("line", self._held)
        self._pending.append(rest)

    def _feed_lf(self, text: str) -> list[SSEEvent]:
        # The common case (LF line endings only): split once instead of matching each line.
        events: list[SSEEvent] = []
        lines = text.split("\n")
        rest = lines.pop()  # after the last LF: part of a line still to come
        if lines and self._pending:
            lines[0] = "".join(self._pending) + lines[0]
            self._pending.clear()
            self._held = 0
        if len(text) > MAX_LINE and lines and max(map(len, lines)) > MAX_LINE:
            raise _too_long("line", max(map(len, lines)))
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        if rest:  # _hold, inlined: this is the hot path
            self._held += len(rest)
            if self._held > MAX_LINE:
                raise _too_long("line", self._held)
            self._pending.append(rest)
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment (keep-alive)
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data_size += len(value) + 1
            if self._data_size > MAX_LINE:
                raise _too_long("event (data: lines with no blank line)", self._data_size)
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> SSEEvent | None:
        event_type, data, retry = self._event, self._data, self._retry
        self._event, self._data, self._retry = "", [], None
        self._data_size = 0
        if not data:
            return None
        return SSEEvent(event_type or "message", "\n".join(data), self._id, retry)


def _too_long(what: str, size: int) -> SSELimitError:
    return SSELimitError(
        f"sent an SSE {what} longer than {MAX_LINE:,} characters, the adapters' fixed limit "
        f"({size:,} read); the stream was not read further"
    )
