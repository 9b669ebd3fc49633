"""A request whose whole body came with its head is run at once by the server (no task,
no turn of the loop before its answer), and one that then has to wait goes on where it
stopped: over real loopback HTTP on both stacks, answers that wait (latency, paced
chunks, a hang) keep their timing, run side by side, end when the server stops, and
leave the server answering; pipelined requests of both kinds are answered in order."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any

import httpx2
import pytest

from openprogram_sim.wire import _server, serve


@pytest.fixture(autouse=True, params=["pure", "fast"])
def stack(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "fast" and _server._fast_missing() is not None:
        pytest.skip(f"the fast extra is not installed ({_server._fast_missing()})")
    monkeypatch.setenv(_server.STACK_VARIABLE, request.param)
    return str(request.param)


HI = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
STREAM = {**HI, "stream": True}


def request_bytes(body: dict[str, Any], path: str = "/v1/chat/completions") -> bytes:
    data = json.dumps(body).encode()
    return (
        f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"content-length: {len(data)}\r\n\r\n".encode()
        + data
    )


def test_answers_that_wait_run_side_by_side_and_keep_their_latency() -> None:
    slow = {"text": "late but here", "latency": 0.4}
    with serve([slow], cycle=True) as server:

        def one(out: list[Any]) -> None:
            with httpx2.Client(base_url=server.url, timeout=10) as client:
                out.append(client.post("/v1/chat/completions", json=HI))

        answers: list[Any] = []
        threads = [threading.Thread(target=one, args=(answers,)) for _ in range(4)]
        start = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - start
        report = server.check()
    assert [a.status_code for a in answers] == [200] * 4
    assert {a.json()["choices"][0]["message"]["content"] for a in answers} == {"late but here"}
    assert 0.4 <= elapsed < 1.5  # each waited its latency, none waited for another's
    assert report.passed and report.model_calls == 4


def test_a_paced_stream_keeps_its_pauses_and_its_bytes() -> None:
    turn = {"text": "a" * 24 * 4, "wire": {"interval": 0.1}}
    with serve([turn, "Plain."]) as server, httpx2.Client(base_url=server.url) as client:
        start = time.monotonic()
        with client.stream("POST", "/v1/chat/completions", json=STREAM) as answer:
            arrivals = [time.monotonic() - start for _ in answer.iter_lines()]
        plain = client.post("/v1/chat/completions", json=HI)
    assert answer.status_code == 200 and arrivals[-1] >= 0.3
    assert plain.json()["choices"][0]["message"]["content"] == "Plain."


def test_a_held_answer_ends_when_the_server_stops_and_others_are_answered_meanwhile() -> None:
    with serve([{"text": "never", "fault": "hang"}, "Meanwhile."]) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(request_bytes(HI))
        time.sleep(0.2)
        with httpx2.Client(base_url=server.url) as client:
            other = client.post("/v1/chat/completions", json=HI)
        start = time.monotonic()
        server.stop()
        stopped = time.monotonic() - start
        rest = b""
        while True:
            more = sock.recv(65536)
            if not more:
                break
            rest += more
        sock.close()
    assert other.json()["choices"][0]["message"]["content"] == "Meanwhile."
    assert stopped < 3  # the held answer's wait was ended, not waited out
    assert b"never" not in rest


def test_pipelined_requests_that_wait_and_that_do_not_are_answered_in_order() -> None:
    script: list[Any] = ["First.", {"text": "Second, late.", "latency": 0.2}, "Third."]
    with serve(script) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(request_bytes(HI) * 3)
            got = b""
            while got.count(b"HTTP/1.1 200 OK") < 3 or not got.endswith(b"}"):
                more = sock.recv(65536)
                if not more:
                    break
                got += more
        report = server.check()
    texts = [
        json.loads(part.partition(b"\r\n\r\n")[2])["choices"][0]["message"]["content"]
        for part in got.split(b"HTTP/1.1 ")[1:]
    ]
    assert texts == ["First.", "Second, late.", "Third."]
    assert report.passed and report.model_calls == 3


def test_a_client_gone_during_a_wait_leaves_the_server_answering() -> None:
    slow = {"text": "late", "latency": 0.3}
    with serve([slow, "Still here."]) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(request_bytes(HI))
        time.sleep(0.05)
        sock.close()  # gone before the answer
        time.sleep(0.4)
        with httpx2.Client(base_url=server.url) as client:
            answer = client.post("/v1/chat/completions", json=HI)
    assert answer.json()["choices"][0]["message"]["content"] == "Still here."


def test_a_server_full_refuses_the_request_past_the_cap_run_at_once() -> None:
    with serve(["One.", "Two."], max_connections=1) as server:

        async def go() -> tuple[bytes, bytes]:
            first = await asyncio.open_connection("127.0.0.1", server.port)
            first[1].write(request_bytes(HI))
            answered = await asyncio.wait_for(first[0].read(65536), 10)
            second = await asyncio.open_connection("127.0.0.1", server.port)
            await asyncio.sleep(0.1)
            second[1].write(request_bytes(HI))
            refused = await asyncio.wait_for(second[0].read(65536), 10)
            for _, writer in (first, second):
                writer.close()
            return refused, answered

        refused, answered = asyncio.run(go())
    assert refused.startswith(b"HTTP/1.1 503 ") and b"max_connections" in refused
    assert answered.startswith(b"HTTP/1.1 200 OK") and b"One." in answered


def test_a_request_run_at_once_then_cancelled_in_its_task_unwinds_as_a_task_would() -> None:
    """What uvicorn does to a request still running when the graceful shutdown runs out
    (it cancels its task) reaches the request's own code: its ``finally`` runs and the
    task ends cancelled, as when the request had run in that task from the start."""
    from openprogram_sim.wire._guard import _resumed

    async def go() -> list[str]:
        seen: list[str] = []
        gate = asyncio.get_running_loop().create_future()

        async def request() -> None:
            try:
                seen.append("started")
                await gate
                seen.append("resumed")
                await asyncio.sleep(30)
            finally:
                seen.append("finally")

        coro = request()
        waiting = coro.send(None)  # run at once, outside any task, up to its first wait
        task = asyncio.get_running_loop().create_task(_resumed(coro, waiting))
        await asyncio.sleep(0)
        gate.set_result(None)
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return seen

    assert asyncio.run(go()) == ["started", "resumed", "finally"]


def raw_answers(port: int, requests: list[bytes]) -> bytes:
    """Each request on a connection of its own: the answers' bytes, read to the close or
    to the end of the body, the date header's value blanked."""
    out = []
    for request in requests:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(request)
            got = b""
            while not (got.endswith(b"\r\n0\r\n\r\n") or got.endswith(b"}")):
                more = sock.recv(65536)
                if not more:
                    break
                got += more
        head, _, body = got.partition(b"\r\n\r\n")
        lines = [b"date: -" if ln.startswith(b"date: ") else ln for ln in head.split(b"\r\n")]
        out.append(b"\r\n".join(lines) + b"\r\n\r\n" + body)
    return b"|".join(out)


