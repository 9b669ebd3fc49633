"""Slow clients and a full wire server (issue 23, item 4), over real loopback sockets: a
silent connection, a trickled request head and a trickled body are let go within their
timeouts; a request past ``max_connections`` gets HTTP 503 in its API's error shape; with
the file-descriptor limit used up, a refused ``accept()`` is logged once and the server
answers again once idle connections are gone. Every test runs on both stacks the server
may pick: asyncio + h11 (the pure-Python default install) and uvloop + httptools (the
``fast`` extra; skipped when it is not installed)."""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from serve_support import read_banner

from openprogram_sim.cli import serve as cli
from openprogram_sim.wire import WireServer, _app, _guard, _server, serve


@pytest.fixture(autouse=True, params=["pure", "fast"])
def stack(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The stack every server of the test runs on (the CLI's subprocess included: it
    inherits the variable)."""
    if request.param == "fast" and _server._fast_missing() is not None:
        pytest.skip(f"the fast extra is not installed ({_server._fast_missing()})")
    monkeypatch.setenv(_server.STACK_VARIABLE, request.param)
    expected = "uvloop + httptools" if request.param == "fast" else "asyncio + h11"
    assert _server.pick_stack().label.startswith(expected)
    return str(request.param)


HI = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
SCRIPT = ["Hello.", "Again."]

# a model-call path per API, and a body each accepts
CALLS = {
    "openai-chat": ("/v1/chat/completions", HI),
    "openai-responses": ("/v1/responses", {"model": "m", "input": "hi"}),
    "anthropic": ("/v1/messages", {"model": "m", "max_tokens": 8, **HI}),
    "gemini": ("/v1beta/models/m:generateContent", {"contents": [{"parts": [{"text": "hi"}]}]}),
    "bedrock": ("/model/m/converse", {"messages": [{"role": "user", "content": [{"text": "x"}]}]}),
}


def error_message(api: str, status: int, headers: dict[str, str], body: Any) -> str:
    """The error body is ``api``'s own; returns its message."""
    if api.startswith("openai"):
        assert set(body["error"]) == {"message", "type", "param", "code"}, body
        return str(body["error"]["message"])
    if api == "anthropic":
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}, body
        return str(body["error"]["message"])
    if api == "gemini":
        assert body["error"]["code"] == status and "status" in body["error"], body
        return str(body["error"]["message"])
    assert "x-amzn-errortype" in headers and set(body) == {"message"}, body
    return str(body["message"])


