"""Sessions: each ``/s/{name}/`` prefix plays its own copy of the script, so many clients
share one server without cross-talk."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2

from openprogram_sim.wire import serve

SCRIPT = ["first reply", "second reply", "third reply"]
HI = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def _play(client: httpx2.AsyncClient, base: str, session: str) -> list[Any]:
    got = []
    for _ in range(len(SCRIPT) + 1):
        reply = await client.post(f"{base}/s/{session}/v1/chat/completions", json=HI)
        body = reply.json()
        got.append(
            body["choices"][0]["message"]["content"] if reply.is_success else reply.status_code
        )
        await asyncio.sleep(0)  # let the other sessions interleave
    return got


def test_a_hundred_concurrent_sessions_each_get_their_own_script() -> None:
    async def main(base: str) -> list[list[Any]]:
        limits = httpx2.Limits(max_connections=100)
        async with httpx2.AsyncClient(limits=limits, timeout=30) as client:
            return await asyncio.gather(*(_play(client, base, f"w{i}") for i in range(100)))

    with serve(SCRIPT) as server:
        results = asyncio.run(main(server.url))
        sessions = server.app.sessions
        assert len(sessions) == 100
        for i in range(100):
            session = server.session(f"w{i}")
            assert [r.index for r in session.requests] == [1, 2, 3, 4]
            assert session.unconsumed == 0
            assert len(session.errors) == 1 and "script is exhausted" in session.errors[0]
        assert server.requests == []  # the default session saw none of it
    assert all(r == [*SCRIPT, 400] for r in results)


def test_sessions_and_the_default_session_do_not_share_turns() -> None:
    with serve(SCRIPT) as server, httpx2.Client(base_url=server.url) as client:
        a = client.post("/v1/chat/completions", json=HI).json()
        b = client.post("/s/x/v1/chat/completions", json=HI).json()
        c = client.post("/v1/chat/completions", json=HI).json()
        texts = [r["choices"][0]["message"]["content"] for r in (a, b, c)]
        assert texts == ["first reply", "first reply", "second reply"]
        assert server.session("x").unconsumed == 2
        assert server.session("x").requests[0].url == f"{server.url}/s/x/v1/chat/completions"
        assert server.base_url("openai", "x") == f"{server.url}/s/x/v1"


def test_cycle_plays_the_script_again_when_it_runs_out() -> None:
    with serve(SCRIPT, cycle=True) as server, httpx2.Client(base_url=server.url) as client:
        replies = [client.post("/v1/chat/completions", json=HI).json() for _ in range(4)]
        server.assert_consumed()
    texts = [r["choices"][0]["message"]["content"] for r in replies]
    assert texts == [*SCRIPT, SCRIPT[0]]


def test_open_session_gives_one_session_its_own_script_and_others_keep_the_servers() -> None:
    with serve(SCRIPT) as server:
        base = server.open_session("own", ["mine only"])
        assert base == f"{server.url}/s/own/v1"
        with httpx2.Client(timeout=10) as client:
            own = client.post(f"{base}/chat/completions", json=HI)
            again = client.post(f"{base}/chat/completions", json=HI)
            other = client.post(f"{server.url}/s/other/v1/chat/completions", json=HI)
        assert own.json()["choices"][0]["message"]["content"] == "mine only"
        assert again.status_code == 400
        assert "the script is exhausted" in again.json()["error"]["message"]
        assert other.json()["choices"][0]["message"]["content"] == "first reply"
        report = server.end_session("own")
        assert (report.turns, report.served) == (1, 1)
        try:
            server.open_session("other", ["late"])
        except ValueError as error:
            assert "session 'other' is live" in str(error)
        else:
            raise AssertionError("a live session was given a new script")
        try:
            server.open_session("../x", ["bad"])
        except ValueError as error:
            assert "is not a session name" in str(error)
        else:
            raise AssertionError("a bad name was accepted")
