"""The serve hot path over real HTTP on loopback, on both stacks: the model-call paths
found before starlette's router (the rest still the router's, with its 404, 405 and
redirects), requests kept as they came and masked when read (no key in a trace, a report
or a request record), answers kept ready per turn (each request's own ids and lengths,
a turn changed in place served anew), and a body that comes in pieces."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import httpx2
import pytest
from starlette.routing import Route, Router

from openprogram_sim.models import Turn, TurnToolCall
from openprogram_sim.report import session_html, session_junit
from openprogram_sim.wire import WireServer, _server, serve


@pytest.fixture(autouse=True, params=["pure", "fast"])
def stack(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "fast" and _server._fast_missing() is not None:
        pytest.skip(f"the fast extra is not installed ({_server._fast_missing()})")
    monkeypatch.setenv(_server.STACK_VARIABLE, request.param)
    return str(request.param)


HI = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
STREAM = {**HI, "stream": True}
KEY = "sk-" + "hot-path-" + "0123456789abcdef"  # no key-shaped literal in the source


def chunks(text: str) -> list[dict[str, Any]]:
    """The JSON events of an SSE body (``[DONE]`` left out)."""
    out = []
    for line in text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[len("data: ") :]))
    return out


# --------------------------------------------------------------------------- routing


@pytest.mark.parametrize("prefix", ["", "/s/a"])
def test_other_methods_on_a_model_call_path_get_the_routers_405(prefix: str) -> None:
    with serve(["Hello."]) as server, httpx2.Client(base_url=server.url) as client:
        got = client.get(prefix + "/v1/chat/completions")
        put = client.put(prefix + "/v1/messages", json=HI)
        assert client.post(prefix + "/v1/chat/completions", json=HI).status_code == 200
    assert (got.status_code, got.text, got.headers["allow"]) == (405, "Method Not Allowed", "POST")
    assert (put.status_code, put.headers["allow"]) == (405, "POST")


@pytest.mark.parametrize("prefix", ["", "/s/a"])
def test_a_trailing_slash_gets_the_routers_redirect(prefix: str) -> None:
    with serve(["Hello."]) as server, httpx2.Client(base_url=server.url) as client:
        answer = client.post(prefix + "/v1/chat/completions/", json=HI)
    assert answer.status_code == 307
    assert answer.headers["location"] == f"{server.url}{prefix}/v1/chat/completions"


@pytest.mark.parametrize(
    "path", ["/v1/chat/completionsx", "/s//v1/chat/completions", "/x/v1/chat/completions"]
)
def test_paths_near_a_model_call_path_are_the_routers_404(path: str) -> None:
    with serve(["Hello."]) as server, httpx2.Client(base_url=server.url) as client:
        answer = client.post(path, json=HI)
        report = server.check()
    assert answer.status_code == 404
    assert "is not an API route this server serves" in answer.json()["error"]["message"]
    assert not report.passed and "is not an API route" in report.render()


def test_head_and_get_of_the_model_list_and_the_session_routes_still_answer() -> None:
    with serve(["Hello."]) as server, httpx2.Client(base_url=server.url) as client:
        head = client.head("/v1/models")
        listed = client.get("/s/a/v1/models", headers={"anthropic-version": "2023-06-01"})
        assert client.post("/s/a/v1/chat/completions", json=HI).status_code == 200
        trace = client.get("/s/a/trace")
        ended = client.delete("/s/a")
    assert (head.status_code, head.content) == (200, b"")
    assert listed.json()["data"][0]["type"] == "model"  # Anthropic's shape
    assert trace.status_code == 200 and trace.json()["session"] == "a"
    assert ended.json()["state"] == "ended" and ended.json()["passed"]


def test_the_url_recorded_is_the_full_path_with_its_query_on_either_route() -> None:
    with serve(["A.", "B."]) as server, httpx2.Client(base_url=server.url) as client:
        client.post("/v1/chat/completions?x=1", json=HI)
        client.post("/s/a/v1/chat/completions?y=2", json=HI)
        plain = server.session().requests[0].url
        named = server.session("a").requests[0].url
    assert plain == f"{server.url}/v1/chat/completions?x=1"
    assert named == f"{server.url}/s/a/v1/chat/completions?y=2"


def test_a_router_set_in_place_answers_every_path() -> None:
    """As bench/serve_peers.py's floor does: the router given is used as it is."""

    class Endpoint:
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            while (await receive()).get("more_body"):
                pass
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"floor"})

    server = WireServer(["Hello."])
    server.app.router = Router([Route("/v1/chat/completions", Endpoint(), methods=["POST"])])
    with server, httpx2.Client(base_url=server.url) as client:
        assert client.post("/v1/chat/completions", json=HI).text == "floor"
        assert client.post("/s/a/v1/chat/completions", json=HI).status_code == 404


