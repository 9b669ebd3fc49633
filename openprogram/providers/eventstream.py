"""The AWS binary event-stream framing: an incremental decoder and a small encoder.

Bedrock ConverseStream answers with ``application/vnd.amazon.eventstream``, not SSE. The
Bedrock adapter reads its replies with :class:`EventStreamDecoder`; anything that records,
rewrites or serves Bedrock traffic (the harness's cassettes and wire simulator) decodes and
encodes frames with the same code. Each message on the wire is::

    prelude   total length (u32) | headers length (u32) | CRC32 of those 8 bytes (u32)
    headers   repeated: name length (u8) | name | value type (u8) | value
    payload   total - headers - 16 bytes (JSON for Bedrock)
    trailer   CRC32 of everything before it (u32)

All integers are big-endian. :class:`EventStreamDecoder` accepts the body in chunks cut at
any byte boundary and returns each message once it is complete and both CRCs check out.

Example::

    >>> frame = encode_message({":event-type": "messageStop"}, b'{"stopReason":"end_turn"}')
    >>> decoder = EventStreamDecoder()
    >>> decoder.feed(frame[:5]), decoder.feed(frame[5:])[0].headers
    ([], {':event-type': 'messageStop'})
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import Any

from openprogram.errors import OpenProgramError

__all__ = ["EventStreamDecoder", "EventStreamError", "EventStreamMessage", "encode_message"]

_PRELUDE = 12
_TRAILER = 4
# The limits botocore enforces; a bigger length field means a corrupt or hostile stream,
# and checking it first stops us from buffering gigabytes while waiting for "the rest".
_MAX_HEADERS = 128 * 1024
_MAX_PAYLOAD = 24 * 1024 * 1024

_BOOL_TRUE, _BOOL_FALSE, _BYTE, _SHORT, _INT, _LONG, _BYTES, _STRING, _TIMESTAMP, _UUID = range(10)
_FIXED = {_BYTE: ">b", _SHORT: ">h", _INT: ">i", _LONG: ">q", _TIMESTAMP: ">q"}


class EventStreamError(OpenProgramError, ValueError):
    """The bytes are not a valid event stream (bad CRC, bad length, truncated message)."""


@dataclass(slots=True)
class EventStreamMessage:
    """One decoded message: its headers (``:message-type``, ``:event-type``...) and raw
    payload bytes."""

    headers: dict[str, Any]
    payload: bytes

    @property
    def message_type(self) -> str:
        """``event``, ``exception`` or ``error`` (``event`` when the header is absent)."""
        return str(self.headers.get(":message-type", "event"))


class EventStreamDecoder:
    """Turns event-stream bytes, fed in arbitrary chunks, into :class:`EventStreamMessage`."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[EventStreamMessage]:
        """Add ``data`` and return every message completed by it (possibly none)."""
        self._buffer += data
        messages: list[EventStreamMessage] = []
        while len(self._buffer) >= _PRELUDE:
            total, headers_len = _check_prelude(bytes(self._buffer[:_PRELUDE]))
            if len(self._buffer) < total:
                break
            frame = bytes(self._buffer[:total])
            del self._buffer[:total]
            messages.append(_decode_frame(frame, headers_len))
        return messages

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a complete message."""
        return len(self._buffer)

    def close(self) -> None:
        """Declare the end of the body; raises :class:`EventStreamError` if a message was
        cut off part-way."""
        if self._buffer:
            raise EventStreamError(
                f"event stream ended inside a message ({len(self._buffer)} bytes left over)"
            )


def _check_prelude(prelude: bytes) -> tuple[int, int]:
    total, headers_len, crc = struct.unpack(">III", prelude)
    if zlib.crc32(prelude[:8]) != crc:
        raise EventStreamError("event stream prelude CRC mismatch (corrupt or not an event stream)")
    if headers_len > _MAX_HEADERS:
        raise EventStreamError(f"event stream headers length {headers_len} exceeds 128 KiB")
    payload_len = total - headers_len - _PRELUDE - _TRAILER
    if payload_len < 0 or payload_len > _MAX_PAYLOAD:
        raise EventStreamError(f"event stream message length {total} is invalid")
    return total, headers_len


def _decode_frame(frame: bytes, headers_len: int) -> EventStreamMessage:
    (crc,) = struct.unpack(">I", frame[-_TRAILER:])
    if zlib.crc32(frame[:-_TRAILER]) != crc:
        raise EventStreamError("event stream message CRC mismatch (corrupt message)")
    headers_end = _PRELUDE + headers_len
    headers = _decode_headers(frame[_PRELUDE:headers_end])
    return EventStreamMessage(headers, frame[headers_end:-_TRAILER])


def _decode_headers(data: bytes) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    pos = 0
    try:
        while pos < len(data):
            name_len = data[pos]
            name = data[pos + 1 : pos + 1 + name_len].decode("utf-8")
            pos += 1 + name_len
            value, pos = _decode_value(data, data[pos], pos + 1)
            headers[name] = value
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise EventStreamError(f"malformed event stream header ({exc})") from exc
    return headers


def _decode_value(data: bytes, kind: int, pos: int) -> tuple[Any, int]:
    if kind in (_BOOL_TRUE, _BOOL_FALSE):
        return kind == _BOOL_TRUE, pos
    if kind in _FIXED:
        fmt = _FIXED[kind]
        return struct.unpack_from(fmt, data, pos)[0], pos + struct.calcsize(fmt)
    if kind in (_BYTES, _STRING):
        (length,) = struct.unpack_from(">H", data, pos)
        raw = data[pos + 2 : pos + 2 + length]
        if len(raw) != length:
            raise IndexError("header value runs past the headers")
        return (raw.decode("utf-8") if kind == _STRING else raw), pos + 2 + length
    if kind == _UUID:
        raw = data[pos : pos + 16]
        if len(raw) != 16:
            raise IndexError("a UUID header value runs past the headers")
        return uuid.UUID(bytes=raw), pos + 16
    raise EventStreamError(f"unknown event stream header value type {kind}")


def encode_message(headers: dict[str, Any], payload: bytes) -> bytes:
    """Encode one message (str, bytes, bool and int header values), CRCs included.

    Used by tests and by anything that serves a Bedrock-shaped stream."""
    encoded = b"".join(_encode_header(name, value) for name, value in headers.items())
    total = _PRELUDE + len(encoded) + len(payload) + _TRAILER
    head = struct.pack(">II", total, len(encoded))
    body = head + struct.pack(">I", zlib.crc32(head)) + encoded + payload
    return body + struct.pack(">I", zlib.crc32(body))


def _encode_header(name: str, value: Any) -> bytes:
    raw_name = name.encode("utf-8")
    prefix = struct.pack(">B", len(raw_name)) + raw_name
    if isinstance(value, bool):
        return prefix + struct.pack(">B", _BOOL_TRUE if value else _BOOL_FALSE)
    if isinstance(value, int):
        return prefix + struct.pack(">Bi", _INT, value)
    if isinstance(value, bytes):
        return prefix + struct.pack(">BH", _BYTES, len(value)) + value
    raw = str(value).encode("utf-8")
    return prefix + struct.pack(">BH", _STRING, len(raw)) + raw
