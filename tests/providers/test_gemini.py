"""The Gemini adapter: recorded traffic, request shapes, and every failure path."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram.errors import ConfigurationError
from openprogram.events import ProviderEvent
from openprogram.providers import gemini
from openprogram.providers.base import Context, StreamOptions
from openprogram.providers.builder import MessageBuilder
from openprogram.tools._tool import ToolSpec
from openprogram.types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance" / "gemini"
FILES = sorted(CONFORMANCE.glob("*.json"))
KEY = "gk-test-secret-0123456789"
SSE_HEADERS = {"content-type": "text/event-stream"}
WEATHER = ToolSpec("get_weather", "Weather.", {"type": "object", "properties": {}})


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _summary(message: AssistantMessage) -> dict[str, Any]:
    """The fields of the conformance ``expected`` object, from our message."""
    thinking = [b.thinking for b in message.content if isinstance(b, ThinkingContent)]
    usage = message.usage
    return {
        "text": message.text,
        "thinking": "".join(thinking) or None,
        "tool_calls": [
            {"id": None, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ],
        "stop_reason": message.stop_reason,
        "usage": {
            "input": usage.input,
            "output": usage.output,
            "cache_read": usage.cache_read,
            "cache_write": usage.cache_write,
            "reasoning": usage.reasoning,
        },
        "text_blocks": [b.text for b in message.content if isinstance(b, TextContent) and b.text],
        "thinking_blocks": [t for t in thinking if t],
    }


def _expected(expected: dict[str, Any]) -> dict[str, Any]:
    picked = {k: expected[k] for k in ("text", "thinking", "tool_calls", "stop_reason")}
    picked["usage"] = {"reasoning": 0, **expected["usage"]}
    picked["text_blocks"] = expected["text_blocks"]
    picked["thinking_blocks"] = expected["thinking_blocks"]
    return picked


# --------------------------------------------------------------------------- conformance


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_recorded_response_parses_like_the_official_sdk(path: Path) -> None:
    data = _load(path)
    response = data["response"]
    message = gemini.parse_response(
        response["body"], content_type=response["content_type"], status=response["status"]
    )
    assert _summary(message) == _expected(data["expected"])
    assert message.api == "gemini"
    signed = [b for b in message.content if getattr(b, "signature", None)]
    assert len(signed) == data["expected"].get("thought_signatures", 0)
    if message.stop_reason == "error":
        assert message.error_message
        if "error" in data["expected"]:
            assert data["expected"]["error"]["message"] in message.error_message


def test_made_up_call_ids_are_unique_and_stable_per_response() -> None:
    data = _load(CONFORMANCE / "google_instructions_only_with_tool_calls-i0.json")
    response = data["response"]
    first = gemini.parse_response(response["body"], content_type=response["content_type"])
    again = gemini.parse_response(response["body"], content_type=response["content_type"])
    ids = [c.id for c in first.tool_calls]
    assert len(set(ids)) == 3 and all(ids)
    assert ids == [c.id for c in again.tool_calls]


STREAMS = [p for p in FILES if _load(p)["stream"]]


@settings(max_examples=40, deadline=None)
@given(
    path=st.sampled_from(STREAMS),
    cuts=st.lists(st.integers(min_value=0, max_value=20_000), max_size=30),
)
def test_stream_parse_does_not_depend_on_chunk_boundaries(path: Path, cuts: list[int]) -> None:
    response = _load(path)["response"]
    body = response["body"].encode()
    points = sorted({c % (len(body) + 1) for c in cuts})
    bounds = [0, *points, len(body)]
    parser = gemini._GeminiParser(MessageBuilder(api="gemini", model=""), "text/event-stream")
    for a, b in itertools.pairwise(bounds):
        parser.feed(body[a:b])
    parser.finish()
    whole = gemini.parse_response(response["body"], content_type="text/event-stream")
    assert _summary(parser.builder.message) == _summary(whole)


# --------------------------------------------------------------------------- requests


@pytest.mark.parametrize(
    ("case", "choice"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("list_single", {"type": "function", "name": "get_weather"}),
        ("none_with_output", {"type": "function", "name": "final_result"}),
    ],
)
def test_tool_choice_fields_equal_what_the_real_api_accepted(case: str, choice: Any) -> None:
    recorded = _load(CONFORMANCE / f"tool_choice_{case}-i0.json")["request"]["body"]
    fields = gemini.tool_choice_fields(choice, None)
    assert fields == {"toolConfig": recorded["toolConfig"]}


@pytest.mark.parametrize("choice", ["auto", "required", "none", {"type": "function", "name": "f"}])
def test_parallel_flag_cannot_be_expressed_and_is_ignored(choice: Any) -> None:
    fields = gemini.tool_choice_fields(choice, None)
    assert gemini.tool_choice_fields(choice, False) == fields
    assert gemini.tool_choice_fields(choice, True) == fields


def test_invalid_tool_choice_says_what_is_allowed() -> None:
    with pytest.raises(ValueError, match="'auto', 'required', 'none'"):
        gemini.tool_choice_fields("sometimes", None)  # type: ignore[arg-type]


def _history() -> list[Any]:
    reply = AssistantMessage(
        [
            ThinkingContent("let me see", signature="sig-think"),
            TextContent("Checking."),
            ToolCall("call_1", "get_weather", {"city": "Paris"}, signature="sig-call"),
            ToolCall("call_2", "get_weather", {"city": "Rome"}),
        ],
        api="gemini",
        stop_reason="toolUse",
    )
    return [
        UserMessage([TextContent("Weather?"), ImageContent("aGk=", "image/png")]),
        reply,
        ToolResultMessage("call_1", "get_weather", [TextContent("sunny")]),
        ToolResultMessage("call_2", "get_weather", [TextContent("boom")], is_error=True),
        UserMessage.of("And tomorrow?"),
    ]


def test_request_carries_history_tools_and_limits() -> None:
    context = Context("Be brief.", _history(), [WEATHER])
    options = StreamOptions(tool_choice="required", temperature=0.2)
    body = gemini.build_request(context, options, model="m", stream=True, max_tokens=64)
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Weather.",
                    "parametersJsonSchema": {"type": "object", "properties": {}},
                }
            ]
        }
    ]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert body["generationConfig"] == {"maxOutputTokens": 64, "temperature": 0.2}
    user, model, results = body["contents"]
    assert user == {
        "role": "user",
        "parts": [{"text": "Weather?"}, {"inlineData": {"mimeType": "image/png", "data": "aGk="}}],
    }
    assert model == {
        "role": "model",
        "parts": [
            {"text": "let me see", "thought": True, "thoughtSignature": "sig-think"},
            {"text": "Checking."},
            {
                "functionCall": {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1"},
                "thoughtSignature": "sig-call",
            },
            {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}, "id": "call_2"}},
        ],
    }
    # Both results and the steering text after them form one user turn, in call order.
    assert results == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": "call_1",
                    "name": "get_weather",
                    "response": {"output": "sunny"},
                }
            },
            {
                "functionResponse": {
                    "id": "call_2",
                    "name": "get_weather",
                    "response": {"error": "boom"},
                }
            },
            {"text": "And tomorrow?"},
        ],
    }


def test_no_tools_means_no_tool_config_and_option_max_tokens_wins() -> None:
    context = Context("", [UserMessage.of("hi")], [])
    body = gemini.build_request(
        context, StreamOptions(max_tokens=5), model="m", stream=False, max_tokens=99
    )
    assert body == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"maxOutputTokens": 5},
    }


def test_other_providers_signatures_and_failed_replies_are_not_sent() -> None:
    foreign = AssistantMessage(
        [ThinkingContent("hmm", signature="anthropic-sig"), ToolCall("t1", "f", {}, signature="x")],
        api="anthropic",
    )
    result = ToolResultMessage("t1", "f", [TextContent("ok")])
    failed = AssistantMessage([TextContent("half")], api="gemini", stop_reason="error")
    history = [UserMessage.of("a"), foreign, result, failed, UserMessage.of("b")]
    contents = gemini.build_request(
        Context("", history, []), StreamOptions(), model="m", stream=True, max_tokens=None
    )["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [{"functionCall": {"name": "f", "args": {}, "id": "t1"}}],
    }
    assert contents[-1]["parts"][-1] == {"text": "b"}
    assert not any(p.get("text") == "half" for c in contents for p in c["parts"])


# --------------------------------------------------------------------------- provider


def _sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


def _text_chunk(text: str, finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
    if finish:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 3},
        "responseId": "resp1",
    }


def _collect(
    handler: Callable[[httpx2.Request], Any],
    *,
    options: StreamOptions | None = None,
    **kwargs: Any,
) -> list[ProviderEvent]:
    async def run() -> list[ProviderEvent]:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
            provider = gemini.GeminiProvider(
                "gemini-2.5-flash", api_key=KEY, client=client, **kwargs
            )
            context = Context("", [UserMessage.of("hi")], [WEATHER])
            return [e async for e in provider.stream(context, options or StreamOptions())]

    return asyncio.run(run())


def test_streams_sse_with_the_key_in_a_header_only() -> None:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        body = _sse(_text_chunk("Hel"), _text_chunk("lo", "STOP"))
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    events = _collect(handler)
    assert [e.type for e in events] == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    final = events[-1]
    assert final.type == "done" and final.message.text == "Hello"
    assert final.message.usage.input == 7 and final.message.model == "gemini-2.5-flash"
    (request,) = seen
    assert request.url.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert request.url.params["alt"] == "sse" and KEY not in str(request.url)
    assert request.headers["x-goog-api-key"] == KEY
    assert json.loads(request.content)["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}


def test_function_call_streams_as_one_delta_of_json() -> None:
    chunk = {
        "candidates": [
            {
                "content": {"parts": [{"functionCall": {"name": "get_weather", "args": {"c": 1}}}]},
                "finishReason": "STOP",
            }
        ]
    }

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, content=_sse(chunk), headers={"content-type": "text/event-stream"}
        )

    events = _collect(handler)
    assert [e.type for e in events] == [
        "start",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    assert events[2].type == "toolcall_delta" and json.loads(events[2].delta) == {"c": 1}
    assert events[-1].type == "done" and events[-1].reason == "toolUse"


def test_non_streaming_uses_generate_content() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path.endswith(":generateContent") and not request.url.query
        return httpx2.Response(200, json=_text_chunk("ok", "STOP"))

    events = _collect(handler, stream=False)
    assert events[-1].type == "done" and events[-1].message.text == "ok"


@pytest.mark.parametrize(
    ("status", "headers", "needle"),
    [
        (400, {}, "HTTP 400 (INVALID_ARGUMENT): API key not valid"),
        (429, {"retry-after": "17"}, "retry-after: 17"),
        (500, {}, "HTTP 500"),
    ],
)
def test_http_errors_become_an_error_event(
    status: int, headers: dict[str, str], needle: str
) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        error = {
            "error": {"code": status, "message": "API key not valid", "status": "INVALID_ARGUMENT"}
        }
        return httpx2.Response(status, json=error, headers=headers)

    events = _collect(handler)
    final = events[-1]
    assert [e.type for e in events] == ["start", "error"]
    assert final.type == "error" and final.reason == "error"
    assert final.error.stop_reason == "error"
    assert needle in (final.error.error_message or "")
    assert KEY not in (final.error.error_message or "")


def test_error_object_inside_a_200_stream_is_an_error() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        error = {
            "error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}
        }
        body = _sse(_text_chunk("par"), error)
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    final = _collect(handler)[-1]
    assert final.type == "error"
    assert final.error.error_message == (
        "Gemini stream error (503 UNAVAILABLE): The model is overloaded."
    )
    assert final.error.text == "par"  # what arrived before the failure is kept


def test_stream_ending_without_a_finish_reason_is_an_error() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, content=_sse(_text_chunk("cut")), headers={"content-type": "text/event-stream"}
        )

    final = _collect(handler)[-1]
    assert final.type == "error"
    assert "ended before a finishReason" in (final.error.error_message or "")


def test_blocked_prompt_and_unparseable_chunks_are_errors() -> None:
    blocked = gemini.parse_response(
        '{"promptFeedback": {"blockReason": "SAFETY"}}', content_type="application/json"
    )
    assert blocked.stop_reason == "error"
    assert blocked.error_message == "Gemini blocked the prompt (blockReason SAFETY)"
    garbled = gemini.parse_response("data: {not json\r\n\r\n", content_type="text/event-stream")
    assert garbled.stop_reason == "error"
    assert "could not be parsed" in (garbled.error_message or "")


def test_transport_failure_is_an_error_event() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused")

    final = _collect(handler)[-1]
    assert final.type == "error" and "connection refused" in (final.error.error_message or "")


def test_cancel_mid_stream_gives_aborted() -> None:
    cancel = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield _sse(_text_chunk("first"))
        cancel.set()
        await asyncio.sleep(30)  # a stalled server: only cancellation can end this
        yield b""

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body(), headers={"content-type": "text/event-stream"})

    events = _collect(handler, options=StreamOptions(cancel=cancel))
    final = events[-1]
    assert final.type == "error" and final.reason == "aborted"
    assert final.error.stop_reason == "aborted" and final.error.text == "first"


# --------------------------------------------------------------------------- configuration


def test_missing_key_names_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        gemini.GeminiProvider("gemini-2.5-flash")
    # A custom base URL (a compatible server, the wire simulator) needs no key.
    provider = gemini.GeminiProvider("m", base_url="http://127.0.0.1:9/v1beta")
    assert provider.endpoint() == "http://127.0.0.1:9/v1beta/models/m:streamGenerateContent?alt=sse"


def test_key_comes_from_either_variable_and_never_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    provider = gemini.GeminiProvider("models/gemini-2.5-flash", stream=False)
    assert provider.auth_headers(KEY) == {"x-goog-api-key": KEY}
    assert provider._headers()["x-goog-api-key"] == KEY
    assert KEY not in repr(provider)
    assert provider.endpoint().endswith("/models/gemini-2.5-flash:generateContent")
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-first")
    assert gemini.GeminiProvider("m")._headers()["x-goog-api-key"] == "gemini-first"


def test_registry_resolves_gemini_and_google(monkeypatch: pytest.MonkeyPatch) -> None:
    from openprogram.providers import get_provider

    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    assert isinstance(get_provider("gemini:gemini-2.5-flash"), gemini.GeminiProvider)
    assert isinstance(get_provider("google:gemini-2.5-flash"), gemini.GeminiProvider)
