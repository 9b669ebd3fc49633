"""The server under misuse: malformed bodies get each API's 400 shape and the server keeps
serving; unknown paths a 404 that lists the routes; a client that leaves mid-stream or a
deliberate cut leaves nothing in the server's log."""

from __future__ import annotations

import contextlib
import logging
import time

import httpx2
import pytest

from openprogram_sim.wire import serve

TEXT = "A reply long enough to stream in several pieces, slowly."
PATHS = {
    "openai-chat": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/gemini-2.5-flash:generateContent",
    "bedrock": "/model/us.amazon.nova-micro-v1:0/converse",
}
GOOD = {
    "openai-chat": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "openai-responses": {"model": "m", "input": "hi"},
    "anthropic": {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]},
    "gemini": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    "bedrock": {"messages": [{"role": "user", "content": [{"text": "hi"}]}]},
}
BAD = [b"{not json", b"[1, 2]", b'{"model": "m"}', b""]


def _error_type(api: str, reply: httpx2.Response) -> str:
    body = reply.json()
    if api.startswith("openai"):
        return body["error"]["type"]
    if api == "anthropic":
        assert body["type"] == "error"
        return body["error"]["type"]
    if api == "gemini":
        assert body["error"]["code"] == 400
        return body["error"]["status"]
    assert "message" in body
    return reply.headers["x-amzn-errortype"].partition(":")[0]


EXPECTED_TYPE = {
    "openai-chat": "invalid_request_error",
    "openai-responses": "invalid_request_error",
    "anthropic": "invalid_request_error",
    "gemini": "INVALID_ARGUMENT",
    "bedrock": "ValidationException",
}


@pytest.mark.parametrize("api", list(PATHS))
def test_malformed_bodies_get_the_apis_400_and_the_server_keeps_serving(api: str) -> None:
    with serve([TEXT]) as server, httpx2.Client(base_url=server.url) as client:
        for raw in BAD:
            reply = client.post(PATHS[api], content=raw)
            assert reply.status_code == 400, raw
            assert _error_type(api, reply) == EXPECTED_TYPE[api], raw
        good = client.post(PATHS[api], json=GOOD[api])
        assert good.status_code == 200
        assert TEXT in good.text  # the first turn, untouched by the bad requests
        assert len(server.errors) == len(BAD)
        assert server.session().unconsumed == 0


def test_an_unknown_path_is_a_404_naming_the_routes() -> None:
    with serve([TEXT]) as server, httpx2.Client(base_url=server.url) as client:
        reply = client.post("/v2/chat", json={})
        assert reply.status_code == 404
        assert "/v1/chat/completions" in reply.json()["error"]["message"]
        assert client.get("/v1/models").json()["data"][0]["id"] == "scripted"
        with pytest.raises(AssertionError, match="not an API route"):
            server.assert_consumed()


def test_a_client_leaving_mid_stream_leaves_no_trace_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    slow = {"text": TEXT * 4, "wire": {"interval": 0.05}}
    script = [slow, {"text": TEXT, "wire": {"cut_after": 2}}, {"text": TEXT, "fault": "hang"}, TEXT]
    request = {**GOOD["openai-chat"], "stream": True}
    caplog.set_level(logging.DEBUG)
    with serve(script) as server, httpx2.Client(base_url=server.url) as client:
        for _ in range(2):  # a slow stream left after its first chunk, then a cut one
            opened = client.stream("POST", PATHS["openai-chat"], json=request)
            with opened as reply, contextlib.suppress(httpx2.RemoteProtocolError):
                next(reply.iter_raw())
        with pytest.raises(httpx2.ReadTimeout):  # a client that gives up on a hang
            client.post(PATHS["openai-chat"], json=request, timeout=0.2)
        time.sleep(0.2)  # the server notices the disconnects
        assert client.post(PATHS["openai-chat"], json=GOOD["openai-chat"]).status_code == 200
        assert server.session().disconnects == 2
        server.assert_consumed()
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert noisy == []