@pytest.mark.parametrize("stack", ["fast"], indirect=True)
def test_a_whole_answer_written_at_once_is_what_uvicorns_sends_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from openprogram_sim.wire._guard import GuardedHttptools

    used = []
    writer = GuardedHttptools.send_whole

    def counted(*args: Any) -> bool:
        used.append(writer(*args))
        return used[-1]

    turn: Any = {"text": "Hello there, a reply of some length.", "tool_calls": [{"f": {"a": 1}}]}
    limited: Any = {"text": "slow down", "wire": {"status": 429, "retry_after": 2}}
    closing = request_bytes(STREAM).replace(b"host: x\r\n", b"host: x\r\nconnection: close\r\n")
    requests = [request_bytes(STREAM), request_bytes(HI), closing, request_bytes(HI)]
    seen = {}
    for whole in (True, False):
        monkeypatch.setattr(GuardedHttptools, "send_whole", counted if whole else lambda *a: False)
        seen[whole] = b""
        for script, sent in ((turn, requests), (limited, [request_bytes(HI)] * 2)):
            with serve([script], cycle=True) as server:
                raw_answers(server.port, sent[:2])  # each turn served once: ready from now
                seen[whole] += raw_answers(server.port, sent) + b"|"
                report = server.check()
            assert report.passed, report.render()
    assert used and all(used)  # the writer wrote every ready answer
    assert seen[True] == seen[False]
    answers = seen[True].split(b"|")
    assert b"transfer-encoding: chunked" in answers[0] and b"data: [DONE]" in answers[0]
    assert b"content-length: " in answers[1] and b"connection: close" in answers[2]
    assert answers[-2].startswith(b"HTTP/1.1 429 ") and b"retry-after: 2" in answers[-2]


def test_the_head_timeout_runs_from_each_answer_on_a_keep_alive_connection() -> None:
    """The head timer is kept armed across requests on a connection: a connection that
    asks again before the timeout is never cut, however long it lives; a partial head
    after an answer gets its 408 a whole timeout after that answer, not sooner."""
    with (
        serve(["Hi."], cycle=True, header_timeout=0.5) as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock,
    ):
        for _ in range(4):  # 4 x 0.3 s: past the timeout since the first answer
            sock.sendall(request_bytes(HI))
            got = b""
            while not got.endswith(b"}"):
                more = sock.recv(65536)
                assert more, "the connection was closed between requests"
                got += more
            assert got.startswith(b"HTTP/1.1 200 OK")
            time.sleep(0.3)
        answered = time.monotonic()
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        late = b""
        while True:
            more = sock.recv(65536)
            if not more:
                break
            late += more
        waited = time.monotonic() - answered
    assert late.startswith(b"HTTP/1.1 408 ") and b"header_timeout" in late
    assert 0.15 <= waited < 1.5  # 0.5 s after the last answer (0.3 s of it slept already)


def test_an_idle_keep_alive_connection_is_closed_a_keep_alive_after_its_last_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The keep-alive timer is kept armed across requests: a connection that asks again
    within the keep-alive is never closed, however long it lives; one left idle is closed
    (no answer, just the end) the keep-alive after its last answer, not sooner."""
    monkeypatch.setattr(_server, "DEFAULT_KEEP_ALIVE", 0.5)
    with (
        serve(["Hi."], cycle=True) as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock,
    ):
        for turn in range(4):  # 0.3 s apart: past the keep-alive since the first answer
            if turn:
                time.sleep(0.3)
            sock.sendall(request_bytes(HI))
            got = b""
            while not got.endswith(b"}"):
                more = sock.recv(65536)
                assert more, "the connection was closed between requests"
                got += more
            assert got.startswith(b"HTTP/1.1 200 OK")
        answered = time.monotonic()
        rest = sock.recv(65536)
        idle = time.monotonic() - answered
    assert rest == b""  # closed while idle, nothing written
    assert 0.4 <= idle < 1.5
