"""What a live session keeps is bounded: requests past the server's budget are counted, not
kept (and said so in the report); failed requests past ``KEPT_ERRORS`` are counted; a session
that ends gives its share of the budget back. Real loopback HTTP throughout."""

from __future__ import annotations

import httpx2

from openprogram_sim.wire import serve
from openprogram_sim.wire._session import KEPT_ERRORS, RequestBudget

HI = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
KEY = "sk-" + "test-placeholder-key"


def test_requests_past_the_budget_are_counted_and_the_report_says_so() -> None:
    with serve(["reply"], cycle=True) as server, httpx2.Client(base_url=server.url) as client:
        server.app.budget = RequestBudget(requests=5)
        messages: list[dict[str, str]] = []
        for i in range(8):  # a conversation: each request a new user message
            messages.append({"role": "user", "content": f"question {i}"})
            got = client.post(
                "/s/a/v1/chat/completions",
                json={"model": "m", "messages": messages},
                headers={"authorization": f"Bearer {KEY}"},
            )
            assert got.json()["choices"][0]["message"]["content"] == "reply"  # all answered
            messages.append({"role": "assistant", "content": "reply"})
        session = server.session("a")
        assert (session.count, session.call_count, session.not_kept) == (8, 8, 3)
        kept = session.requests
        assert [r.index for r in kept] == [1, 2, 3, 4, 5]
        assert kept[0].body == {"model": "m", "messages": messages[:1]}  # as sent, read back
        assert kept[0].headers["authorization"] == "Bearer <redacted>"
        assert len(session.request_fields()) == 5
        assert server.app.budget.kept_requests == 5
        report = client.delete("/s/a").json()
        assert (report["requests"], report["model_calls"]) == (8, 8)
        assert report["requests_not_kept"] == 3 and report["passed"] is True
        assert server.app.budget.kept_requests == 0  # given back when it ended
        ended = server.app.ended.get("a")
        assert ended is not None and ended.requests_not_kept == 3
        assert len(ended.rounds) == 5  # the kept requests' facts
        client.post("/s/b/v1/chat/completions", json=HI)
        assert [r.index for r in server.session("b").requests] == [1]  # room again


def test_the_budget_counts_body_bytes_as_sent() -> None:
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * 4000}]}
    with serve(["reply"], cycle=True) as server, httpx2.Client(base_url=server.url) as client:
        server.app.budget = RequestBudget(requests=None, bytes=10_000)
        for _ in range(4):
            client.post("/s/a/v1/chat/completions", json=big)
        session = server.session("a")
        assert len(session.requests) == 2 and session.not_kept == 2
        assert 8000 < server.app.budget.kept_bytes <= 10_000


def test_a_session_never_keeps_more_than_the_first_failed_requests() -> None:
    with serve(["reply"]) as server, httpx2.Client(base_url=server.url) as client:
        for _ in range(KEPT_ERRORS + 5):
            got = client.post("/s/bad/v1/chat/completions", json={"model": "m"})
            assert got.status_code == 400
        session = server.session("bad")
        assert len(session.errors) == KEPT_ERRORS and session.errors_dropped == 5
        report = session.report()
        assert report.failures[KEPT_ERRORS].title == (
            f"5 more failed request(s), past the first {KEPT_ERRORS} listed"
        )
        assert report.requests == KEPT_ERRORS + 5


def test_the_default_sessions_kept_requests_are_bounded_too() -> None:
    with serve(["reply"], cycle=True) as server, httpx2.Client(base_url=server.url) as client:
        server.app.budget = RequestBudget(requests=3)
        for _ in range(6):
            client.post("/v1/chat/completions", json=HI)
        session = server.session()
        assert (len(session.requests), session.not_kept, session.count) == (3, 3, 6)
        assert server.check().model_calls == 6
