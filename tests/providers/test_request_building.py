"""The adapters build each POST as ``client.build_request`` would, while keeping the parsed
URL and the timeout between calls: the client's headers, cookies, query parameters and
base URL still reach the request, and a changed endpoint or timeout is seen at once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2

from openprogram.providers.base import StreamOptions


def _reply(kit: Any, api: str) -> httpx2.Response:
    """A one-word streamed reply in ``api``'s framing (what it is does not matter here)."""
    events = {
        "openai-chat": [
            ("", json.dumps({"choices": [{"index": 0, "delta": {"content": "ok"}}]})),
            ("", json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
            ("", "[DONE]"),
        ],
        "openai-responses": [
            ("response.completed", json.dumps({"response": {"status": "completed", "output": []}})),
        ],
        "anthropic": [
            ("message_start", json.dumps({"message": {"usage": {}}})),
            ("message_delta", json.dumps({"delta": {"stop_reason": "end_turn"}, "usage": {}})),
            ("message_stop", "{}"),
        ],
        "gemini": [
            ("", json.dumps({"candidates": [{"content": {"parts": [{"text": "ok"}]}}]})),
            ("", json.dumps({"candidates": [{"finishReason": "STOP"}]})),
        ],
        "bedrock": [
            ("messageStop", json.dumps({"stopReason": "end_turn"})),
            ("metadata", json.dumps({"usage": {}})),
        ],
    }[api]
    kind = "application/vnd.amazon.eventstream" if api == "bedrock" else "text/event-stream"
    return httpx2.Response(
        200, headers={"content-type": kind}, content=kit.stream_lines(api, *events)
    )


def _send(
    kit: Any, api: str, rounds: int = 1, **client_options: Any
) -> tuple[Any, list[httpx2.Request]]:
    """Stream ``rounds`` replies through the ``api`` adapter on a client made with
    ``client_options``; the provider, the client and the requests it sent."""
    sent: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return _reply(kit, api)

    async def go() -> tuple[Any, httpx2.AsyncClient]:
        transport = httpx2.MockTransport(handler)
        async with httpx2.AsyncClient(transport=transport, **client_options) as client:
            provider = kit.provider(api, client, headers={"x-team": "evals"})
            for _ in range(rounds):
                events = [e async for e in provider.stream(kit.simple_context(), StreamOptions())]
                assert events[-1].type == "done", events[-1]
            return provider, client

    provider, client = asyncio.run(go())
    return (provider, client), sent


def test_the_request_is_the_one_build_request_makes(kit: Any, each_api: str) -> None:
    api = each_api
    (provider, client), sent = _send(
        kit,
        api,
        headers={"user-agent": "my-agent/2.0", "x-client-wide": "1"},
        cookies={"session": "abc"},
        timeout=12.5,
    )
    request = sent[0]
    expected = client.build_request(
        "POST",
        provider.endpoint(),
        content=request.content,
        headers=provider._headers(),
        timeout=provider.timeout,
    )
    assert request.url == expected.url
    headers = dict(request.headers)
    if api == "bedrock":  # its prepare() sets accept for the event stream
        headers.pop("accept")
        expected.headers.pop("accept")
    assert headers == dict(expected.headers)
    assert headers["user-agent"] == "my-agent/2.0"  # the client's header wins over httpx2's
    assert headers["x-client-wide"] == "1" and headers["x-team"] == "evals"
    assert headers["cookie"] == "session=abc"
    assert request.extensions["timeout"] == expected.extensions["timeout"]


def test_the_clients_query_parameters_join_the_endpoints_own(kit: Any) -> None:
    _, sent = _send(kit, "gemini", params={"trace": "on"})
    url = sent[0].url
    assert url.params["trace"] == "on"
    assert url.params["alt"] == "sse"  # the adapter's own parameter is kept
    assert url.path.endswith(":streamGenerateContent")


def test_every_round_reaches_the_endpoint_and_a_changed_one_is_followed(kit: Any) -> None:
    (provider, _), sent = _send(kit, "anthropic", rounds=3)
    assert [str(r.url) for r in sent] == ["https://api.anthropic.com/v1/messages"] * 3

    moved: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        moved.append(request)
        return _reply(kit, "anthropic")

    async def go() -> None:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
            provider.client = client
            for base in ("http://127.0.0.1:9/a", "http://127.0.0.1:9/b"):
                provider.base_url = base
                provider.timeout = 3.0 if base.endswith("a") else 4.0
                async for _ in provider.stream(kit.simple_context(), StreamOptions()):
                    pass

    asyncio.run(go())
    assert [str(r.url) for r in moved] == [
        "http://127.0.0.1:9/a/messages",
        "http://127.0.0.1:9/b/messages",
    ]
    assert [r.extensions["timeout"]["read"] for r in moved] == [3.0, 4.0]


def test_a_relative_endpoint_is_joined_to_the_clients_base_url(kit: Any) -> None:
    sent: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return _reply(kit, "anthropic")

    async def go() -> None:
        transport = httpx2.MockTransport(handler)
        async with httpx2.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:9/proxy/"
        ) as client:
            provider = kit.provider("anthropic", client, base_url="/anthropic")
            async for _ in provider.stream(kit.simple_context(), StreamOptions()):
                pass

    asyncio.run(go())
    assert str(sent[0].url) == "http://127.0.0.1:9/proxy/anthropic/v1/messages"  # a root


def test_a_users_header_replaces_the_adapters_whatever_its_case(kit: Any, each_api: str) -> None:
    auth = {
        "openai-chat": "Authorization",
        "openai-responses": "Authorization",
        "anthropic": "X-Api-Key",
        "gemini": "X-Goog-Api-Key",
        "bedrock": "Authorization",
    }[each_api]
    sent: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return _reply(kit, each_api)

    async def go() -> None:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
            headers = {auth: "from-the-user", "Content-Type": "application/json; charset=utf-8"}
            provider = kit.provider(each_api, client, headers=headers)
            async for _ in provider.stream(kit.simple_context(), StreamOptions()):
                pass

    asyncio.run(go())
    raw = [(k.decode().lower(), v.decode()) for k, v in sent[0].headers.raw]
    assert [v for k, v in raw if k == auth.lower()] == ["from-the-user"]
    assert [v for k, v in raw if k == "content-type"] == ["application/json; charset=utf-8"]