def parse(raw: bytes) -> tuple[int, dict[str, str], Any]:
    """A whole HTTP/1.1 answer read off a socket: status, headers, JSON body."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, json.loads(body)


async def slow_client(
    port: int, first: bytes, drip: bytes = b"", every: float = 0.05
) -> tuple[bytes, float]:
    """Connect, send ``first``, then ``drip`` every ``every`` seconds until the server
    closes the connection: what it answered, and the seconds that took."""
    start = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(first)

    async def trickle() -> None:
        with_drip = bool(drip)
        while with_drip:
            await asyncio.sleep(every)
            writer.write(drip)
            await writer.drain()

    dripping = asyncio.create_task(trickle())
    try:
        answer = await asyncio.wait_for(reader.read(), 20)  # to EOF
    except ConnectionResetError:
        answer = b"(reset)"
    elapsed = time.monotonic() - start
    dripping.cancel()
    await asyncio.gather(dripping, return_exceptions=True)
    writer.close()
    return answer, elapsed


def wait_for(test: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not test():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def head(path: str, length: int, method: str = "POST") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"content-length: {length}\r\n\r\n"
    ).encode()


# --------------------------------------------------------------------------- the head


def test_a_silent_connection_is_closed_after_the_header_timeout() -> None:
    with serve(SCRIPT, header_timeout=0.5) as server:
        answer, elapsed = asyncio.run(slow_client(server.port, b""))
        assert answer == b""  # nothing was asked, nothing is answered
        assert 0.45 < elapsed < 3, elapsed
        assert httpx2.post(f"{server.url}/v1/chat/completions", json=HI).status_code == 200


def test_a_trickled_request_head_gets_408_and_is_closed() -> None:
    with serve(SCRIPT, header_timeout=0.5) as server:
        first = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-slow: "
        answer, elapsed = asyncio.run(slow_client(server.port, first, b"a", every=0.05))
    assert 0.45 < elapsed < 3, elapsed
    status, headers, body = parse(answer)
    assert (status, headers["connection"]) == (408, "close")
    assert body == {
        "error": {
            "message": "openprogram-sim: the request head (request line and headers) did not "
            "arrive within 0.5 s (the server's header_timeout); send it at once, or raise the "
            "limit (serve(header_timeout=...), openprogram-sim serve --header-timeout SECONDS)",
            "type": "timeout",
        }
    }


def test_the_head_timer_starts_again_after_each_answer() -> None:
    # one connection (http.client never retries on another), idle 0.6 s before each of
    # three requests: 1.8 s in all, past the 1 s head timeout, but never 1 s at once
    with serve(SCRIPT, cycle=True, header_timeout=1) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        statuses = []
        for _ in range(3):
            time.sleep(0.6)
            connection.request("POST", "/v1/chat/completions", json.dumps(HI))
            answer = connection.getresponse()
            answer.read()
            statuses.append(answer.status)
        connection.close()
        assert statuses == [200, 200, 200]
        assert server.check().passed, server.check().render()


# --------------------------------------------------------------------------- the body


@pytest.mark.parametrize("api", sorted(CALLS))
def test_a_trickled_body_gets_408_in_the_apis_shape(api: str) -> None:
    path, _ = CALLS[api]
    with serve(SCRIPT, body_timeout=0.5, body_min_rate=100) as server:
        # a byte every 50 ms never leaves the server idle for 0.5 s; the rate catches it
        answer, elapsed = asyncio.run(
            slow_client(server.port, head(f"/s/slow{path}", 1000), b" ", every=0.05)
        )
        report = server.check()
    assert 0.5 < elapsed < 3, elapsed
    status, headers, body = parse(answer)  # the whole answer, then the end of the connection
    assert status == 408
    message = error_message(api, status, headers, body)
    assert re.fullmatch(
        r"openprogram-sim: the request body came too slowly: \d+ byte\(s\) in 0\.\d s, where "
        r"a body may take 0\.5 s plus 1 s per 100 bytes \(body_timeout, body_min_rate\); send "
        r"the body at once, or raise the limits \(serve\(body_timeout=\.\.\., "
        r"body_min_rate=\.\.\.\), openprogram-sim serve --body-timeout SECONDS "
        r"--body-min-rate N\)",
        message,
    ), message
    assert not report.passed and f"session 'slow': {message}" in report.render()


def test_a_body_that_stops_coming_gets_408_after_the_body_timeout() -> None:
    with serve(SCRIPT, body_timeout=0.5) as server:
        answer, elapsed = asyncio.run(
            slow_client(server.port, head("/v1/chat/completions", 100) + b'{"model"')
        )
    assert 0.45 < elapsed < 3, elapsed
    status, headers, body = parse(answer)
    message = error_message("openai-chat", status, headers, body)
    assert message.startswith(
        "openprogram-sim: the request body came too slowly: no byte for 0.5 s after 8 "
        "byte(s) (body_timeout); send the body at once"
    ), message


def test_a_body_left_unread_after_its_answer_is_cut_off() -> None:
    # GET on a POST route: Starlette answers 405 without reading the body the client sends
    with serve(SCRIPT, body_timeout=0.5) as server:
        answer, elapsed = asyncio.run(
            slow_client(server.port, head("/v1/chat/completions", 10**6, "GET"), b" ")
        )
    assert answer.startswith(b"HTTP/1.1 405 "), answer
    assert 0.45 < elapsed < 3, elapsed


def test_a_server_stopping_under_a_slow_body_answers_it_and_stops_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = WireServer(SCRIPT).start()
    stopped: list[float] = []

    def stop_soon() -> None:
        time.sleep(0.3)
        start = time.monotonic()
        server.stop()
        stopped.append(time.monotonic() - start)

    stopping = threading.Thread(target=stop_soon)
    stopping.start()
    answer, _ = asyncio.run(slow_client(server.port, head("/v1/chat/completions", 100) + b"{"))
    stopping.join()
    status, headers, body = parse(answer)
    assert (status, error_message("openai-chat", status, headers, body)) == (
        503,
        "openprogram-sim: the server is stopping; the request was not answered",
    )
    assert stopped[0] < 1, stopped  # not uvicorn's 2 s wait, then a cancelled task
    assert "Exception in ASGI application" not in caplog.text


@pytest.mark.slow
def test_150_slow_connections_are_all_let_go_while_others_are_served() -> None:
    lines: list[str] = []
    server = WireServer(SCRIPT, cycle=True, header_timeout=1, body_timeout=1, log=lines.append)

    async def main() -> list[tuple[bytes, float]]:
        port, path = server.port, "/v1/chat/completions"
        clients = [
            *(slow_client(port, b"") for _ in range(50)),
            *(slow_client(port, b"POST / HTTP/1.1\r\nx-a: ", b"a", 0.2) for _ in range(50)),
            *(slow_client(port, head(path, 10**5), b" ", 0.2) for _ in range(50)),
        ]
        slow = asyncio.gather(*clients)
        await asyncio.sleep(0.3)
        async with httpx2.AsyncClient(base_url=server.url) as client:
            fast = await client.post(path, json=HI)  # served while the slow ones wait
            assert fast.status_code == 200, fast.text
        return await slow

    with server:
        results = asyncio.run(main())
    assert all(1 <= elapsed < 4 for _, elapsed in results), sorted(e for _, e in results)
    assert [a for a, _ in results[:50]] == [b""] * 50
    # each answer arrives whole before the connection ends (no reset under it)
    assert all(a.startswith(b"HTTP/1.1 408 ") for a, _ in results[50:]), results[50:]
    closed = [line for line in lines if "closed a connection" in line]
    assert len(closed) == 1, closed  # the first; the rest are counted
    assert "warning: slow clients let go: 99 more since the last line (100 in all)" in lines
    assert sum("body came too slowly" in line for line in lines) == 50  # one per request


# --------------------------------------------------------------------------- a full server


@pytest.mark.parametrize("api", sorted(CALLS))
def test_a_full_server_answers_503_in_the_apis_shape(api: str) -> None:
    path, body = CALLS[api]
    with serve(SCRIPT, max_connections=2) as server:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(2)]
        wait_for(lambda: server.connections == 2)  # both accepted
        full = httpx2.post(server.url + path, json=body)
        message = error_message(api, 503, dict(full.headers), full.json())
        assert full.status_code == 503
        assert message == (
            "openprogram-sim: the server is full: 3 connections are open and it serves at "
            "most 2 at once (max_connections); retry in a moment, close idle connections, "
            "or raise the cap (serve(max_connections=...), openprogram-sim serve "
            "--max-connections N)"
        )
        assert full.headers["retry-after"] == "1" and full.headers["x-should-retry"] == "true"
        for sock in idle:
            sock.close()
        wait_for(lambda: server.connections == 0)
        assert httpx2.post(server.url + path, json=body).status_code == 200
        report = server.check()
    assert not report.passed
    assert (
        "1 request(s) were refused with HTTP 503: more than 2 connections were open "
        "(max_connections)" in report.render()
    )


@pytest.mark.slow
def test_a_full_server_answers_routes_of_no_api_and_the_sdk_sees_the_503() -> None:
    openai = pytest.importorskip("openai")
    with serve(SCRIPT, max_connections=1) as server:
        idle = socket.create_connection(("127.0.0.1", server.port))
        wait_for(lambda: server.connections == 1)
        report = httpx2.get(f"{server.url}/s/x")
        assert report.status_code == 503 and report.headers["retry-after"] == "1"
        assert report.json()["error"]["type"] == "unavailable"
        # the refused connection ends after its answer: a raw client reads it to EOF
        body = json.dumps(HI).encode()
        request = head("/v1/chat/completions", len(body)) + body
        answer, elapsed = asyncio.run(slow_client(server.port, request))
        assert answer.startswith(b"HTTP/1.1 503 ") and elapsed < 1, (answer, elapsed)
        client = openai.OpenAI(base_url=server.base_url("openai"), api_key="x", max_retries=0)
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert caught.value.status_code == 503
        assert "the server is full" in caught.value.message
        idle.close()


# --------------------------------------------------------------------------- settings


def test_the_cli_restates_the_servers_defaults_and_refuses_negative_limits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.DEFAULT_HEADER_TIMEOUT == _guard.DEFAULT_HEADER_TIMEOUT == 10
    assert cli.DEFAULT_BODY_TIMEOUT == _app.DEFAULT_BODY_TIMEOUT == 30
    assert cli.DEFAULT_BODY_MIN_RATE == _app.DEFAULT_BODY_MIN_RATE == 1024
    assert cli.DEFAULT_MAX_CONNECTIONS == _guard.DEFAULT_MAX_CONNECTIONS == 512
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["serve", "x.yaml"])
    assert (args.header_timeout, args.body_timeout) == (10, 30)
    assert (args.body_min_rate, args.max_connections) == (1024, 512)
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "x.yaml", "--header-timeout", "-1"])
    assert (
        "argument --header-timeout: -1 is negative; use 0 for no limit" in capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("header_timeout", 0, "header_timeout must be > 0 seconds or None, got 0"),
        ("body_timeout", -1, "body_timeout must be > 0 seconds or None, got -1"),
        ("body_min_rate", 0, "body_min_rate must be >= 1 byte/s or None, got 0"),
        ("max_connections", 0, "max_connections must be >= 1 or None, got 0"),
    ],
)
def test_a_bad_limit_is_refused_naming_it(option: str, value: float, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        WireServer(SCRIPT, **{option: value})
    assert str(caught.value) == message


# --------------------------------------------------------------------------- descriptors

ONE_TURN = """\
scenario: one reply
exec: {content: "hi"}
model:
  - text: "Hello."