# --------------------------------------------------------------------------- records


def test_a_key_never_reaches_the_records_the_trace_or_the_reports(tmp_path: Path) -> None:
    headers = {"authorization": f"Bearer {KEY}", "x-api-key": KEY}
    leaked = {"model": "m", "messages": [{"role": "user", "content": f"my key is {KEY}"}]}
    with serve(["A.", "B."]) as server, httpx2.Client(base_url=server.url) as client:
        base = "/s/k/v1/chat/completions"
        assert client.post(base, json=HI, headers=headers).status_code == 200
        assert client.post(f"{base}?key={KEY}", json=leaked).status_code == 200
        trace = client.get("/s/k/trace")
        requests = server.session("k").requests
        report = server.check(
            write=[session_html(tmp_path / "r.html"), session_junit(tmp_path / "j.xml")]
        )
        ended = client.delete("/s/k")
    assert requests[0].headers["authorization"] == "Bearer <redacted>"
    assert requests[0].headers["x-api-key"] == "<redacted>"
    assert requests[1].url == f"{server.url}{base}?key=<redacted>"
    assert KEY not in repr(requests[0]) and KEY not in requests[1].url
    assert trace.status_code == 200 and KEY in trace.text  # the body as sent: the user's text
    assert "Bearer" not in trace.text and "x-api-key" not in trace.text  # no header in a trace
    # the body holding the key the query carried is the client check's finding
    assert "no_key_in_body broken by request #2" in report.render()
    assert "?key=" in report.render()
    for written in (tmp_path / "r.html", tmp_path / "j.xml"):
        text = written.read_text()
        assert "Bearer " + KEY not in text and f"key={KEY}" not in text
    assert f"key={KEY}" not in ended.text and "Bearer " + KEY not in ended.text


def test_a_key_in_the_body_that_its_header_carried_fails_the_client_check() -> None:
    with serve(["A."]) as server, httpx2.Client(base_url=server.url) as client:
        body = {"model": "m", "messages": [{"role": "user", "content": f"key {KEY}"}]}
        auth = {"authorization": f"Bearer {KEY}"}
        assert client.post("/s/k/v1/chat/completions", json=body, headers=auth).status_code == 200
        report = server.check()
    assert (
        "client check no_key_in_body broken by request #1: the body holds the API key the "
        "client sent in authorization"
    ) in report.render()


def test_requests_past_the_default_sessions_kept_bodies_are_counted_and_masked() -> None:
    from openprogram_sim.wire._app import WireApp

    with serve(["A."], cycle=True) as server, httpx2.Client(base_url=server.url) as client:
        server.app.keep_bodies = 2  # (the default session is made on its first request)
        for _ in range(4):
            client.post("/v1/chat/completions", json=HI, headers={"x-api-key": KEY})
        requests = server.requests
        session = server.session()
    assert [r.body == HI for r in requests] == [True, True, False, False]
    assert session.bodies_dropped == 2 and isinstance(server.app, WireApp)
    assert {r.headers["x-api-key"] for r in requests} == {"<redacted>"}


# --------------------------------------------------------------------------- ready answers


def test_each_answer_of_a_repeated_turn_carries_its_own_request_number() -> None:
    turn = {"text": "Hi.", "tool_calls": [{"search": {"q": "tides"}}]}
    with serve([turn], cycle=True) as server, httpx2.Client(base_url=server.url) as client:
        answers = [client.post("/v1/chat/completions", json=STREAM) for _ in range(11)]
        plain = [client.post("/v1/chat/completions", json=HI) for _ in range(2)]
    ids = [{c["id"] for c in chunks(a.text)} for a in answers]
    assert ids == [{f"chatcmpl-wire{n}"} for n in range(1, 12)]
    calls = [chunks(a.text)[2]["choices"][0]["delta"]["tool_calls"][0]["id"] for a in answers]
    assert calls == [f"call_wire{n}_0" for n in range(1, 12)]
    assert [p.json()["id"] for p in plain] == ["chatcmpl-wire12", "chatcmpl-wire13"]
    for answer in plain:  # a whole body: its own length, whatever the number's digits
        assert int(answer.headers["content-length"]) == len(answer.content)
        assert "transfer-encoding" not in answer.headers
    assert answers[0].headers["transfer-encoding"] == "chunked"


