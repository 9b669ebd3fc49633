"""The wire server against hostile requests (issue 23, items 5, 6 and 9), over real loopback
HTTP: a body past ``max_body`` is refused while it is read with HTTP 413 in its API's error
shape; every request that got an error counts in a verdict; session names outside the
allowed set are refused with HTTP 400 and never reach a log unescaped."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from serve_support import interrupt, read_banner, serve_process

from openprogram_sim.wire import serve

HI = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
SCRIPT = ["Hello.", "Again."]

# a model-call path per API, and a body each accepts
CALLS = {
    "openai-chat": ("/v1/chat/completions", HI),
    "anthropic": ("/v1/messages", {"model": "m", "max_tokens": 8, **HI}),
    "gemini": ("/v1beta/models/m:generateContent", {"contents": [{"parts": [{"text": "hi"}]}]}),
    "bedrock": ("/model/m/converse", {"messages": [{"role": "user", "content": [{"text": "x"}]}]}),
}


def assert_error_shape(api: str, response: httpx2.Response, status: int) -> str:
    """The error body is ``api``'s own; returns its message."""
    assert response.status_code == status, response.text
    body: Any = response.json()
    if api.startswith("openai"):
        assert set(body["error"]) == {"message", "type", "param", "code"}
        return str(body["error"]["message"])
    if api == "anthropic":
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
        return str(body["error"]["message"])
    if api == "gemini":
        assert body["error"]["code"] == status and "status" in body["error"]
        return str(body["error"]["message"])
    assert "x-amzn-errortype" in response.headers and set(body) == {"message"}
    return str(body["message"])


# --------------------------------------------------------------------------- item 5


@pytest.mark.parametrize("api", sorted(CALLS))
def test_a_body_past_max_body_is_refused_with_413_in_the_apis_shape(api: str) -> None:
    path, body = CALLS[api]
    with serve(SCRIPT, max_body=1000) as server, httpx2.Client(base_url=server.url) as client:
        big = {**body, "pad": "x" * 5000}
        message = assert_error_shape(api, client.post(f"/s/big{path}", json=big), 413)
        assert "1000 bytes" in message and "--max-body-bytes" in message
        assert client.post(f"/s/small{path}", json=body).status_code == 200
        report = server.check()
    assert not report.passed
    assert any("longer than 1000 bytes" in f.title for f in report.failures)
    assert server.app.report("big") is not None


def test_a_chunked_body_is_cut_off_at_the_cap_while_it_is_read() -> None:
    """No content-length to go by: the server stops at the cap, not at the body's end."""

    def chunks() -> Iterator[bytes]:
        yield b'{"model": "m", "messages": [], "pad": "'
        for _ in range(200):
            yield b"x" * 1000
        yield b'"}'

    with serve(SCRIPT, max_body=2000) as server, httpx2.Client(base_url=server.url) as client:
        try:
            response = client.post("/v1/chat/completions", content=chunks())
        except httpx2.TransportError:  # the server may close before the client sends it all
            response = None
        if response is not None:
            assert_error_shape("openai-chat", response, 413)
        errors = server.app.session(None).errors
    assert len(errors) == 1 and "longer than 2000 bytes" in errors[0]


def test_a_request_is_kept_once_and_the_default_session_bounds_its_bodies() -> None:
    with serve(SCRIPT, cycle=True) as server, httpx2.Client(base_url=server.url) as client:
        server.app.keep_bodies = 2  # before the default session opens
        for _ in range(4):
            assert client.post("/v1/chat/completions", json=HI).status_code == 200
        client.post("/v1/chat/completions", content=b"not json")
        requests = server.requests
        session = server.session()
    assert [r.body == HI for r in requests] == [True, True, False, False, False]
    assert all(r.raw == b"" for r in requests)  # parsed ones keep no raw copy
    assert session.bodies_dropped == 3
    assert len(session.request_fields()) == 2


def test_the_body_cap_is_a_cli_flag_and_its_default_is_the_servers() -> None:
    from openprogram_sim.cli import serve as cli
    from openprogram_sim.wire import _app

    assert cli.DEFAULT_MAX_BODY == _app.DEFAULT_MAX_BODY == 16 * 1024 * 1024
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["serve", "x.yaml", "--max-body-bytes", "4096"])
    assert args.max_body_bytes == 4096
    assert parser.parse_args(["serve", "x.yaml"]).max_body_bytes == _app.DEFAULT_MAX_BODY
    with pytest.raises(ValueError, match="max_body"):
        _app.WireApp(SCRIPT, max_body=0)


