"""The Bedrock adapter: recorded traffic, request shapes, auth, and every failure path."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

from openprogram.errors import ConfigurationError
from openprogram.events import ProviderEvent
from openprogram.providers import bedrock
from openprogram.providers.base import Context, StreamOptions
from openprogram.providers.eventstream import encode_message
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

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance" / "bedrock"
FILES = sorted(CONFORMANCE.glob("*.json"))
TOKEN = "bedrock-api-key-secret-0123456789"
MODEL = "us.amazon.nova-micro-v1:0"
STREAM_TYPE = "application/vnd.amazon.eventstream"
WEATHER = ToolSpec("get_weather", "Weather.", {"type": "object", "properties": {}})


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No real AWS configuration leaks in, and botocore never probes instance metadata."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFORMANCE / name).read_text())
    return data


def _body(response: dict[str, Any]) -> bytes | str:
    if "body_base64" in response:
        return base64.b64decode(response["body_base64"])
    return str(response["body"])


def _parse(name: str) -> AssistantMessage:
    response = _load(name)["response"]
    return bedrock.parse_response(
        _body(response), content_type=response["content_type"], status=response["status"]
    )


def _build(context: Context, options: StreamOptions) -> dict[str, Any]:
    return bedrock.build_request(context, options, model=MODEL, stream=True, max_tokens=None)


# --------------------------------------------------------------------------- conformance


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_recorded_response_parses_like_the_official_sdk(path: Path) -> None:
    expected = _load(path.name)["expected"]
    message = _parse(path.name)
    thinking = [b for b in message.content if isinstance(b, ThinkingContent)]
    assert message.text == expected["text"]
    assert ("".join(b.thinking for b in thinking) or None) == expected["thinking"]
    assert [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls] == (
        expected["tool_calls"]
    )
    assert message.stop_reason == expected["stop_reason"]
    usage = message.usage
    assert [usage.input, usage.output, usage.cache_read, usage.cache_write] == [
        expected["usage"][k] for k in ("input", "output", "cache_read", "cache_write")
    ]
    texts = [b.text for b in message.content if isinstance(b, TextContent) and b.text]
    assert texts == expected["text_blocks"]
    assert [b.thinking for b in thinking if b.thinking] == expected["thinking_blocks"]
    assert sum(b.redacted for b in thinking) == expected.get("redacted_thinking_blocks", 0)
    if "error" in expected:
        assert expected["error"]["message"] in (message.error_message or "")


def test_reasoning_signatures_and_redacted_data_are_kept() -> None:
    (block, _) = _parse("bedrock_model_thinking_part_stream-i0.json").content
    assert isinstance(block, ThinkingContent) and block.signature and not block.redacted
    redacted = _parse("bedrock_model_thinking_part_redacted_stream-i0.json").content[:2]
    assert all(isinstance(b, ThinkingContent) and b.redacted and b.signature for b in redacted)


@pytest.mark.parametrize(
    ("first", "tool"),
    [
        ("bedrock_anthropic_tool_with_thinking", "get_user_country"),
        ("bedrock_model_iter_stream", "get_temperature"),
    ],
)
def test_replaying_a_parsed_reply_builds_the_recorded_next_request(first: str, tool: str) -> None:
    recorded = _load(f"{first}-i1.json")["request"]["body"]
    reply = _parse(f"{first}-i0.json")
    user = UserMessage.of(recorded["messages"][0]["content"][0]["text"])
    result_block = recorded["messages"][2]["content"][0]["toolResult"]
    result = ToolResultMessage(
        result_block["toolUseId"], tool, [TextContent(result_block["content"][0]["text"])]
    )
    context = Context("", [user, reply, result], [WEATHER])
    body = bedrock.build_request(
        context, StreamOptions(), model=MODEL, stream=True, max_tokens=None
    )
    assert body["messages"] == recorded["messages"]


# --------------------------------------------------------------------------- requests


@pytest.mark.parametrize(
    ("case", "choice"),
    [
        ("auto", "auto"),
        ("required", "required"),
        ("list_single", {"type": "function", "name": "get_weather"}),
        ("none_with_output", {"type": "function", "name": "final_result"}),
    ],
)
def test_tool_choice_equals_what_the_real_api_accepted(case: str, choice: Any) -> None:
    recorded = _load(f"tool_choice_{case}-i0.json")["request"]["body"]
    fields = bedrock.tool_choice_fields(choice, None)
    assert fields == {"toolConfig": {"toolChoice": recorded["toolConfig"]["toolChoice"]}}


def test_none_sends_no_tool_config_like_the_recorded_request() -> None:
    recorded = _load("tool_choice_none-i0.json")["request"]["body"]
    assert bedrock.tool_choice_fields("none", None) == {}
    context = Context("", [UserMessage.of("What's the weather in Paris?")], [WEATHER])
    body = bedrock.build_request(
        context, StreamOptions(tool_choice="none"), model=MODEL, stream=False, max_tokens=None
    )
    assert "toolConfig" not in body and "toolConfig" not in recorded
    assert body["messages"] == recorded["messages"]


def _tool_history() -> list[Any]:
    reply = AssistantMessage(
        [
            ThinkingContent("hmm", signature="sig"),
            ThinkingContent("", signature="opaque", redacted=True),
            TextContent(""),
            TextContent("Checking."),
            ToolCall("tu_1", "get_weather", {"city": "Paris"}),
        ],
        api="bedrock",
        stop_reason="toolUse",
    )
    return [
        UserMessage([TextContent("Weather?"), ImageContent("aGk=", "image/jpeg")]),
        reply,
        ToolResultMessage("tu_1", "get_weather", [TextContent("no data")], is_error=True),
        UserMessage.of("Try again."),
    ]


def test_request_carries_history_tools_and_limits() -> None:
    options = StreamOptions(tool_choice={"type": "function", "name": "get_weather"}, max_tokens=9)
    context = Context("Be brief.", _tool_history(), [WEATHER, ToolSpec("bare")])
    body = bedrock.build_request(context, options, model=MODEL, stream=True, max_tokens=500)
    assert body["system"] == [{"text": "Be brief."}]
    assert body["inferenceConfig"] == {"maxTokens": 9}
    assert body["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "get_weather",
                    "description": "Weather.",
                    "inputSchema": {"json": {"type": "object", "properties": {}}},
                }
            },
            # Bedrock rejects an empty description, so none is sent.
            {"toolSpec": {"name": "bare", "inputSchema": {"json": ToolSpec("bare").parameters}}},
        ],
        "toolChoice": {"tool": {"name": "get_weather"}},
    }
    user, assistant, results = body["messages"]
    assert user["content"][1] == {"image": {"format": "jpeg", "source": {"bytes": "aGk="}}}
    assert assistant == {
        "role": "assistant",
        "content": [
            {"reasoningContent": {"reasoningText": {"text": "hmm", "signature": "sig"}}},
            {"reasoningContent": {"redactedContent": "opaque"}},
            {"text": "Checking."},
            {"toolUse": {"toolUseId": "tu_1", "name": "get_weather", "input": {"city": "Paris"}}},
        ],
    }
    # Converse needs alternating roles: the result and the steering text share one turn.
    assert results == {
        "role": "user",
        "content": [
            {
                "toolResult": {
                    "toolUseId": "tu_1",
                    "content": [{"text": "no data"}],
                    "status": "error",
                }
            },
            {"text": "Try again."},
        ],
    }


@pytest.mark.parametrize("tools", [[WEATHER], []])
def test_without_tool_config_past_tool_blocks_become_text(tools: list[ToolSpec]) -> None:
    context = Context("", _tool_history(), tools)
    body = bedrock.build_request(
        context, StreamOptions(tool_choice="none"), model=MODEL, stream=True, max_tokens=None
    )
    assert "toolConfig" not in body
    sent = json.dumps(body["messages"])
    assert "toolUse" not in sent and "toolResult" not in sent
    assert body["messages"][1]["content"][-1] == {
        "text": '[called tool get_weather (id tu_1) with {"city": "Paris"}]'
    }
    assert body["messages"][2]["content"][0] == {
        "text": "[result of tool get_weather (id tu_1) (error): no data]"
    }


def test_reasoning_of_other_providers_is_not_replayed() -> None:
    foreign = AssistantMessage(
        [ThinkingContent("hmm", signature="anthropic"), TextContent("hi")], api="anthropic"
    )
    context = Context("", [UserMessage.of("a"), foreign], [])
    body = bedrock.build_request(
        context, StreamOptions(), model=MODEL, stream=True, max_tokens=None
    )
    assert body["messages"][1] == {"role": "assistant", "content": [{"text": "hi"}]}
    assert "inferenceConfig" not in body and "system" not in body


@pytest.mark.parametrize("choice", ["auto", "required", "none", {"type": "function", "name": "f"}])
def test_parallel_flag_cannot_be_expressed_and_is_ignored(choice: Any) -> None:
    fields = bedrock.tool_choice_fields(choice, None)
    assert bedrock.tool_choice_fields(choice, False) == fields
    assert bedrock.tool_choice_fields(choice, True) == fields


# --------------------------------------------------------------------------- provider


def _event(event_type: str, payload: dict[str, Any]) -> bytes:
    headers = {":event-type": event_type, ":content-type": "application/json"}
    data = json.dumps({**payload, "p": "abcdefgh"}).encode()
    return encode_message({**headers, ":message-type": "event"}, data)


def _text_stream(*, stop: bool = True) -> list[bytes]:
    frames = [
        _event("messageStart", {"role": "assistant"}),
        _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hel"}}),
        _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "lo"}}),
        _event("contentBlockStop", {"contentBlockIndex": 0}),
    ]
    if stop:
        frames.append(_event("messageStop", {"stopReason": "end_turn"}))
        frames.append(_event("metadata", {"usage": {"inputTokens": 5, "outputTokens": 2}}))
    return frames


def _input(piece: str) -> dict[str, Any]:
    return {"toolUse": {"input": piece}}


def _exception(kind: str, payload: dict[str, Any]) -> bytes:
    headers = {":message-type": "exception", ":exception-type": kind}
    return encode_message(headers, json.dumps(payload).encode())


async def _aiter(
    chunks: list[bytes], then: Callable[[], Any] | None = None
) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk
    if then is not None:
        then()
        await asyncio.sleep(30)  # a stalled server: only cancellation ends this
        yield b""


def _stream_response(chunks: list[bytes], **kwargs: Any) -> httpx2.Response:
    body = _aiter(chunks, kwargs.pop("then", None))
    return httpx2.Response(200, headers={"content-type": STREAM_TYPE}, content=body, **kwargs)


def _collect(
    handler: Callable[[httpx2.Request], Any],
    *,
    options: StreamOptions | None = None,
    **kwargs: Any,
) -> list[ProviderEvent]:
    kwargs.setdefault("bearer_token", TOKEN)
    kwargs.setdefault("region", "us-west-2")

    async def run() -> list[ProviderEvent]:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
            provider = bedrock.BedrockProvider(MODEL, client=client, **kwargs)
            context = Context("", [UserMessage.of("hi")], [WEATHER])
            return [e async for e in provider.stream(context, options or StreamOptions())]

    return asyncio.run(run())


def test_streams_event_frames_with_a_bearer_token() -> None:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return _stream_response(_text_stream())

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
    assert final.message.usage.input == 5 and final.message.model == MODEL
    (request,) = seen
    assert str(request.url) == (
        "https://bedrock-runtime.us-west-2.amazonaws.com/model/us.amazon.nova-micro-v1%3A0"
        "/converse-stream"
    )
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["accept"] == STREAM_TYPE
    assert json.loads(request.content)["toolConfig"]["toolChoice"] == {"auto": {}}


def test_tool_input_pieces_stream_as_deltas() -> None:
    start = {"toolUse": {"toolUseId": "tu_9", "name": "get_weather"}}
    frames = [
        _event("messageStart", {"role": "assistant"}),
        _event("contentBlockStart", {"contentBlockIndex": 1, "start": start}),
        _event("contentBlockDelta", {"contentBlockIndex": 1, "delta": _input('{"ci')}),
        _event("contentBlockDelta", {"contentBlockIndex": 1, "delta": _input('ty": "Oslo"}')}),
        _event("contentBlockStop", {"contentBlockIndex": 1}),
        _event("messageStop", {"stopReason": "tool_use"}),
    ]  # fmt: skip
    events = _collect(lambda request: _stream_response(frames))
    assert [e.type for e in events][1:] == [
        "toolcall_start",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    final = events[-1]
    assert final.type == "done" and final.reason == "toolUse"
    assert final.message.tool_calls == [ToolCall("tu_9", "get_weather", {"city": "Oslo"})]


def test_non_streaming_uses_converse_and_json() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path.endswith("/converse")
        assert request.headers["accept"] == "application/json"
        reply = {
            "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
            "stopReason": "max_tokens",
            "usage": {"inputTokens": 1, "outputTokens": 1},
        }
        return httpx2.Response(200, json=reply)

    final = _collect(handler, stream=False)[-1]
    assert final.type == "done" and final.reason == "length" and final.message.text == "ok"


def test_exception_frame_inside_a_200_stream_is_an_error() -> None:
    frames = _text_stream(stop=False)[:3]
    frames.append(_exception("throttlingException", {"message": "Too many requests"}))
    events = _collect(lambda request: _stream_response(frames))
    final = events[-1]
    assert final.type == "error" and final.reason == "error"
    assert final.error.error_message == (
        "Bedrock stream error (throttlingException): Too many requests"
    )
    assert final.error.text == "Hello"  # what arrived before the failure is kept
    assert [e.type for e in events].count("text_end") == 1  # the open block was closed


def test_model_stream_error_reports_the_models_own_status() -> None:
    payload = {"message": "boom", "originalStatusCode": 500, "originalMessage": "model crashed"}
    frames = [_exception("modelStreamErrorException", payload)]
    final = _collect(lambda request: _stream_response(frames))[-1]
    assert final.type == "error"
    assert final.error.error_message == (
        "Bedrock stream error (modelStreamErrorException): boom (model status 500: model crashed)"
    )


def test_stream_ending_before_message_stop_is_an_error() -> None:
    final = _collect(lambda request: _stream_response(_text_stream(stop=False)))[-1]
    assert final.type == "error"
    assert final.error.error_message == "Bedrock stream ended before messageStop"
    assert final.error.text == "Hello"


def test_stream_cut_inside_a_frame_is_an_error() -> None:
    frames = _text_stream()
    cut = [*frames[:2], frames[2][:10]]
    final = _collect(lambda request: _stream_response(cut))[-1]
    assert final.type == "error"
    assert "ended inside a message" in (final.error.error_message or "")


def test_corrupted_frame_is_an_error_not_a_crash() -> None:
    frames = _text_stream()
    broken = bytearray(frames[1])
    broken[-6] ^= 0x01
    final = _collect(lambda request: _stream_response([frames[0], bytes(broken)]))[-1]
    assert final.type == "error"
    assert final.error.error_message == (
        "Bedrock event stream is corrupt: event stream message CRC mismatch (corrupt message)"
    )


@pytest.mark.parametrize(
    ("status", "headers", "needle"),
    [
        (
            400,
            {"x-amzn-errortype": "ValidationException"},
            "HTTP 400 (ValidationException): Malformed input",
        ),
        (429, {"retry-after": "3"}, "(retry-after: 3)"),
        (500, {}, "HTTP 500"),
    ],
)
def test_http_errors_become_an_error_event(
    status: int, headers: dict[str, str], needle: str
) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, json={"message": "Malformed input"}, headers=headers)

    events = _collect(handler)
    assert [e.type for e in events] == ["start", "error"]
    final = events[-1]
    assert final.type == "error" and final.error.stop_reason == "error"
    assert needle in (final.error.error_message or "")
    assert TOKEN not in (final.error.error_message or "")


def test_transport_failure_is_an_error_event() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("timed out")

    final = _collect(handler)[-1]
    assert final.type == "error" and "timed out" in (final.error.error_message or "")


def test_cancel_mid_stream_gives_aborted() -> None:
    cancel = asyncio.Event()
    frames = _text_stream(stop=False)[:2]
    events = _collect(
        lambda request: _stream_response(frames, then=cancel.set),
        options=StreamOptions(cancel=cancel),
    )
    final = events[-1]
    assert final.type == "error" and final.reason == "aborted"
    assert final.error.stop_reason == "aborted" and final.error.text == "Hel"


# --------------------------------------------------------------------------- auth and config


def test_sigv4_signs_with_credentials_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG" + "+bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token")
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return _stream_response(_text_stream())

    assert _collect(handler, bearer_token=None, region=None)[-1].type == "done"
    headers = seen[0].headers
    assert seen[0].url.host == "bedrock-runtime.eu-central-1.amazonaws.com"
    assert re.fullmatch(
        r"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/\d{8}/eu-central-1/bedrock/aws4_request, "
        r"SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature=[0-9a-f]{64}",
        headers["authorization"],
    )
    assert re.fullmatch(r"\d{8}T\d{6}Z", headers["x-amz-date"])
    assert headers["x-amz-security-token"] == "session-token"


def test_bearer_token_from_the_environment_wins_over_sigv4(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", TOKEN)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    provider = bedrock.BedrockProvider(MODEL, region="us-east-1")
    assert provider._headers()["authorization"] == f"Bearer {TOKEN}"
    assert provider._credentials is None
    assert TOKEN not in repr(provider)


def test_missing_region_names_the_variables() -> None:
    with pytest.raises(ConfigurationError, match="AWS_REGION \\(or AWS_DEFAULT_REGION\\)"):
        bedrock.BedrockProvider(MODEL, bearer_token=TOKEN)


def test_missing_credentials_name_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with pytest.raises(ConfigurationError) as info:
        bedrock.BedrockProvider(MODEL)
    message = str(info.value)
    for name in ("AWS_BEARER_TOKEN_BEDROCK", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert name in message


def test_without_botocore_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    for name in ("botocore", "botocore.session", "botocore.exceptions"):
        monkeypatch.setitem(sys.modules, name, None)  # makes `import botocore...` fail
    with pytest.raises(ConfigurationError, match=re.escape("pip install 'openprogram-sim[aws]'")):
        bedrock.BedrockProvider(MODEL)
    # The bearer token needs no botocore at all.
    assert bedrock.BedrockProvider(MODEL, bearer_token=TOKEN).region == "us-east-1"


def test_custom_base_url_needs_neither_region_nor_credentials() -> None:
    provider = bedrock.BedrockProvider(MODEL, base_url="http://127.0.0.1:9/")
    assert (
        provider.endpoint()
        == "http://127.0.0.1:9/model/us.amazon.nova-micro-v1%3A0/converse-stream"
    )
    assert "authorization" not in provider._headers()


def test_registry_resolves_bedrock() -> None:
    from openprogram.providers import get_provider

    provider = get_provider(f"bedrock:{MODEL}", bearer_token=TOKEN, region="us-east-1")
    assert isinstance(provider, bedrock.BedrockProvider)


def test_a_past_call_as_text_keeps_non_ascii_arguments() -> None:
    """The model reads the call as text: ``{"city": "Zürich"}``, not ``"Z\\u00fcrich"``."""
    from openprogram.providers._http import tool_call_text

    call = ToolCall(id="tu_1", name="get_weather", arguments={"city": "Zürich"})
    assert tool_call_text(call) == '[called tool get_weather (id tu_1) with {"city": "Zürich"}]'