def test_the_trace_names_each_requests_own_call_ids() -> None:
    turn = {"tool_calls": [{"search": {"q": "tides"}}]}
    with serve([turn], cycle=True) as server, httpx2.Client(base_url=server.url) as client:
        for _ in range(3):
            client.post("/s/t/v1/chat/completions", json=STREAM)
        trace = client.get("/s/t/trace").json()["trace"]
    starts = [e["tool_call_id"] for e in trace if e["type"] == "tool_execution_start"]
    assert starts == ["call_wire1_0", "call_wire2_0", "call_wire3_0"]


def test_a_turn_changed_in_place_is_served_as_it_is_now() -> None:
    turn = Turn(text="before")
    with serve([turn], cycle=True) as server, httpx2.Client(base_url=server.url) as client:
        first = [client.post("/v1/chat/completions", json=HI).json() for _ in range(3)]
        turn.text = "after"
        turn.tool_calls.append(TurnToolCall("search", {"q": "x"}))
        changed = client.post("/v1/chat/completions", json=HI).json()
    assert [f["choices"][0]["message"]["content"] for f in first] == ["before"] * 3
    message = changed["choices"][0]["message"]
    assert message["content"] == "after"
    assert message["tool_calls"][0]["function"]["name"] == "search"
    assert message["tool_calls"][0]["id"] == "call_wire4_0"


def test_a_fault_is_still_delivered_step_by_step_when_repeated() -> None:
    script: list[Any] = [{"text": "Hello there.", "wire": {"cut_after": 1}}, "Fine."]
    with serve(script, cycle=True) as server, httpx2.Client(base_url=server.url) as client:
        for _ in range(2):
            with pytest.raises(httpx2.RemoteProtocolError):
                client.post("/v1/chat/completions", json=STREAM)
            assert client.post("/v1/chat/completions", json=STREAM).status_code == 200


def test_a_rate_limit_turn_answers_429_each_time_with_its_headers() -> None:
    turn = {"stop_reason": "error", "error_reason": "rate_limit", "retry_after": 2}
    with serve([turn], cycle=True) as server, httpx2.Client(base_url=server.url) as client:
        answers = [client.post("/v1/chat/completions", json=HI) for _ in range(3)]
        rounds = server.session().report().rounds
    assert [a.status_code for a in answers] == [429] * 3
    assert [a.headers["retry-after"] for a in answers] == ["2"] * 3
    assert [(r["status"], r["retry_after"]) for r in rounds] == [(429, 2.0)] * 3


# --------------------------------------------------------------------------- the body


def raw_request(port: int, head: bytes, pieces: list[bytes], pause: float) -> bytes:
    async def main() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head)
        for piece in pieces:
            await asyncio.sleep(pause)
            writer.write(piece)
        answer = await reader.readuntil(b"\r\n\r\n")
        writer.close()
        return answer

    return asyncio.run(main())


def test_a_body_sent_in_pieces_is_read_whole_and_answered() -> None:
    body = json.dumps(HI).encode()
    head = (
        b"POST /s/p/v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json"
        b"\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    with serve(["Hello."], body_timeout=5) as server:
        answer = raw_request(server.port, head, [body[:10], body[10:30], body[30:]], 0.05)
        requests = server.session("p").requests
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert requests[0].body == HI


SLOW_HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json"
    b"\r\ncontent-length: 100\r\n\r\n"
)


def test_a_body_that_stops_coming_gets_408_after_the_body_timeout() -> None:
    with serve(["Hello."], body_timeout=0.3, body_min_rate=None) as server:
        answer = raw_request(server.port, SLOW_HEAD, [b'{"model": '], 0.05)
        report = server.check()
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert "no byte for 0.3 s after 10 byte(s) (body_timeout)" in report.render()


def test_a_body_behind_its_rate_gets_408_saying_so() -> None:
    # 10 bytes at 0.05 s: the whole body's limit (0.3 s + 10 / 1024 s) comes before the
    # idle one, as it did with a timeout per read
    with serve(["Hello."], body_timeout=0.3) as server:
        answer = raw_request(server.port, SLOW_HEAD, [b'{"model": '], 0.05)
        report = server.check()
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert (
        "the request body came too slowly: 10 byte(s) in 0.3 s, where a body may take 0.3 s "
        "plus 1 s per 1024 bytes (body_timeout, body_min_rate)"
    ) in report.render()


def test_the_server_answers_on_after_many_bodies_read_whole() -> None:
    with serve(["A."], cycle=True) as server:
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.settimeout(5)
            body = json.dumps(HI).encode()
            request = (
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: "
                + str(len(body)).encode()
                + b"\r\n\r\n"
                + body
            )
            sock.sendall(request * 3)  # pipelined: each body is in before its turn
            got = b""
            while got.count(b"HTTP/1.1 200 ") < 3:
                got += sock.recv(65536)
        assert server.session().count == 3
