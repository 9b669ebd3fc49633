"""Error stops carry the provider's details (issue 12, item 8, the engine half):
``AssistantMessage.error_details`` says why a call failed (a closed vocabulary), the HTTP
status, whether retrying may help and how long the server asked to wait. Every adapter
fills it on every error stop; it is kept in the message's JSON and never sent to a
provider."""

from __future__ import annotations

import asyncio
import email.utils
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
import pytest

from openprogram.providers import Context, MessageBuilder, StreamOptions, parse_response
from openprogram.types import (
    AssistantMessage,
    ErrorDetails,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    message_from_json,
    message_to_dict,
    message_to_json,
)


def _details(kit: Any, api: str, status: int, body: Any, headers: Any = None) -> ErrorDetails:
    run = kit.run(
        lambda c: kit.provider(api, c),
        lambda r: httpx2.Response(status, json=body, headers=headers or {}),
    )
    assert run.message.stop_reason == "error"
    assert run.message.error_details is not None
    return run.message.error_details  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- HTTP errors


@pytest.mark.parametrize(
    ("status", "body", "headers", "expected"),
    [
        (
            429,
            {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}},
            {"retry-after": "17"},
            ErrorDetails(reason="rate_limit", status=429, retryable=True, retry_after=17.0),
        ),
        (
            500,
            {"error": {"message": "The server had an error", "type": "server_error"}},
            {},
            ErrorDetails(reason="server", status=500, retryable=True),
        ),
        (
            503,
            {"message": "Service unavailable"},
            {},
            ErrorDetails(reason="overloaded", status=503, retryable=True),
        ),
        (
            401,
            {"error": {"message": "Incorrect API key provided"}},
            {},
            ErrorDetails(reason="auth", status=401, retryable=False),
        ),
        (
            400,
            {"error": {"message": "Invalid 'temperature'"}},
            {},
            ErrorDetails(reason="invalid_request", status=400, retryable=False),
        ),
        (
            500,
            {"error": {"message": "do not retry this one"}},
            {"x-should-retry": "false"},
            ErrorDetails(reason="server", status=500, retryable=False),
        ),
    ],
    ids=["429-retry-after", "500", "503", "401", "400", "x-should-retry"],
)
def test_http_errors(
    kit: Any, each_api: str, status: int, body: Any, headers: Any, expected: ErrorDetails
) -> None:
    assert _details(kit, each_api, status, body, headers) == expected


def test_anthropic_529_is_overloaded(kit: Any) -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert _details(kit, "anthropic", 529, body) == ErrorDetails(
        reason="overloaded", status=529, retryable=True
    )


def test_openai_retry_after_ms_wins_over_retry_after(kit: Any) -> None:
    headers = {"retry-after-ms": "1500", "retry-after": "2"}
    details = _details(kit, "openai-chat", 429, {"error": {"message": "slow"}}, headers)
    assert details.retry_after == 1.5


def test_retry_after_as_an_http_date(kit: Any) -> None:
    when = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    details = _details(
        kit, "openai-responses", 503, {"error": {"message": "busy"}}, {"retry-after": when}
    )
    assert details.retry_after is not None and 25 <= details.retry_after <= 30


def test_anthropic_rate_limit_reset_headers(kit: Any) -> None:
    reset = (datetime.now(UTC) + timedelta(seconds=40)).isoformat().replace("+00:00", "Z")
    soon = (datetime.now(UTC) + timedelta(seconds=5)).isoformat().replace("+00:00", "Z")
    headers = {
        "anthropic-ratelimit-tokens-remaining": "0",
        "anthropic-ratelimit-tokens-reset": reset,
        "anthropic-ratelimit-requests-remaining": "12",  # not the exhausted limit
        "anthropic-ratelimit-requests-reset": soon,
    }
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}
    details = _details(kit, "anthropic", 429, body, headers)
    assert details.reason == "rate_limit" and details.retryable
    assert details.retry_after is not None and 35 <= details.retry_after <= 40


def test_gemini_retry_info_in_the_body(kit: Any) -> None:
    body = {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}],
        }
    }
    details = _details(kit, "gemini", 429, body)
    assert details == ErrorDetails(
        reason="rate_limit", status=429, retryable=True, retry_after=37.0
    )


def test_a_spent_quota_is_not_worth_retrying(kit: Any) -> None:
    body = {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}
    details = _details(kit, "openai-chat", 429, body)
    assert details.reason == "rate_limit" and not details.retryable


def test_a_recorded_error_body_carries_its_status(each_api: str) -> None:
    body = json.dumps({"error": {"message": "slow down"}})
    message = parse_response(each_api, body, content_type="application/json", status=429)
    assert message.error_details == ErrorDetails(reason="rate_limit", status=429, retryable=True)


# --------------------------------------------------------------------------- in-stream errors

IN_STREAM = {
    "openai-chat": ("server_error", ErrorDetails(reason="server", retryable=True)),
    "openai-responses": ("rate_limit_exceeded", ErrorDetails(reason="rate_limit", retryable=True)),
    "anthropic": ("overloaded_error", ErrorDetails(reason="overloaded", retryable=True)),
    "gemini": ("UNAVAILABLE", ErrorDetails(reason="overloaded", retryable=True)),
    "bedrock": ("throttlingException", ErrorDetails(reason="rate_limit", retryable=True)),
}