"""


@pytest.mark.slow
def test_with_descriptors_used_up_accept_is_logged_once_and_the_server_recovers(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "one.yaml"
    scenario.write_text(ONE_TURN)

    def few_descriptors() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    command = [sys.executable, "-m", "openprogram_sim.cli", "serve", str(scenario), "--port", "0"]
    err: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=few_descriptors,
    ) as process:  # fmt: skip
        try:
            url, _ = read_banner(process)
            port = int(url.rsplit(":", 1)[1])
            stderr = process.stderr
            assert stderr is not None
            reading = threading.Thread(target=lambda: err.extend(stderr), daemon=True)
            reading.start()
            idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(140)]
            start = time.monotonic()
            # queued behind the idle ones: answered once they are let go (default settings)
            answer = httpx2.post(f"{url}/v1/chat/completions", json=HI, timeout=40)
            waited = time.monotonic() - start
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["message"]["content"] == "Hello."
            # Recovery is said at the first accept more than 0.5 s after the last refusal:
            # when the round that took this request was refused too, that is the next round
            # (a second on), which takes idle connections still queued. Stopping the server
            # first would end it before it could say so.
            recovered = "the server accepts connections again"
            for _ in range(300):
                if any(line.startswith(recovered) for line in err):
                    break
                time.sleep(0.05)
            for sock in idle:
                sock.close()
            process.send_signal(signal.SIGINT)
            process.wait(timeout=20)
            reading.join(5)
            out = process.stdout.read()  # type: ignore[union-attr]
        finally:
            if process.poll() is None:
                process.kill()
    text = "".join(err)
    assert len(text) < 2000, text[:3000]
    assert "Traceback" not in text
    refusals = [line for line in err if "cannot accept connections" in line]
    assert refusals == [
        "error: the server cannot accept connections: Too many open files (the process's "
        "file-descriptor limit (64) is used up). New connections wait in the listen queue and "
        "are accepted as descriptors free up (tried once a second; connections idle for 1 s "
        "with no request are closed to make room): raise the limit (ulimit -n), lower "
        "--max-connections, or shorten --header-timeout. Further refusals are counted, not "
        "logged.\n"
    ]
    assert any(line.startswith(recovered) for line in err), text
    assert waited < 20, waited
    assert "PASS every scripted turn was served" in out, out + text
