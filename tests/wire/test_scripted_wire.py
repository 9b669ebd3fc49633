"""ScriptedWire (serving, recording, failing loudly) and the framing of each wire."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest
from wire_support import make_provider, one_call, search_tool

from openprogram import Runtime, ToolRegistry
from openprogram.errors import ModelError
from openprogram.providers.eventstream import EventStreamDecoder
from openprogram_sim.wire import (
    APIS,
    ScriptedWire,
    WireResponse,
    encode,
    error_response,
    route,
    to_httpx,
)

CALLS = {"text": "Let me look.", "tool_calls": [{"search": {"q": "a"}}, {"fetch": {"url": "u"}}]}


def _sse_events(body: bytes) -> list[tuple[str | None, str]]:
    """(event name, data) per SSE event of a body (either line ending)."""
    events = []
    for block in body.decode().replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        name = None
        data = []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        events.append((name, "\n".join(data)))
    return events


# --------------------------------------------------------------------------- ScriptedWire


def _search(q: str) -> str:
    return "3 results"


SEARCH = search_tool(_search)


@pytest.mark.parametrize("api", APIS)
def test_a_call_beyond_the_script_fails_loudly(api: str) -> None:
    wire = ScriptedWire([{"tool_calls": [{"search": {"q": "a"}}]}])
    provider = make_provider(api, wire, stream=True)

    async def run() -> None:
        try:
            await Runtime(provider=provider, registry=ToolRegistry()).aexec("Go.", tools=[SEARCH])
        finally:
            await provider.client.aclose()

    with pytest.raises(ModelError, match=r"request #2 .* has no scripted turn; the script has 1"):
        asyncio.run(run())
    assert len(wire.errors) == 1 and "no scripted turn" in wire.errors[0]
    with pytest.raises(AssertionError, match="no scripted turn"):
        wire.assert_consumed()


def test_requests_are_recorded_with_their_bodies() -> None:
    wire = ScriptedWire(["Hello."])
    message = asyncio.run(one_call(make_provider("anthropic", wire, stream=True)))
    assert message.text == "Hello."
    (request,) = wire.requests
    assert request.index == 1 and request.api == "anthropic" and request.stream is True
    assert request.method == "POST" and request.url == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == "<redacted>"  # credentials are masked
    assert request.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]
    assert request.body["model"] == "claude-sonnet-4-5"
    wire.assert_consumed()


def test_the_model_name_comes_from_the_request() -> None:
    wire = ScriptedWire(["a", "b"])
    url = "https://x/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    gemini = wire.respond("POST", url, b"{}")
    assert json.loads(_sse_events(gemini.body)[0][1])["modelVersion"] == "gemini-2.5-pro"
    chat = wire.respond("POST", "https://x/v1/chat/completions", b'{"model": "gpt-x"}')
    assert json.loads(chat.body)["model"] == "gpt-x"
    wire.assert_consumed()


def test_unconsumed_turns_fail_assert_consumed() -> None:
    wire = ScriptedWire(["one", "two"])
    asyncio.run(one_call(make_provider("openai-chat", wire, stream=True)))
    assert [t.text for t in wire.unconsumed] == ["two"]  # type: ignore[union-attr]
    with pytest.raises(AssertionError, match="1 of 2 scripted turns were never requested"):
        wire.assert_consumed()


def test_unknown_path_is_a_recorded_404() -> None:
    wire = ScriptedWire(["x"])
    response = wire.respond("POST", "http://127.0.0.1/v1/embeddings", b'{"input": "x"}')
    assert response.status == 404
    assert b"matches no provider API path" in response.body
    assert wire.requests[0].api is None and wire.errors
    assert [t.text for t in wire.unconsumed] == ["x"]  # type: ignore[union-attr]


def test_an_unencodable_turn_is_a_recorded_500() -> None:
    wire = ScriptedWire([{"text": "x", "stop_reason": "aborted"}])
    message = asyncio.run(one_call(make_provider("openai-responses", wire, stream=True)))
    assert message.stop_reason == "error"
    assert "cannot be encoded" in (message.error_message or "")
    assert "cannot be encoded" in wire.errors[0]


def test_a_ready_response_is_served_as_is() -> None:
    overloaded = error_response("anthropic", 529, "Overloaded")
    wire = ScriptedWire([overloaded, "fine"])
    first = asyncio.run(one_call(make_provider("anthropic", wire, stream=True)))
    second = asyncio.run(one_call(make_provider("anthropic", wire, stream=True)))
    assert first.error_message == "Anthropic API error: HTTP 529 (overloaded_error): Overloaded"
    assert second.text == "fine"
    wire.assert_consumed()


def test_chunks_arrive_one_by_one_and_sync_clients_work() -> None:
    response = encode("openai-chat", {"text": "abcdefghij"}, chunk_size=2)
    assert len(response.chunks) > 5
    with (
        httpx2.Client(
            transport=ScriptedWire([{"text": "abcdefghij"}], chunk_size=2).transport
        ) as c,
        c.stream("POST", "https://api.openai.com/v1/chat/completions", json={"stream": True}) as r,
    ):
        received = list(r.iter_raw())
    assert received == response.chunks

    async def read() -> list[bytes]:
        r = to_httpx(response)
        return [chunk async for chunk in r.aiter_raw()]

    assert asyncio.run(read()) == response.chunks


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        ("/v1/chat/completions", {"stream": True}, ("openai-chat", True)),
        ("/v1/chat/completions", {}, ("openai-chat", False)),
        ("/v1/responses", {"stream": True}, ("openai-responses", True)),
        ("/v1/messages?beta=true", {"stream": False}, ("anthropic", False)),
        ("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", {}, ("gemini", True)),
        ("/v1beta/models/gemini-2.5-flash:generateContent", {}, ("gemini", False)),
        ("/model/us.amazon.nova-micro-v1%3A0/converse-stream", {}, ("bedrock", True)),
        ("/model/us.amazon.nova-micro-v1%3A0/converse", {}, ("bedrock", False)),
        ("/v1/embeddings", {}, None),
    ],
)
def test_route(path: str, body: Any, expected: Any) -> None:
    assert route(path, body) == expected


# --------------------------------------------------------------------------- framing


def test_openai_chat_stream_framing() -> None:
    response = encode("openai-chat", CALLS, chunk_size=4)
    assert response.content_type == "text/event-stream; charset=utf-8"
    events = _sse_events(response.body)
    assert all(name is None for name, _ in events)  # data: lines only
    assert response.body.endswith(b"data: [DONE]\n\n")
    chunks = [json.loads(d) for _, d in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    openings = [c for c in calls if "id" in c]
    assert [(c["index"], c["function"]["name"]) for c in openings] == [(0, "search"), (1, "fetch")]
    assert all(set(c) == {"index", "function"} for c in calls if "id" not in c)
    by_index = {0: "", 1: ""}
    for c in calls:
        by_index[c["index"]] += c["function"]["arguments"]
    assert by_index == {0: '{"q": "a"}', 1: '{"url": "u"}'}
    assert len([c for c in calls if c["index"] == 0]) > 2  # arguments came in pieces
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 0


def test_openai_responses_stream_framing() -> None:
    response = encode("openai-responses", {"thinking": "hm", **CALLS})
    events = _sse_events(response.body)
    names = [name for name, _ in events]
    datas = [json.loads(d) for _, d in events]
    assert [d["type"] for d in datas] == names
    assert [d["sequence_number"] for d in datas] == list(range(len(datas)))
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed"
    added = [d["item"]["type"] for d in datas if d["type"] == "response.output_item.added"]
    assert added == ["reasoning", "message", "function_call", "function_call"]
    assert "response.function_call_arguments.delta" in names
    final = datas[-1]["response"]
    assert final["status"] == "completed"
    assert [i["call_id"] for i in final["output"] if i["type"] == "function_call"] == [
        "call_wire1_0",
        "call_wire1_1",
    ]


def test_responses_length_stop_is_incomplete() -> None:
    events = _sse_events(encode("openai-responses", {"text": "x", "stop_reason": "length"}).body)
    name, data = events[-1]
    assert name == "response.incomplete"
    assert json.loads(data)["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_anthropic_stream_framing() -> None:
    response = encode("anthropic", {"thinking": "hm", **CALLS})
    names = [name for name, _ in _sse_events(response.body)]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    starts = [
        json.loads(d)["content_block"]["type"]
        for n, d in _sse_events(response.body)
        if n == "content_block_start"
    ]
    assert starts == ["thinking", "text", "tool_use", "tool_use"]
    delta = json.loads(_sse_events(response.body)[-2][1])
    assert delta["delta"]["stop_reason"] == "tool_use"


def test_gemini_stream_framing() -> None:
    response = encode("gemini", CALLS)
    assert response.content_type == "text/event-stream"
    assert all(chunk.endswith(b"\r\n\r\n") for chunk in response.chunks)
    assert b"[DONE]" not in response.body
    chunks = [json.loads(d) for _, d in _sse_events(response.body)]
    last = chunks[-1]["candidates"][0]
    assert last["finishReason"] == "STOP"
    assert [p["functionCall"] for p in last["content"]["parts"]] == [
        {"name": "search", "args": {"q": "a"}},  # no id: the Gemini API sends none
        {"name": "fetch", "args": {"url": "u"}},
    ]
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])


def test_bedrock_stream_framing() -> None:
    response = encode("bedrock", {"thinking": "hm", **CALLS})
    assert response.content_type == "application/vnd.amazon.eventstream"
    frames = EventStreamDecoder().feed(response.body)  # checks both CRCs of every frame
    assert len(frames) == len(response.chunks)
    kinds = [f.headers[":event-type"] for f in frames]
    assert kinds[0] == "messageStart" and kinds[-2:] == ["messageStop", "metadata"]
    assert kinds.count("contentBlockStart") == 2  # tool use only; text has none
    payloads = [json.loads(f.payload) for f in frames]
    assert all("p" in p for p in payloads)  # the padding field real events carry
    assert payloads[-2]["stopReason"] == "tool_use"


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("api", "status", "fragment", "header"),
    [
        ("openai-chat", 500, '"type":"server_error"', None),
        ("openai-responses", 429, '"code":"rate_limit_exceeded"', ("retry-after", "1")),
        ("anthropic", 529, '"type":"overloaded_error"', None),
        ("gemini", 503, '"status":"UNAVAILABLE"', None),
        ("bedrock", 429, '"message":"boom"', ("x-amzn-errortype", "ThrottlingException:")),
    ],
)
def test_http_errors_in_each_providers_shape(
    api: str, status: int, fragment: str, header: tuple[str, str] | None
) -> None:
    response = encode(api, {"stop_reason": "error", "error": "boom"}, error_status=status)
    assert response.status == status
    assert fragment in response.body.decode()
    assert "boom" in response.body.decode()
    if header is not None:
        assert response.headers[header[0]].startswith(header[1])


def test_in_stream_errors_follow_the_content() -> None:
    turn = {"text": "partial", "stop_reason": "error", "error": "Overloaded"}
    chat = encode("openai-chat", turn)
    assert chat.status == 200 and b"[DONE]" not in chat.body
    assert json.loads(_sse_events(chat.body)[-1][1])["error"]["message"] == "Overloaded"
    responses = _sse_events(encode("openai-responses", turn).body)
    assert responses[-1][0] == "response.failed"
    anthropic = _sse_events(encode("anthropic", turn, error_status=529).body)
    assert anthropic[-1] == (
        "error",
        '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
    )
    assert "message_stop" not in [n for n, _ in anthropic]
    gemini = _sse_events(encode("gemini", turn).body)
    assert json.loads(gemini[-1][1])["error"]["status"] == "INTERNAL"
    (*_, last) = EventStreamDecoder().feed(encode("bedrock", turn, error_status=429).body)
    assert last.headers[":message-type"] == "exception"
    assert last.headers[":exception-type"] == "throttlingException"


def test_error_mode_http_while_streaming() -> None:
    turn = {"text": "partial", "stop_reason": "error", "error": "nope"}
    assert encode("anthropic", turn, error_mode="http").status == 500
    with pytest.raises(ValueError, match="needs stream=True"):
        encode("anthropic", turn, stream=False, error_mode="stream")


def test_wire_response_body_joins_chunks() -> None:
    response = WireResponse(200, {"content-type": "x"}, [b"a", b"b"])
    assert response.body == b"ab" and response.content_type == "x"


SECRET = "sk-" + "live-" + "0123456789abcdef" + "ABCDEF0123456789"  # no key-shaped literal

ENV_KEYS = {
    "openai-chat": ("OPENAI_API_KEY", "authorization", "Bearer <redacted>"),
    "openai-responses": ("OPENAI_API_KEY", "authorization", "Bearer <redacted>"),
    "anthropic": ("ANTHROPIC_API_KEY", "x-api-key", "<redacted>"),
    "gemini": ("GEMINI_API_KEY", "x-goog-api-key", "<redacted>"),
    "bedrock": ("AWS_BEARER_TOKEN_BEDROCK", "authorization", "Bearer <redacted>"),
}


@pytest.mark.parametrize("api", list(ENV_KEYS))
def test_a_key_from_the_environment_is_masked_in_what_the_wire_records(
    api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openprogram.providers import get_provider

    variable, header, shown = ENV_KEYS[api]
    monkeypatch.setenv(variable, SECRET)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    wire = ScriptedWire(["Hello."])
    model = {"openai-chat": "openai:gpt-4o-mini", "openai-responses": "openai-responses:gpt-4.1",
             "anthropic": "anthropic:claude-sonnet-4-5", "gemini": "gemini:gemini-2.5-flash",
             "bedrock": "bedrock:us.amazon.nova-micro-v1:0"}[api]  # fmt: skip
    provider = get_provider(model, client=wire.client())  # no api_key=: the environment's
    assert asyncio.run(one_call(provider)).text == "Hello."
    (request,) = wire.requests
    assert request.headers[header] == shown
    for text in (repr(wire.requests), str(request.headers), request.url):
        assert SECRET not in text and SECRET[3:20] not in text


def test_a_key_in_the_query_string_is_masked() -> None:
    wire = ScriptedWire(["Hello."])
    url = f"https://generativelanguage.googleapis.com/v1beta/models/g:generateContent?key={SECRET}&alt=x"
    with httpx2.Client(transport=wire.transport) as client:
        client.post(url, json={"contents": []}, headers={"Cookie": f"session={SECRET}"})
    (request,) = wire.requests
    assert request.url.endswith("?key=<redacted>&alt=x")
    assert request.headers["cookie"] == "<redacted>"
    assert SECRET not in repr(request)