def test_an_error_inside_a_200_stream(kit: Any, each_api: str) -> None:
    code, expected = IN_STREAM[each_api]
    body = kit.stream_error(each_api, code, "try again later")
    run = kit.run(
        lambda c: kit.provider(each_api, c),
        lambda r: kit.response([body], content_type=kit.STREAM_TYPES[each_api]),
    )
    assert run.message.stop_reason == "error"
    assert run.message.error_details == expected  # status None: the answer was a 200


def test_an_unknown_in_stream_error_is_other(kit: Any, each_api: str) -> None:
    body = kit.stream_error(each_api, "mystery_error", "something odd")
    run = kit.run(
        lambda c: kit.provider(each_api, c),
        lambda r: kit.response([body], content_type=kit.STREAM_TYPES[each_api]),
    )
    if each_api == "gemini":  # its error also carries a numeric code: 500 says "server"
        assert run.message.error_details == ErrorDetails(reason="server", retryable=True)
    else:
        assert run.message.error_details == ErrorDetails(reason="other", retryable=False)


def test_a_stream_cut_short(kit: Any, each_api: str) -> None:
    run = kit.run(
        lambda c: kit.provider(each_api, c),
        lambda r: kit.response([b""], content_type=kit.STREAM_TYPES[each_api]),
    )
    assert run.message.error_details == ErrorDetails(reason="stream", retryable=True)


def test_a_content_filter_stop_is_other(kit: Any) -> None:
    chunk = {"choices": [{"index": 0, "delta": {}, "finish_reason": "content_filter"}]}
    body = kit.stream_lines("openai-chat", ("m", json.dumps(chunk)), ("m", "[DONE]"))
    run = kit.run(
        lambda c: kit.provider("openai-chat", c),
        lambda r: kit.response([body], content_type="text/event-stream"),
    )
    assert run.message.error_details == ErrorDetails(reason="other", retryable=False)


# --------------------------------------------------------------------------- transport


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (httpx2.ConnectError("connection refused"), ErrorDetails(reason="network", retryable=True)),
        (httpx2.ReadTimeout("timed out"), ErrorDetails(reason="timeout", retryable=True)),
        (httpx2.RemoteProtocolError("peer closed"), ErrorDetails(reason="network", retryable=True)),
    ],
    ids=["connect", "timeout", "protocol"],
)
def test_transport_failures(
    kit: Any, each_api: str, exc: Exception, expected: ErrorDetails
) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise exc

    run = kit.run(lambda c: kit.provider(each_api, c), handler)
    assert run.message.error_details == expected


def test_an_abort_is_not_an_error_and_has_no_details(kit: Any, each_api: str) -> None:
    cancel = asyncio.Event()
    cancel.set()
    run = kit.run(
        lambda c: kit.provider(each_api, c),
        lambda r: httpx2.Response(500),
        options=StreamOptions(cancel=cancel),
    )
    assert run.message.stop_reason == "aborted" and run.message.error_details is None


# --------------------------------------------------------------------------- the type


def test_the_field_defaults_to_none_and_round_trips_through_json() -> None:
    assert AssistantMessage().error_details is None
    details = ErrorDetails(reason="rate_limit", status=429, retryable=True, retry_after=2.5)
    message = AssistantMessage(stop_reason="error", error_message="slow", error_details=details)
    assert message_to_dict(message)["error_details"] == {
        "reason": "rate_limit",
        "status": 429,
        "retryable": True,
        "retry_after": 2.5,
    }
    assert message_from_json(message_to_json(message)) == message
    with pytest.raises(TypeError):
        ErrorDetails("rate_limit")  # type: ignore[misc]  # keyword-only


def test_an_unknown_reason_is_refused_when_loaded() -> None:
    data = message_to_dict(AssistantMessage(stop_reason="error", error_message="x"))
    data["error_details"] = {"reason": "cosmic_rays", "retryable": False}
    with pytest.raises(ValueError, match="reason"):
        message_from_json(json.dumps(data))


def test_the_builder_records_the_details() -> None:
    builder = MessageBuilder(api="scripted", model="m")
    details = ErrorDetails(reason="overloaded", status=529, retryable=True)
    event = builder.error("Overloaded", details=details)
    assert event.error.error_details == details and builder.message.error_details == details


def test_details_are_never_sent_to_a_provider(kit: Any, each_api: str) -> None:
    failed = AssistantMessage(
        [TextContent("partial")],
        stop_reason="error",
        error_message="Overloaded",
        error_details=ErrorDetails(reason="overloaded", status=529, retryable=True, retry_after=3),
    )
    history = [
        UserMessage.of("go"),
        AssistantMessage([ToolCall("c1", "f", {})], stop_reason="toolUse"),
        ToolResultMessage("c1", "f", [TextContent("ok")]),
        failed,
        UserMessage.of("again"),
    ]
    provider = kit.provider(each_api, None)
    body = provider.request_body(Context("", history, []), StreamOptions())
    text = json.dumps(body)
    assert "error_details" not in text and "retry_after" not in text and "Overloaded" not in text
