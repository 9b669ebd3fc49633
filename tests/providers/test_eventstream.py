"""The AWS event-stream decoder: real recorded bodies, any chunking, every corruption."""

from __future__ import annotations

import base64
import itertools
import json
import struct
import uuid
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram.providers.eventstream import (
    EventStreamDecoder,
    EventStreamError,
    EventStreamMessage,
    encode_message,
)

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance" / "bedrock"


def _recorded_streams() -> dict[str, bytes]:
    bodies = {}
    for path in sorted(CONFORMANCE.glob("*.json")):
        response = json.loads(path.read_text())["response"]
        if "body_base64" in response:
            bodies[path.name] = base64.b64decode(response["body_base64"])
    return bodies


STREAMS = _recorded_streams()


def _decode_in(chunks: list[bytes]) -> list[EventStreamMessage]:
    decoder = EventStreamDecoder()
    messages = [m for chunk in chunks for m in decoder.feed(chunk)]
    decoder.close()
    return messages


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def test_every_recorded_stream_decodes_like_botocore() -> None:
    from botocore.eventstream import EventStreamBuffer

    assert len(STREAMS) == 5
    for name, body in STREAMS.items():
        reference = EventStreamBuffer()
        reference.add_data(body)
        expected = [(dict(m.headers), m.payload) for m in reference]
        got = [(m.headers, m.payload) for m in _decode_in([body])]
        assert got == expected, name
        assert got[0][0][":event-type"] == "messageStart"


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(STREAMS)),
    cuts=st.lists(st.integers(min_value=0, max_value=100_000), max_size=40),
)
def test_any_chunking_gives_the_same_messages(name: str, cuts: list[int]) -> None:
    body = STREAMS[name]
    assert _decode_in(_split(body, cuts)) == _decode_in([body])


def test_byte_by_byte_feeding_returns_each_message_once_complete() -> None:
    frame = encode_message({":event-type": "messageStop"}, b'{"stopReason":"end_turn"}')
    decoder = EventStreamDecoder()
    results = [decoder.feed(frame[i : i + 1]) for i in range(len(frame))]
    assert all(r == [] for r in results[:-1])
    assert results[-1] == [
        EventStreamMessage({":event-type": "messageStop"}, b'{"stopReason":"end_turn"}')
    ]
    assert decoder.pending == 0


def test_header_value_types_round_trip_or_decode() -> None:
    frame = encode_message(
        {"s": "text", "b": b"\x00\x01", "t": True, "f": False, "i": -7, ":message-type": "event"},
        b"",
    )
    (message,) = _decode_in([frame])
    assert message.headers == {
        "s": "text",
        "b": b"\x00\x01",
        "t": True,
        "f": False,
        "i": -7,
        ":message-type": "event",
    }
    assert message.message_type == "event"
    assert message.payload == b""


def _raw_frame(headers: bytes, payload: bytes) -> bytes:
    total = 12 + len(headers) + len(payload) + 4
    head = struct.pack(">II", total, len(headers))
    body = head + struct.pack(">I", zlib.crc32(head)) + headers + payload
    return body + struct.pack(">I", zlib.crc32(body))


def test_fixed_width_timestamp_and_uuid_headers_decode() -> None:
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    headers = (
        b"\x01a" + struct.pack(">Bb", 2, -1)
        + b"\x01b" + struct.pack(">Bh", 3, 300)
        + b"\x01c" + struct.pack(">Bq", 5, 2**40)
        + b"\x01d" + struct.pack(">Bq", 8, 1_700_000_000_000)
        + b"\x01e" + struct.pack(">B", 9) + ident.bytes
    )  # fmt: skip
    (message,) = _decode_in([_raw_frame(headers, b"{}")])
    assert message.headers == {"a": -1, "b": 300, "c": 2**40, "d": 1_700_000_000_000, "e": ident}


def test_absent_message_type_means_event() -> None:
    (message,) = _decode_in([encode_message({":event-type": "x"}, b"{}")])
    assert message.message_type == "event"


def test_corrupted_prelude_crc_is_a_clear_error() -> None:
    frame = bytearray(STREAMS["bedrock_model_iter_stream-i0.json"])
    frame[9] ^= 0xFF  # inside the prelude CRC
    with pytest.raises(EventStreamError, match="prelude CRC mismatch"):
        EventStreamDecoder().feed(bytes(frame))


def test_corrupted_payload_fails_the_message_crc() -> None:
    frame = bytearray(encode_message({":event-type": "x"}, b'{"text":"hello"}'))
    frame[-8] ^= 0x01  # a payload byte
    with pytest.raises(EventStreamError, match="message CRC mismatch"):
        EventStreamDecoder().feed(bytes(frame))


def test_valid_messages_before_a_corrupt_one_are_not_lost_silently() -> None:
    good = encode_message({":event-type": "a"}, b"{}")
    bad = bytearray(encode_message({":event-type": "b"}, b"{}"))
    bad[-1] ^= 0x01
    decoder = EventStreamDecoder()
    assert [m.headers[":event-type"] for m in decoder.feed(good)] == ["a"]
    with pytest.raises(EventStreamError, match="message CRC"):
        decoder.feed(bytes(bad))


def test_truncated_stream_is_reported_on_close() -> None:
    frame = encode_message({":event-type": "x"}, b"{}")
    decoder = EventStreamDecoder()
    assert decoder.feed(frame[:-3]) == []
    assert decoder.pending == len(frame) - 3
    with pytest.raises(EventStreamError, match="ended inside a message"):
        decoder.close()


def test_impossible_lengths_are_rejected_before_buffering() -> None:
    head = struct.pack(">II", 8, 0)  # shorter than the prelude and trailer themselves
    with pytest.raises(EventStreamError, match="length 8 is invalid"):
        EventStreamDecoder().feed(head + struct.pack(">I", zlib.crc32(head)))
    head = struct.pack(">II", 300_000, 200_000)
    with pytest.raises(EventStreamError, match="exceeds 128 KiB"):
        EventStreamDecoder().feed(head + struct.pack(">I", zlib.crc32(head)))


def test_header_running_past_its_section_is_malformed() -> None:
    headers = b"\x01s" + struct.pack(">BH", 7, 50) + b"short"
    with pytest.raises(EventStreamError, match="malformed event stream header"):
        _decode_in([_raw_frame(headers, b"")])


def test_unknown_header_type_is_named() -> None:
    with pytest.raises(EventStreamError, match="header value type 42"):
        _decode_in([_raw_frame(b"\x01x\x2a", b"")])