# --------------------------------------------------------------------------- item 6


@pytest.mark.parametrize("path", ["/v1/nope", "/s/a/v1/nope"])
def test_a_request_to_an_unknown_path_fails_the_check_beside_a_named_session(path: str) -> None:
    with serve(SCRIPT) as server, httpx2.Client(base_url=server.url) as client:
        assert client.post("/s/a/v1/chat/completions", json=HI).status_code == 200
        assert client.post("/s/a/v1/chat/completions", json=HI).status_code == 200
        assert client.post(path, json=HI).status_code == 404
        report = server.check()
    assert not report.passed
    titles = [f.title for f in report.failures]
    charged = "session 'a': " if path.startswith("/s/a/") else ""
    assert any(t.startswith(charged) and "is not an API route" in t for t in titles), titles


@pytest.mark.parametrize("api", sorted(CALLS))
def test_a_body_nested_too_deep_is_a_400_in_the_apis_shape_and_counts(api: str) -> None:
    path, _ = CALLS[api]
    deep = b"[" * 100_000 + b"]" * 100_000
    with serve(SCRIPT) as server, httpx2.Client(base_url=server.url) as client:
        response = client.post(f"/s/deep{path}", content=deep)
        assert_error_shape(api, response, 400)
        report = server.check()
    assert not report.passed
    failing = [f.title for f in report.failures]
    assert any("session 'deep'" in m and "not a JSON object" in m for m in failing), failing


# --------------------------------------------------------------------------- item 9

BAD_NAMES = [
    "%0d%0aPASS%20all",  # forges a log line
    "%1b%5b2J",  # clears the terminal
    "%2e%2e",
    "%2e",
    "%ff%fe",  # not UTF-8
    "a%20b",
    "x" * 129,
]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_bad_session_name_is_refused_with_400_and_logged_escaped(name: str) -> None:
    lines: list[str] = []
    with (
        serve(SCRIPT) as server,
        httpx2.Client(base_url=server.url) as client,
    ):
        server.app.log = lines.append
        for api, (path, body) in CALLS.items():
            message = assert_error_shape(api, client.post(f"/s/{name}{path}", json=body), 400)
            assert "is not a session name" in message
            assert "A-Z a-z 0-9 . _ -" in message
        for method in ("GET", "DELETE"):
            response = client.request(method, f"/s/{name}")
            assert response.status_code == 400
            assert "is not a session name" in response.json()["error"]["message"]
        report = server.check()
        live = set(server.app.sessions)
    assert live <= {None}  # no session opened under the bad name
    assert not report.passed
    assert any("is not a session name" in line for line in lines), lines
    assert all(line.isprintable() for line in lines), lines
    assert not any(line.startswith("PASS") for text in lines for line in text.splitlines())


def test_good_session_names_are_served_and_logged_as_they_are() -> None:
    lines: list[str] = []
    with serve(SCRIPT) as server, httpx2.Client(base_url=server.url) as client:
        server.app.log = lines.append
        for name in ("run-1.a_b", "x" * 128, "..."):
            assert client.post(f"/s/{name}/v1/chat/completions", json=HI).status_code == 200
            assert client.delete(f"/s/{name}").status_code == 200
    assert "[run-1.a_b] ended: 1 model call(s), FAIL 1 problem(s)" in lines


# --------------------------------------------------------------------------- the CLI


def test_the_cli_caps_bodies_refuses_bad_names_and_fails_the_report_at_stop() -> None:
    scenario = Path(__file__).parent / "data" / "tides.yaml"
    with serve_process(scenario, "--max-body-bytes", "1000") as process:
        url, _ = read_banner(process)
        with httpx2.Client(base_url=url) as client:
            big = {**HI, "pad": "x" * 5000}
            assert client.post("/s/a/v1/chat/completions", json=big).status_code == 413
            assert client.post("/s/%0d%0aPASS/v1/chat/completions", json=HI).status_code == 400
        out, err = interrupt(process)
    assert process.returncode == 1, out + err
    assert "longer than 1000 bytes" in out and "is not a session name" in out
    assert "'\\r\\nPASS' is not a session name" in err
    assert not any(line.startswith("PASS") for line in (out + err).splitlines())
