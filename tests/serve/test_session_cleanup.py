"""Sessions end, so a long-running server stays bounded: ``DELETE /s/NAME`` ends one and
answers with its report, an idle session expires after the session TTL, a cap refuses
sessions beyond ``max_sessions`` in the API's own error shape; and the report at stop still
counts every session, ended ones included. All over real loopback HTTP."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx2
import pytest
from _support import run_cli
from serve_support import interrupt, read_banner, serve_process

from openprogram_sim.play import serve_scenario
from openprogram_sim.scenario import load_scenario
from openprogram_sim.wire import SessionReport, serve
from openprogram_sim.wire._app import WireApp
from openprogram_sim.wire._session import EndedSessions

TIDES_PATH = Path(__file__).parent / "data" / "tides.yaml"
TIDES = load_scenario(TIDES_PATH)
SEARCH = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}
ASK = {"role": "user", "content": "Why are there tides?"}
HI = {"model": "m", "messages": [ASK]}


def follow_the_script(client: httpx2.Client, session: str) -> str:
    """The client the tides scenario expects: it offers ``search``, runs the call, asks
    again with the result."""
    url = f"/s/{session}/v1/chat/completions"
    first = client.post(url, json={**HI, "tools": [SEARCH]}).json()["choices"][0]["message"]
    result = {"role": "tool", "tool_call_id": first["tool_calls"][0]["id"],
              "content": "Tides follow the moon."}  # fmt: skip
    second = client.post(url, json={"model": "m", "messages": [ASK, first, result]})
    return str(second.json()["choices"][0]["message"]["content"])


def stop_early(client: httpx2.Client, session: str) -> None:
    """A client that offers no tools and stops after one call."""
    assert client.post(f"/s/{session}/v1/chat/completions", json=HI).status_code == 200


# --------------------------------------------------------------------------- DELETE


def test_delete_ends_a_session_and_answers_with_its_report() -> None:
    with serve_scenario(TIDES) as server, httpx2.Client(base_url=server.url) as client:
        assert follow_the_script(client, "good") == "Because of the moon."
        stop_early(client, "bad")
        good = client.delete("/s/good")
        bad = client.delete("/s/bad")
        assert set(server.app.sessions) == set()  # both are gone from the live sessions

    assert good.status_code == 200 and good.headers["content-type"] == "application/json"
    assert good.json() == {
        "session": "good", "state": "ended", "passed": True, "turns": 2, "served": 2,
        "unconsumed": 0, "model_calls": 2, "requests": 2, "disconnects": 0, "errors": [],
        "failures": [], "report": "",
    }  # fmt: skip
    report = bad.json()
    assert bad.status_code == 200 and report["passed"] is False
    assert (report["model_calls"], report["unconsumed"]) == (1, 1)
    titles = [f["title"] for f in report["failures"]]
    assert "1 of 2 scripted turns were never requested (the client made 1 model call(s))" in titles
    assert "request 1 (depth 0, round 1) differs" in report["report"]
    assert 'tools: expected ["search"], actual []' in report["report"]
    where = next(f["where"] for f in report["failures"] if f["where"])
    here = Path.cwd()  # the expectation's file and line, relative to the working directory
    shown = TIDES_PATH.relative_to(here) if TIDES_PATH.is_relative_to(here) else TIDES_PATH
    assert where.startswith(f"{shown}:")


def test_an_ended_name_starts_afresh_and_its_report_stays_readable() -> None:
    with serve_scenario(TIDES) as server, httpx2.Client(base_url=server.url) as client:
        stop_early(client, "x")
        assert client.delete("/s/x").status_code == 200
        again = client.delete("/s/x")
        kept = client.get("/s/x")
        # the name plays the script from its first turn again
        assert follow_the_script(client, "x") == "Because of the moon."
        live = client.get("/s/x").json()
        unknown = client.delete("/s/never")
    assert again.status_code == 404
    message = again.json()["error"]["message"]
    assert "no live session 'x': it has already ended; GET /s/x gives its report" in message
    assert kept.status_code == 200 and kept.json()["state"] == "ended"
    assert kept.json()["unconsumed"] == 1
    assert (live["state"], live["passed"], live["model_calls"]) == ("live", True, 2)
    assert unknown.status_code == 404
    assert "no live session 'never': none is open under that name" in unknown.text


def test_the_report_at_stop_counts_ended_sessions() -> None:
    with serve_scenario(TIDES) as server, httpx2.Client(base_url=server.url) as client:
        for name in ("a", "b"):
            follow_the_script(client, name)
            client.delete(f"/s/{name}")
        stop_early(client, "c")
        client.delete("/s/c")
        follow_the_script(client, "d")  # still live at stop
        report = server.check()
        with pytest.raises(AssertionError, match=r"session 'c'\): 1 of 2 scripted turns"):
            server.assert_consumed()
    assert report.checked == [
        "session 'd'",
        "session 'c' (ended)",
        "2 ended session(s) that passed",
    ]
    assert report.model_calls == 2 + 2 + 1 + 2
    titles = [f.title for f in report.failures]
    unserved = "1 of 2 scripted turns were never requested (the client made 1 model call(s))"
    assert titles[0] == f"session 'c': {unserved}"
    # every failure is c's: the default session (never used) is not dragged in
    assert all(t.startswith("session 'c': ") for t in titles)


def test_only_ended_sessions_that_passed_is_a_pass() -> None:
    with serve_scenario(TIDES) as server, httpx2.Client(base_url=server.url) as client:
        follow_the_script(client, "a")
        client.delete("/s/a")
        report = server.check()
        server.assert_consumed()
    assert report.passed, report.render()
    assert report.checked == ["1 ended session(s) that passed"] and report.model_calls == 2


def test_end_session_from_python() -> None:
    with serve_scenario(TIDES) as server, httpx2.Client(base_url=server.url) as client:
        stop_early(client, "x")
        report = server.end_session("x")
        assert isinstance(report, SessionReport) and report.state == "ended"
        assert not report.passed and report.unconsumed == 1
        assert server.check("x").failures[0].title.startswith("session 'x': 1 of 2")
        with pytest.raises(KeyError, match="no live session 'x'"):
            server.end_session("x")


# --------------------------------------------------------------------------- expiry


def test_an_idle_session_expires_and_its_report_is_kept() -> None:
    with (
        serve_scenario(TIDES, session_ttl=0.3) as server,
        httpx2.Client(base_url=server.url) as client,
    ):
        stop_early(client, "idle")
        follow_the_script(client, "done")
        assert set(server.app.sessions) == {"idle", "done"}
        time.sleep(0.7)
        stop_early(client, "new")  # a request: the server looks for idle sessions
        assert set(server.app.sessions) == {"new"}
        expired = client.get("/s/idle").json()
        gone = client.delete("/s/idle").json()["error"]["message"]
        report = server.check()
    assert (expired["state"], expired["unconsumed"]) == ("expired", 1)
    assert "it expired after 0.3 s idle" in gone
    assert "session 'idle' (expired)" in report.checked
    assert "1 ended session(s) that passed" in report.checked  # 'done'
    assert report.model_calls == 1 + 2 + 1
    assert any(f.title.startswith("session 'idle': 1 of 2") for f in report.failures)


def test_a_session_with_a_request_under_way_does_not_expire() -> None:
    slow = [{"text": "late but here", "latency": 0.8}]
    with serve(slow, session_ttl=0.2) as server, httpx2.Client(base_url=server.url) as client:
        answers: list[int] = []
        waiting = threading.Thread(
            target=lambda: answers.append(
                client.post("/s/slow/v1/chat/completions", json=HI, timeout=5).status_code
            )
        )
        waiting.start()
        time.sleep(0.5)
        client.get("/s/other")  # a sweep while the slow reply is still under way
        assert "slow" in server.app.sessions
        waiting.join()
        assert answers == [200]
        report = server.check()
    assert report.passed, report.render()
    assert report.checked == ["session 'slow'"]


def test_no_ttl_means_sessions_never_expire() -> None:
    with serve(["x"], session_ttl=None) as server, httpx2.Client(base_url=server.url) as client:
        client.post("/s/a/v1/chat/completions", json=HI)
        time.sleep(0.05)
        server.app.sweep()
        assert set(server.app.sessions) == {"a"}


@pytest.mark.parametrize("done", [False, True], ids=["under-way", "answered"])
def test_a_sweep_keeps_a_session_a_request_joined_as_it_was_taken_out(done: bool) -> None:
    """A request joins a live session without the app's lock (``enter``), so a sweep on
    another thread can find the session idle just before a request joins it. The sweep
    checks again once it took the session out, and puts back one that was joined: the
    request's session stays live (its request under way, or just answered), and expires
    only once it is idle again."""
    now = [0.0]
    app = WireApp(["x"], session_ttl=1.0, clock=lambda: now[0])
    app.leave(app.enter("busy"))  # opened at 0 s, idle since
    now[0] = 5.0  # idle past the TTL: a sweep takes it out

    class JoinedMeanwhile(dict):  # a request joins between the sweep's check and its delete
        joined = None

        def __delitem__(self, name: object) -> None:
            if self.joined is None:  # the first sweep only
                self.joined = app.enter("busy")
                if done:
                    app.leave(self.joined)
            super().__delitem__(name)

    sessions = app._sessions = JoinedMeanwhile(app._sessions)
    app.sweep()
    assert app.sessions == {"busy": sessions.joined}
    assert app.ended.get("busy") is None and app.ended.count == 0
    if not done:
        app.leave(sessions.joined)
    now[0] = 10.0
    app.sweep()  # idle again: now it expires
    assert app.sessions == {}
    report = app.ended.get("busy")
    assert report is not None and report.state == "expired"


def test_a_request_that_found_a_session_a_sweep_then_ended_joins_a_new_one() -> None:
    """The other order: a sweep on another thread takes the session out, and ends it, after
    a request found it and before the request counted itself in. ``enter`` checks the
    session is still live once it counted: it joins a new session of that name, never the
    one whose report is already written."""
    now = [0.0]
    app = WireApp(["x"], session_ttl=1.0, clock=lambda: now[0])
    app.leave(app.enter("busy"))
    expired = app.sessions["busy"]
    now[0] = 5.0  # idle past the TTL
    app._next_sweep = float("inf")  # the sweep due is the other thread's, not this request's

    class SweptMeanwhile(dict):  # the whole sweep runs just after enter's first look-up
        swept = False

        def get(self, name: object, default: object = None) -> object:
            found = super().get(name, default)
            if name == "busy" and not self.swept:
                self.swept = True
                app.sweep(now[0])
            return found

    app._sessions = SweptMeanwhile(app._sessions)
    joined = app.enter("busy")
    report = app.ended.get("busy")
    assert report is not None and report.state == "expired"
    assert joined is not None and joined is not expired
    assert app.sessions == {"busy": joined}
    assert (joined.active, expired.active) == (1, 0)
    app.leave(joined)


# --------------------------------------------------------------------------- the cap


def test_a_session_beyond_the_cap_is_refused_in_the_apis_error_shape() -> None:
    with (
        serve_scenario(TIDES, max_sessions=2) as server,
        httpx2.Client(base_url=server.url) as client,
    ):
        follow_the_script(client, "a")
        stop_early(client, "b")
        chat = client.post("/s/c/v1/chat/completions", json=HI)
        claude = client.post(
            "/s/c/v1/messages",
            json={
                "model": "claude-x",
                "max_tokens": 9,
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
        client.delete("/s/a")
        follow_the_script(client, "c")  # room again
        client.delete("/s/b")
        client.delete("/s/c")
        report = server.check()
    assert chat.status_code == 503 and chat.headers["x-should-retry"] == "false"
    message = chat.json()["error"]["message"]
    assert "session 'c' cannot start: 2 sessions are live (the server's max_sessions)" in message
    assert "DELETE /s/{session}" in message
    assert claude.status_code == 503
    assert claude.json()["type"] == "error" and claude.json()["error"]["type"] == "api_error"
    assert server.app.refused == 2
    failure = next(f for f in report.failures if "refused" in f.title)
    assert failure.title == "2 request(s) were refused: 2 sessions were live (max_sessions)"


def test_the_openai_client_does_not_retry_a_refused_session() -> None:
    openai = pytest.importorskip("openai")
    with serve(["one"], max_sessions=1) as server, httpx2.Client(base_url=server.url) as client:
        client.post("/s/a/v1/chat/completions", json=HI)
        sdk = openai.OpenAI(base_url=server.base_url("openai", "b"), api_key="k", max_retries=3)
        with sdk, pytest.raises(openai.InternalServerError) as caught:
            sdk.chat.completions.create(model="gpt-4o-mini", messages=[ASK])
        assert server.app.refused == 1  # x-should-retry: false, so no retries
    assert caught.value.status_code == 503
    assert "cannot start" in str(caught.value)


def test_memory_stays_bounded_over_many_sessions() -> None:
    """300 sessions come and go: none stays live, passing ones are counts, and only a
    bounded number of failing reports is kept (the rest counted and reported)."""
    with serve(["one"]) as server, httpx2.Client(base_url=server.url) as client:
        server.app.ended = EndedSessions(keep=5)
        for i in range(300):
            if i % 10:
                client.post(f"/s/w{i}/v1/chat/completions", json=HI)  # served: passes
            else:
                client.post(f"/s/w{i}/v1/chat/completions", json={"model": "m"})  # malformed
            assert client.delete(f"/s/w{i}").status_code == 200
        assert server.app.sessions == {}
        ended = server.app.ended
        assert (ended.count, ended.passed, ended.failing_dropped) == (300, 270, 25)
        assert len(ended.failing) == 5 and len(ended._recent) == 5
        assert ended.get("w299") is not None and ended.get("w0") is None
        report = server.check()
    assert report.checked[-1] == "270 ended session(s) that passed"
    assert report.model_calls == 270
    assert report.failures[-1].title == (
        "25 more session(s) ended failing; only the first 5 failing sessions' reports are kept"
    )


def test_limits_are_checked_when_given() -> None:
    with pytest.raises(ValueError, match="session_ttl must be > 0 seconds or None, got 0"):
        serve(["x"], session_ttl=0).__enter__()
    with pytest.raises(ValueError, match="max_sessions must be >= 1 or None, got 0"):
        serve(["x"], max_sessions=0).__enter__()


# --------------------------------------------------------------------------- the CLI


def test_the_cli_ends_expires_and_caps_sessions_and_reports_them_all() -> None:
    limits = ("--session-ttl", "0.4", "--max-sessions", "2")
    with serve_process(TIDES_PATH, *limits) as process:
        url, banner = read_banner(process)
        assert banner[7].strip() == (
            f"DELETE {url}/s/NAME ends one and answers with its report (GET: so far); "
            "sessions end after 0.4 s idle, at most 2 live"
        )
        with httpx2.Client(base_url=url) as client:
            follow_the_script(client, "a")
            assert client.delete("/s/a").json()["passed"] is True
            stop_early(client, "b")
            follow_the_script(client, "c")
            assert client.post("/s/d/v1/chat/completions", json=HI).status_code == 503
            time.sleep(0.9)
            follow_the_script(client, "d")  # b and c expired: room again
        out, err = interrupt(process)
    assert process.returncode == 1, out + err
    checked = "session 'd', session 'b' (expired), 2 ended session(s) that passed"
    assert f"openprogram-sim serve: 7 model call(s); checked: {checked}" in out
    assert "- session 'b': 1 of 2 scripted turns were never requested" in out
    assert "- 1 request(s) were refused: 2 sessions were live (max_sessions)" in out
    assert "[a] ended: 2 model call(s), PASS" in err
    assert "[b] expired: 1 model call(s), FAIL" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--session-ttl", "-1", "-1 is negative; use 0 for no limit"),
        ("--max-sessions", "many", "'many' is not a whole number"),
    ],
)
def test_bad_limits_on_the_command_line_exit_2(flag: str, value: str, says: str) -> None:
    result = run_cli("serve", str(TIDES_PATH), flag, value)
    assert result.returncode == 2
    assert says in result.stderr


def test_zero_on_the_command_line_lifts_a_limit() -> None:
    with serve_process(TIDES_PATH, "--session-ttl", "0", "--max-sessions", "0", "-q") as process:
        _url, banner = read_banner(process)
        interrupt(process)
    assert "sessions never end when idle, no cap on live sessions" in banner[7]


def test_the_cli_defaults_are_the_servers() -> None:
    from openprogram_sim.cli import serve as cli
    from openprogram_sim.wire import _app

    assert cli.DEFAULT_SESSION_TTL == _app.DEFAULT_SESSION_TTL == 600
    assert cli.DEFAULT_MAX_SESSIONS == _app.DEFAULT_MAX_SESSIONS
