"""Every encoded response parses back into the turn it encodes, for all five APIs,
streaming and not: through the adapter module's ``parse_response`` and through the real
provider class streaming over ``httpx2.MockTransport``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from wire_support import MODE_IDS, MODES, make_provider, one_call

from openprogram.providers import parse_response
from openprogram.types import AssistantMessage, TextContent, ThinkingContent, Usage
from openprogram_sim.models import Turn
from openprogram_sim.wire import (
    APIS,
    ScriptedWire,
    WireEncodeError,
    WireResponse,
    as_carried,
    encode,
)

USAGE = {"input": 120, "output": 45, "cache_read": 30, "cache_write": 7, "reasoning": 11}
LONG = "Tides rise and fall twice a day because the moon pulls on the oceans — ünïcödé ✓ 🌊. "

TURNS: dict[str, dict[str, Any]] = {
    "text": {"text": "Hello there."},
    "long text, several pieces": {"text": LONG * 3, "usage": USAGE},
    "empty reply": {},
    "thinking and text": {"thinking": "Let me think this through carefully.", "text": "42."},
    "thinking only": {"thinking": "Nothing to say."},
    "one call": {"tool_calls": [{"search": {"q": "tides"}}]},
    "call with empty arguments text": {"tool_calls": [{"name": "now", "arguments": ""}]},
    "several calls with text": {
        "text": "Looking these up.",
        "tool_calls": [
            {"search": {"q": "a"}},
            {"lookup": {"id": 7, "deep": {"nested": [1, 2, {"x": None}]}}},
            {"now": {}},
        ],
        "usage": USAGE,
    },
    "call with unicode, long arguments": {
        "tool_calls": [{"write": {"text": LONG * 2, "tags": ["ä", "✓"]}}],
    },
    "call with explicit id": {"tool_calls": [{"name": "search", "arguments": {}, "id": "my_id"}]},
    "thinking, text and a call": {
        "thinking": "The user wants the weather; call the tool.",
        "text": "Checking.",
        "tool_calls": [{"weather": {"city": "Oslo"}}],
        "usage": USAGE,
    },
    "length stop, text": {"text": "I was cut of", "stop_reason": "length", "usage": USAGE},
    "length stop with a call": {
        "tool_calls": [{"search": {"q": "x"}}],
        "stop_reason": "length",
    },
    "explicit stop": {"text": "done", "stop_reason": "stop"},
    "explicit toolUse": {"tool_calls": [{"search": {"q": "x"}}], "stop_reason": "toolUse"},
    "error, no content": {"stop_reason": "error", "error": "the upstream model crashed"},
    "error after content": {
        "text": "Now cleaning up.",
        "tool_calls": [{"search": {"q": "b"}}],
        "stop_reason": "error",
        "error": "stream interrupted: connection reset",
    },
}


def _expected_arguments(turn: Turn) -> list[Any]:
    # What every parser makes of the arguments text (empty text is {}).
    return [json.loads(c.json_text) if c.json_text.strip() else {} for c in turn.tool_calls]


def _thinking(message: AssistantMessage) -> str:
    return "".join(b.thinking for b in message.content if isinstance(b, ThinkingContent))


def _kinds(message: AssistantMessage) -> list[str]:
    """The block kinds in order, empty text blocks left out."""
    return [
        b.type
        for b in message.content
        if not (isinstance(b, TextContent) and not b.text)
        and not (isinstance(b, ThinkingContent) and not b.thinking)
    ]


def assert_matches_turn(message: AssistantMessage, turn: Turn, api: str) -> None:
    """``message`` (what an adapter parsed) holds exactly what ``turn`` says."""
    assert message.text == (turn.text or "")
    assert _thinking(message) == (turn.thinking or "")
    calls = message.tool_calls
    assert [c.name for c in calls] == [c.name for c in turn.tool_calls]
    assert [c.arguments for c in calls] == _expected_arguments(turn)
    for got, want in zip(calls, turn.tool_calls, strict=True):
        if want.id is not None:
            assert got.id == want.id
        else:  # the API's own id (made up by the adapter on Gemini): present, unique
            assert got.id
    assert len({c.id for c in calls}) == len(calls)
    expected_kinds = (
        (["thinking"] if turn.thinking else [])
        + (["text"] if turn.text else [])
        + ["toolCall"] * len(turn.tool_calls)
    )
    assert _kinds(message) == expected_kinds
    if turn.stop_reason == "error":
        assert message.stop_reason == "error"
        assert turn.error is not None and turn.error in (message.error_message or "")
    else:
        want_stop = turn.stop_reason or ("toolUse" if turn.tool_calls else "stop")
        assert message.stop_reason == want_stop, message.error_message
        assert message.error_message is None
    assert message.usage == (turn.usage or Usage())
    assert message.api == api


@pytest.mark.parametrize("name", list(TURNS))
@pytest.mark.parametrize(("api", "stream"), MODES, ids=MODE_IDS)
def test_parse_response_reads_back_the_turn(api: str, stream: bool, name: str) -> None:
    turn = Turn.coerce(TURNS[name])
    response = encode(api, turn, stream=stream, seq=3)
    message = parse_response(
        api, response.body, content_type=response.content_type, status=response.status
    )
    assert_matches_turn(message, as_carried(api, turn, stream=stream), api)


@pytest.mark.parametrize("name", list(TURNS))
@pytest.mark.parametrize(("api", "stream"), MODES, ids=MODE_IDS)
def test_provider_streams_back_the_turn(api: str, stream: bool, name: str) -> None:
    turn = Turn.coerce(TURNS[name])
    wire = ScriptedWire([turn], chunk_size=5)
    message = asyncio.run(one_call(make_provider(api, wire, stream=stream)))
    assert_matches_turn(message, as_carried(api, turn, stream=stream), api)
    assert wire.requests[0].api == api and wire.requests[0].stream is stream
    wire.assert_consumed()


@pytest.mark.parametrize("status", [400, 401, 429, 500, 503, 529])
@pytest.mark.parametrize("api", APIS)
def test_error_statuses_reach_the_adapter(api: str, status: int) -> None:
    turn = Turn(stop_reason="error", error="scripted failure text")
    wire = ScriptedWire([turn], error_status=status)
    message = asyncio.run(one_call(make_provider(api, wire, stream=True)))
    assert message.stop_reason == "error"
    assert f"HTTP {status}" in (message.error_message or "")
    assert "scripted failure text" in (message.error_message or "")
    if status == 429:
        assert "retry-after" in (message.error_message or "")


@pytest.mark.parametrize(("api", "stream"), MODES, ids=MODE_IDS)
def test_truncated_reply_is_an_error(api: str, stream: bool) -> None:
    turn = Turn(text="half a reply", fault="truncate")
    response = encode(api, turn, stream=stream)
    message = parse_response(
        api, response.body, content_type=response.content_type, status=response.status
    )
    assert message.stop_reason == "error"


@pytest.mark.parametrize(("api", "stream"), MODES, ids=MODE_IDS)
def test_aborted_and_provider_faults_are_not_encodable(api: str, stream: bool) -> None:
    with pytest.raises(WireEncodeError, match="no server response produces it"):
        encode(api, {"text": "x", "stop_reason": "aborted"}, stream=stream)
    for fault in ("raise", "hang"):
        with pytest.raises(WireEncodeError, match=fault):
            encode(api, {"text": "x", "fault": fault}, stream=stream)


# Which wires carry arguments as text (anything goes) and which as a JSON object.
TEXT_ARGUMENTS = {
    ("openai-chat", True),
    ("openai-chat", False),
    ("openai-responses", True),
    ("openai-responses", False),
    ("anthropic", True),
    ("bedrock", True),
}


@pytest.mark.parametrize("raw", ['["a", "b"]', '{"q": "unterminated'])
@pytest.mark.parametrize(("api", "stream"), MODES, ids=MODE_IDS)
def test_arguments_that_are_not_an_object(api: str, stream: bool, raw: str) -> None:
    turn = Turn.coerce({"tool_calls": [{"name": "search", "arguments": raw}]})
    if (api, stream) not in TEXT_ARGUMENTS:
        with pytest.raises(WireEncodeError, match="JSON object"):
            encode(api, turn, stream=stream)
        return
    response = encode(api, turn, stream=stream)
    message = parse_response(
        api, response.body, content_type=response.content_type, status=response.status
    )
    # Parsed like the scripted model does: JSON when it parses, else the raw text.
    try:
        expected: Any = json.loads(raw)
    except ValueError:
        expected = raw
    assert [c.arguments for c in message.tool_calls] == [expected]


@pytest.mark.parametrize("api", ["openai-responses", "gemini"])
def test_stop_values_the_wire_cannot_say(api: str) -> None:
    # These APIs have no tool-use stop value: the adapter infers it from the calls.
    with pytest.raises(WireEncodeError, match="no tool-use stop value"):
        encode(api, {"text": "x", "stop_reason": "toolUse"})
    with pytest.raises(WireEncodeError, match="no tool-use stop value"):
        encode(api, {"tool_calls": [{"f": {}}], "stop_reason": "stop"})


def test_unknown_api() -> None:
    with pytest.raises(ValueError, match="unknown api 'cohere'"):
        encode("cohere", "hi")


def test_encoding_is_deterministic() -> None:
    turn = TURNS["thinking, text and a call"]
    for api in APIS:
        for stream in (True, False):
            assert encode(api, turn, stream=stream).body == encode(api, turn, stream=stream).body


@pytest.mark.parametrize("size", [1, 2, 7])
@pytest.mark.parametrize("api", APIS)
def test_streams_split_at_odd_byte_offsets(api: str, size: int) -> None:
    # Served in pieces cut anywhere: inside UTF-8 sequences, JSON, CRLF and frame headers.
    turn = Turn.coerce(
        {
            "thinking": "ünï think 🌊 " * 3,
            "text": "Hello ✓ wörld\r\n " * 4,
            "tool_calls": [{"search": {"q": "ä🌊"}}, {"x": {"k": [1, 2]}}],
            "usage": {"input": 5, "output": 9},
        }
    )
    whole = encode(api, turn)
    body = whole.body
    split = WireResponse(
        whole.status, whole.headers, [body[i : i + size] for i in range(0, len(body), size)]
    )
    message = asyncio.run(one_call(make_provider(api, ScriptedWire([split]), stream=True)))
    assert_matches_turn(message, as_carried(api, turn), api)
