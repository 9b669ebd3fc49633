"""A key appears in no error text (issue 11, items 8 and 9).

Keys read from a file keep their newline, so surrounding whitespace is stripped and a
control or non-ASCII character inside a key is refused at construction, by an error that
does not show the key. Every error text, whatever its origin (an HTTP error body, an error
inside a 200 stream, a transport failure), is redacted in one place, of every form of every
credential the adapter holds: the key itself, its ``repr``, its bytes ``repr``, its JSON
escaping; Bedrock's SigV4 secret key and session token too.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from openprogram.errors import ConfigurationError
from openprogram.providers import StreamOptions
from openprogram.providers.bedrock import BedrockProvider

KEY = "test-secret-not-a-real-key-4821"
ENV = {
    "openai-chat": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "bedrock": "AWS_BEARER_TOKEN_BEDROCK",
}


def _auth_header(api: str, request: httpx2.Request) -> str:
    name = {"anthropic": "x-api-key", "gemini": "x-goog-api-key"}.get(api, "authorization")
    return request.headers[name]


def _expected_header(api: str, key: str) -> str:
    return key if api in ("anthropic", "gemini") else f"Bearer {key}"


def _forms(secret: str) -> list[str]:
    return [
        secret,
        repr(secret)[1:-1],
        repr(secret.encode())[2:-1],
        json.dumps(secret)[1:-1],
    ]


def _assert_hidden(text: str, *secrets: str) -> None:
    for secret in secrets:
        for form in _forms(secret):
            assert form not in text, f"{form!r} leaked into {text!r}"


# --------------------------------------------------------------------------- construction


@pytest.mark.parametrize("padding", ["\n", "\r\n", " \t", "\n\n"])
def test_a_key_read_from_a_file_is_stripped(kit: Any, each_api: str, padding: str) -> None:
    run = kit.run(
        lambda c: kit.provider(each_api, c, key=KEY + padding),
        lambda r: httpx2.Response(500),
    )
    assert _auth_header(each_api, run.requests[0]) == _expected_header(each_api, KEY)


@pytest.mark.parametrize("bad", ["test-secret\nnot-a-real-key-4821", "test-secret\x00-4821-key"])
def test_a_control_character_inside_a_key_is_refused_without_showing_it(
    kit: Any, each_api: str, bad: str
) -> None:
    with pytest.raises(ConfigurationError, match="control character") as info:
        kit.provider(each_api, None, key=bad)
    _assert_hidden(str(info.value), "test-secret", "4821")


def test_a_bad_key_from_the_environment_is_refused_naming_the_variable(
    kit: Any, each_api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV[each_api], "test-secret\x7f-key-4821")
    with pytest.raises(ConfigurationError, match=ENV[each_api]) as info:
        kit.provider(each_api, None, key=None)
    _assert_hidden(str(info.value), "test-secret", "4821")


def test_a_blank_key_is_refused(kit: Any, each_api: str) -> None:
    with pytest.raises(ConfigurationError, match="blank"):
        kit.provider(each_api, None, key=" \n")


# --------------------------------------------------------------------------- redaction


def test_every_form_of_the_key_is_redacted_from_a_transport_error(kit: Any, each_api: str) -> None:
    key = "test-secret\\not-a-real-key-4821"  # a backslash: its repr forms differ from it

    def handler(request: httpx2.Request) -> httpx2.Response:
        header = _auth_header(each_api, request).encode()
        raise httpx2.LocalProtocolError(
            f"Illegal header value {header!r}; as text {header.decode()!r}; "
            f"as JSON {json.dumps(header.decode())}"
        )

    run = kit.run(lambda c: kit.provider(each_api, c, key=key), handler)
    text = run.message.error_message or ""
    assert "Illegal header value" in text
    _assert_hidden(text, key)


def test_a_key_echoed_inside_a_200_stream_is_redacted(kit: Any, each_api: str) -> None:
    echo = f"Incorrect API key provided: {KEY}; quoted {json.dumps(KEY)}."
    body = kit.stream_error(each_api, "authentication_error", echo)
    run = kit.run(
        lambda c: kit.provider(each_api, c),
        lambda r: kit.response([body], content_type=kit.STREAM_TYPES[each_api]),
    )
    text = run.message.error_message or ""
    assert run.message.stop_reason == "error" and "Incorrect API key provided: ***" in text
    _assert_hidden(text, KEY)


def test_a_key_echoed_in_an_error_body_is_redacted(kit: Any, each_api: str) -> None:
    body = {"error": {"message": f"Incorrect API key provided: {KEY}.", "code": "invalid_api_key"}}
    run = kit.run(lambda c: kit.provider(each_api, c), lambda r: httpx2.Response(401, json=body))
    text = run.message.error_message or ""
    assert "HTTP 401" in text and "***" in text
    _assert_hidden(text, KEY)


def test_a_key_in_user_given_auth_headers_is_redacted(kit: Any, each_api: str) -> None:
    secret = "user-header-secret-9911"

    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ProxyError(f"proxy refused {request.headers['proxy-authorization']!r}")

    run = kit.run(
        lambda c: kit.provider(each_api, c, headers={"Proxy-Authorization": f"Basic {secret}"}),
        handler,
    )
    assert "proxy refused" in (run.message.error_message or "")
    _assert_hidden(run.message.error_message or "", secret)


# --------------------------------------------------------------------------- SigV4


SECRET_KEY = "wJalrXUtnFEMI/K7MDENG" + "+bPxRfiCYEXAMPLEKEY"
SESSION_TOKEN = "FwoGZXIvYXdzEXAMPLE-session-token-77"


@pytest.fixture
def sigv4_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("botocore")
    for name in ("AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)


def _bedrock_sigv4(kit: Any, handler: Any) -> Any:
    async def go() -> list[Any]:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
            provider = BedrockProvider("m-1", region="us-east-1", client=client)
            return [e async for e in provider.stream(kit.simple_context(), StreamOptions())]

    return asyncio.run(go())[-1].error


@pytest.mark.usefixtures("sigv4_env")
def test_sigv4_secrets_echoed_in_a_stream_or_a_body_are_redacted(kit: Any) -> None:
    echo = f"signature used {SECRET_KEY} with token {SESSION_TOKEN}"
    stream = kit.stream_error("bedrock", "validationException", echo)
    message = _bedrock_sigv4(
        kit, lambda r: kit.response([stream], content_type=kit.STREAM_TYPES["bedrock"])
    )
    assert message.stop_reason == "error" and "signature used ***" in message.error_message
    _assert_hidden(message.error_message, SECRET_KEY, SESSION_TOKEN)
    message = _bedrock_sigv4(kit, lambda r: httpx2.Response(403, json={"message": echo}))
    assert "HTTP 403" in message.error_message
    _assert_hidden(message.error_message, SECRET_KEY, SESSION_TOKEN)


# --------------------------------------------------------------------------- over loopback


def test_a_key_with_a_newline_over_real_http_leaks_nothing(each_api: str, kit: Any) -> None:
    """The original report, through a real HTTP stack: h11 refused the header and put the
    whole key in its message."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:  # before the fix, the client sent nothing
            writer.close()
            return
        body = b'{"error": {"message": "no"}}'
        writer.write(
            b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
        )
        await writer.drain()
        writer.close()

    async def go() -> Any:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with httpx2.AsyncClient() as client:
                provider = kit.provider(
                    each_api, client, key=KEY + "\n", base_url=f"http://127.0.0.1:{port}"
                )
                return [e async for e in provider.stream(kit.simple_context(), StreamOptions())][
                    -1
                ].error
        finally:
            server.close()
            await server.wait_closed()

    message = asyncio.run(asyncio.wait_for(go(), timeout=10))
    assert "HTTP 401" in (message.error_message or "")
    _assert_hidden(message.error_message or "", KEY)
