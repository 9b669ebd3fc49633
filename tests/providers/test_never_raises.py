"""``stream()`` never raises: every failure is an ``error`` stop with a useful message
(issue 11, item 7), and an error text is cut however long the provider's message is."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

import httpx2
import pytest

from openprogram.errors import ConfigurationError
from openprogram.providers import parse_response

DEEP = "[" * 100_000 + "]" * 100_000  # valid JSON, nested far past the recursion limit
MAX_ERROR_TEXT = 1000  # the documented cap on an error message (docs/limits.md)
HUGE = "overloaded " * 500_000  # a 5.5 MB message

# One event of each API whose data is the deep JSON.
DEEP_EVENT = {
    "openai-chat": "message",
    "openai-responses": "response.output_text.delta",
    "anthropic": "content_block_delta",
    "gemini": "message",
    "bedrock": "contentBlockDelta",
}


def _stream_run(kit: Any, api: str, body: bytes, **options: Any) -> Any:
    return kit.run(
        lambda c: kit.provider(api, c, **options),
        lambda r: kit.response([body], content_type=kit.STREAM_TYPES[api]),
    )


def test_deeply_nested_json_in_a_data_line_is_an_error(kit: Any, each_api: str) -> None:
    body = kit.stream_lines(each_api, (DEEP_EVENT[each_api], DEEP))
    run = _stream_run(kit, each_api, body)
    assert [e.type for e in run.events] == ["start", "error"]
    assert run.message.stop_reason == "error"
    assert "nested too deeply" in (run.message.error_message or "")


def test_deeply_nested_tool_arguments_are_kept_as_text(kit: Any) -> None:
    """Arguments are parsed when the call closes, after the data line itself parsed."""
    call = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": DEEP}}
    chunks = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    lines = [("message", json.dumps(c)) for c in chunks] + [("message", "[DONE]")]
    run = _stream_run(kit, "openai-chat", kit.stream_lines("openai-chat", *lines))
    assert run.events[-1].type == "done"
    (tool_call,) = run.message.tool_calls
    assert tool_call.arguments == DEEP  # the loop tells the model it is not an object


def _frame_with_header(raw_headers: bytes, payload: bytes) -> bytes:
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw_headers))
    body = prelude + struct.pack(">I", zlib.crc32(prelude)) + raw_headers + payload
    return body + struct.pack(">I", zlib.crc32(body))


def test_a_short_uuid_header_on_bedrock_is_an_error(kit: Any) -> None:
    name = b":message-id"
    header = struct.pack(">B", len(name)) + name + bytes([9]) + b"\x01\x02\x03"  # 3 of 16
    frame = _frame_with_header(header, b"{}")
    run = _stream_run(kit, "bedrock", frame)
    assert [e.type for e in run.events] == ["start", "error"]
    assert "Bedrock event stream is corrupt" in (run.message.error_message or "")


def test_a_key_with_a_non_ascii_character_is_refused_without_showing_it(
    kit: Any, each_api: str
) -> None:
    key = "sk-caf\u00e9-not-a-real-key-0042"
    with pytest.raises(ConfigurationError, match="non-ASCII") as info:
        kit.provider(each_api, None, key=key)
    assert "caf" not in str(info.value) and "0042" not in str(info.value)


def test_a_non_ascii_header_value_is_an_error_event(kit: Any, each_api: str) -> None:
    run = kit.run(
        lambda c: kit.provider(each_api, c, headers={"x-user": "Jos\u00e9"}),
        lambda r: httpx2.Response(500),
    )
    assert [e.type for e in run.events] == ["start", "error"]
    assert "could not build the request" in (run.message.error_message or "")


def test_an_unexpected_exception_below_the_adapter_is_an_error_event(
    kit: Any, each_api: str
) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise RuntimeError("the transport broke in a new way")

    run = kit.run(lambda c: kit.provider(each_api, c), handler)
    assert [e.type for e in run.events] == ["start", "error"]
    text = run.message.error_message or ""
    assert "RuntimeError: the transport broke in a new way" in text


def test_a_huge_json_error_message_is_cut(kit: Any, each_api: str) -> None:
    body = {"error": {"message": HUGE, "type": "overloaded_error"}, "message": HUGE}
    run = kit.run(lambda c: kit.provider(each_api, c), lambda r: httpx2.Response(503, json=body))
    text = run.message.error_message or ""
    assert text.startswith(f"{kit.provider_class(each_api).label} API error: HTTP 503")
    assert "overloaded overloaded" in text
    assert len(text) <= MAX_ERROR_TEXT


def test_a_huge_error_inside_a_200_stream_is_cut(kit: Any, each_api: str) -> None:
    run = _stream_run(kit, each_api, kit.stream_error(each_api, "overloaded_error", HUGE))
    text = run.message.error_message or ""
    assert run.message.stop_reason == "error"
    assert "overloaded overloaded" in text
    assert len(text) <= MAX_ERROR_TEXT


def test_a_huge_error_in_a_recorded_body_is_cut(each_api: str) -> None:
    body = json.dumps({"error": {"message": HUGE, "code": 503}, "message": HUGE})
    message = parse_response(each_api, body, content_type="application/json", status=503)
    assert message.stop_reason == "error"
    assert len(message.error_message or "") <= MAX_ERROR_TEXT
