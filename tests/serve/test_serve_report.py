"""The HTML report of served sessions (``serve --report``, ``WireServer.check(write=
session_html(...))``): real clients on the official ``openai`` and ``anthropic`` SDKs play a
scenario, each in its own session, one passing and others failing; the report has a section
per session with its verdict, failures, trajectory and property verdicts, client checks and
a timeline from its trace (the picks as served, the results the client returned, errors,
retries, the final text), checked in a real headless Chromium. Ended sessions keep a
compact, capped copy of their trace for it."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx2
import pytest

from openprogram_sim.play import serve_scenario
from openprogram_sim.report import (
    served_records,
    session_details,
    session_html,
    session_junit,
)
from openprogram_sim.wire import ServeReport, serve

SEARCH_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
CHAT_TOOLS = [{"type": "function", "function": {"name": "search", "parameters": SEARCH_SCHEMA}}]
CLAUDE_TOOLS = [{"name": "search", "input_schema": SEARCH_SCHEMA}]
KEY = "sk-" + "test-placeholder"
DASH = "\u2013"  # an en dash, between the first and last number of a node
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--window-size=1280,1000")  # fmt: skip

SCENARIO = """\
scenario: two searches in one round, then the answer
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}, required: [q]}
    returns: "3 results"
exec: {content: "Find a and b."}
model:
  - tool_calls: [{search: {q: a}}, {search: {q: b}}]
  - text: "Found both."
expect:
  trajectory:
    mode: exact
    calls: [[{search: {q: a}}, {search: {q: b}}]]
  properties:
    - at_most: {tool: search, times: 2}
    - ends_with: {reason: stop}
"""


def write_scenario(root: Path) -> Path:
    path = root / "two_searches.yaml"
    path.write_text(SCENARIO)
    return path


# ------------------------------------------------------------------ the clients


def chat_agent(openai: ModuleType, url: str, *, drop_second: bool = False) -> str:
    """A small agent on the plain ``openai`` SDK: it runs every call, sends each result
    back and asks again until the answer is a text (``drop_second``: a planted bug, the
    second result of a round is never sent)."""
    client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find a and b."}]
    with client:
        while True:
            reply = client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, tools=CHAT_TOOLS
            ).choices[0].message  # fmt: skip
            messages.append(reply.model_dump(exclude_none=True))
            if not reply.tool_calls:
                return str(reply.content)
            calls = reply.tool_calls[:1] if drop_second else reply.tool_calls
            for call in calls:
                q = json.loads(call.function.arguments)["q"]
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": f"results for {q}"}
                )


def claude_agent(anthropic: ModuleType, url: str, *, quit_early: bool = False) -> str:
    """The same agent on the ``anthropic`` SDK, streaming: the search for ``b`` fails and
    its error goes back as an ``is_error`` result (``quit_early``: it stops after the first
    answer, never sending the results)."""
    client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find a and b."}]
    with client:
        while True:
            with client.messages.stream(
                model="claude-sonnet-4-5", max_tokens=256, messages=messages, tools=CLAUDE_TOOLS
            ) as stream:
                reply = stream.get_final_message()
            uses = [b for b in reply.content if b.type == "tool_use"]
            if not uses or quit_early:
                return "".join(b.text for b in reply.content if b.type == "text")
            messages.append(
                {"role": "assistant", "content": [b.model_dump() for b in reply.content]}
            )
            results = []
            for use in uses:
                failed = use.input["q"] == "b"
                text = "search backend down" if failed else f"results for {use.input['q']}"
                results.append(
                    {"type": "tool_result", "tool_use_id": use.id, "content": text,
                     "is_error": failed}
                )  # fmt: skip
            messages.append({"role": "user", "content": results})


def gemini_agent(genai: ModuleType, url: str) -> str:
    """google-genai running the tool itself (automatic function calling)."""

    def search(q: str) -> str:
        """Search the web."""
        return f"results for {q}"

    client = genai.Client(api_key=KEY, http_options=genai.types.HttpOptions(base_url=url))
    reply = client.models.generate_content(
        model="gemini-2.5-flash", contents="Find a and b.",
        config=genai.types.GenerateContentConfig(tools=[search]),
    )  # fmt: skip
    return str(reply.text)


def end(server: Any, name: str) -> None:
    assert httpx2.delete(f"{server.url}/s/{name}").status_code == 200


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
    openai: ModuleType,
    anthropic: ModuleType,
    genai: ModuleType,
) -> Iterator[tuple[Path, ServeReport]]:
    """Five sessions of one server: ``good`` (openai, passes), ``dropper`` (openai, drops
    a result: fails), ``claude`` (anthropic, passes a tool error back: passes),
    ``quitter`` (anthropic, stops after the first answer: fails) and ``gemini``
    (google-genai running the tools itself: passes); the first two ended (their reports
    kept), the others live at the check. The HTML report written by ``check(write=)``."""
    root = tmp_path_factory.mktemp("served-report")
    path = write_scenario(root)
    with serve_scenario(path, details=session_details(path)) as server:
        assert chat_agent(openai, server.base_url("openai", "good")) == "Found both."
        assert chat_agent(openai, server.base_url("openai", "dropper"), drop_second=True)
        end(server, "good")
        end(server, "dropper")
        assert claude_agent(anthropic, server.base_url("anthropic", "claude")) == "Found both."
        assert (
            claude_agent(anthropic, server.base_url("anthropic", "quitter"), quit_early=True) == ""
        )
        assert gemini_agent(genai, server.base_url("gemini", "gemini")) == "Found both."
        report = server.check(
            write=[session_html(root / "report.html", scenario=path),
                   session_junit(root / "junit.xml", scenario=path)]
        )  # fmt: skip
    yield root, report


def by_id(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in records}


def timeline_items(record: dict[str, Any]) -> list[list[tuple[Any, ...]]]:
    """Each round of the session's timeline as (kind, what it shows) per item."""
    out = []
    for round_ in record["runs"][0]["timeline"]["rounds"]:
        items = []
        for item in round_["items"]:
            if item["kind"] == "model":
                items.append(("model", item["picks"], item["text"], item["stop"]))
            elif item["kind"] == "tool":
                items.append(("tool", item["name"], item["args"], item["done"],
                              item["result"], item["is_error"]))  # fmt: skip
            else:
                items.append((item["kind"], item.get("text")))
        out.append(items)
    return out


# ------------------------------------------------------------------ the records


@pytest.mark.slow
def test_each_session_is_a_record_with_its_verdict_checks_and_timeline(
    served: tuple[Path, ServeReport],
) -> None:
    _, report = served
    records = by_id(served_records(report, scenario="two searches", path="two_searches.yaml"))
    assert sorted(records) == ["/s/claude", "/s/dropper", "/s/gemini", "/s/good", "/s/quitter"]
    assert {k: (r["status"], r["session"]["state"], r["tags"]) for k, r in records.items()} == {
        "/s/good": ("passed", "ended", ["openai-chat"]),
        "/s/dropper": ("failed", "ended", ["openai-chat"]),
        "/s/claude": ("passed", "live", ["anthropic"]),
        "/s/quitter": ("failed", "live", ["anthropic"]),
        "/s/gemini": ("passed", "live", ["gemini"]),
    }

    good = records["/s/good"]  # ended: its timeline comes from the trace its report kept
    assert timeline_items(good) == [
        [
            ("user", "Find a and b."),
            ("model", ["search", "search"], "", "toolUse"),
            ("tool", "search", {"q": "a"}, True, "results for a", False),
            ("tool", "search", {"q": "b"}, True, "results for b", False),
        ],
        [("model", [], "Found both.", "stop")],
    ]
    assert [r["note"] for r in good["runs"][0]["timeline"]["rounds"]] == [
        "request #1 · openai-chat",
        "request #2 · openai-chat",
    ]
    assert good["result"] == "Found both."
    assert [(t["mode"], t["score"], t["passed"]) for t in good["trajectory"]] == [
        ("exact", 1.0, True)
    ]
    assert [(p["rule"], p["held"]) for p in good["properties"]] == [
        ("at_most", True),
        ("ends_with", True),
    ]
    assert set(good["client_checks"].values()) == {"held"}
    assert good["props"] == {
        "model_calls": 2, "tool_calls": 2, "errors": 0, "end_reason": "stop", "rounds": 2,
        "requests": 2, "retries": 0,
    }  # fmt: skip

    dropper = records["/s/dropper"]
    assert timeline_items(dropper)[0][3] == ("tool", "search", {"q": "b"}, False, None, False)
    assert dropper["runs"][0]["timeline"]["rounds"][1]["note"] == (
        "request #2 · openai-chat · results per call of the previous answer: 1, 0"
    )
    assert dropper["client_checks"]["answered_once"] == "broken"
    assert dropper["failure"] == (
        "- client check answered_once broken by request #2: call call_wire1_1 (search) "
        "served in answer #1 has no result in the next request\n"
        "  at session 'dropper', request #2\n"
        "  (turn it off with serve --no-check answered_once, or the scenario's wire: "
        "{checks: {answered_once: false}})"
    )

    claude = records["/s/claude"]
    assert timeline_items(claude)[0][2:] == [
        ("tool", "search", {"q": "a"}, True, "results for a", False),
        ("tool", "search", {"q": "b"}, True, "search backend down", True),
    ]
    assert claude["wire_behaviours"] == [
        "tool_round", "every_parallel_result", "tool_error_returned", "stopped_on_text",
        "streamed",
    ]  # fmt: skip

    gemini = records["/s/gemini"]  # no call ids on Gemini: results matched by name and order
    assert timeline_items(gemini)[0][2:] == [
        ("tool", "search", {"q": "a"}, True, "results for a", False),
        ("tool", "search", {"q": "b"}, True, "results for b", False),
    ]
    assert [i["at"] for i in gemini["runs"][0]["timeline"]["rounds"][0]["items"][2:]] == [
        [6, 7],
        [10, 11],
    ]
    assert gemini["wire_behaviours"] == [
        "tool_round", "every_parallel_result", "stopped_on_text", "not_streamed",
    ]  # fmt: skip

    quitter = records["/s/quitter"]
    assert quitter["runs"][0]["timeline"]["reason"] == "aborted"
    assert [(p["rule"], p["held"]) for p in quitter["properties"]] == [
        ("at_most", True),
        ("ends_with", False),
    ]
    assert quitter["failure"].splitlines()[0] == (
        "- 1 of 2 scripted turns were never requested (the client made 1 model call(s))"
    )
    assert "- property 2 (ends_with) does not hold" in quitter["failure"]
    assert quitter["result"] is None  # it ended on tool calls, not on a text


@pytest.mark.slow
def test_the_report_file_is_written_whole_with_a_section_per_session(
    served: tuple[Path, ServeReport],
) -> None:
    root, _ = served
    html = (root / "report.html").read_text()
    assert html.startswith("<!doctype html>") and html.rstrip().endswith("</html>")
    for name in ("good", "dropper", "claude", "quitter", "gemini"):
        assert f'data-id="/s/{name}"' in html
    assert "<title>served sessions: two searches in one round, then the answer</title>" in html
    assert sorted(p.name for p in root.iterdir()) == [
        "junit.xml",
        "report.html",
        "two_searches.yaml",
    ]


# ------------------------------------------------------------------ the cap


def test_an_ended_session_keeps_a_capped_trace_and_the_report_says_so(tmp_path: Path) -> None:
    rounds = 40
    long = "x" * 5000
    turns = [{"tool_calls": [{"read": {"page": i}}]} for i in range(rounds)] + ["Read them all."]
    with serve(["unused"]) as server:
        server.open_session("long", turns)
        url = f"{server.url}/s/long/v1/chat/completions"
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Read every page."}]
        with httpx2.Client() as http:
            for _ in range(rounds + 1):
                answer = http.post(url, json={"model": "m", "messages": messages}).json()
                message = answer["choices"][0]["message"]
                messages.append(message)
                for call in message.get("tool_calls") or ():
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": long})
        whole = server.session("long").trace().trace
        end(server, "long")
        report = server.check(write=session_html(tmp_path / "long.html"))
    (kept,) = report.sessions
    assert kept.passed and kept.state == "ended"
    sizes = len(json.dumps(kept.trace))
    assert 64 * 1024 <= sizes < 64 * 1024 + 3000  # the budget, and at most one entry past it
    assert kept.trace_dropped > 0
    # every entry but the message_start ones (the message_end says the same) is kept or counted
    drawn = [e for e in whole if e["type"] != "message_start"]
    assert len(kept.trace) + kept.trace_dropped == len(drawn)
    assert (
        kept.numbers
        == [i for i, e in enumerate(whole) if e["type"] != "message_start"][: len(kept.trace)]
    )
    result = next(e for e in kept.trace if e["type"] == "tool_execution_end")["result"]
    assert result == "x" * 2000 + "... [3000 more characters not kept]"
    (record,) = served_records(report)
    assert record["props"]["trace_entries_not_kept"] == kept.trace_dropped
    assert record["runs"][0]["timeline"]["reason"] is None  # the kept part ends before agent_end
    assert len(kept.rounds) == rounds + 1  # the facts of every request are kept
    assert 'data-id="/s/long"' in (tmp_path / "long.html").read_text()


# ------------------------------------------------------------------ in a browser


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Debian's headless Chromium through chromedriver, as tests/plugin/test_browser.py
    drives it: skipped where it is missing, a failure in CI (.ci/run installs it)."""
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    missing = [n for n, p in (("chromium", chromium), ("chromedriver", driver_path)) if not p]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the selenium package")
    if missing:
        reason = f"headless browser test needs {', '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; in CI the browser must be there (.ci/run installs it)")
        pytest.skip(f"{reason} (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(driver_path)))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def _open(driver: Any, row_id: str) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    row = driver.execute_script(
        "var id = arguments[0]; return Array.from(document.querySelectorAll('details.test'))"
        ".find(function (r) { return r.dataset.id === id; })",
        row_id,
    )
    assert row is not None, f"no row {row_id!r}"
    summary = row.find_element(By.TAG_NAME, "summary")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", summary)
    summary.click()
    WebDriverWait(driver, 10).until(
        lambda _: row.find_elements(By.CSS_SELECTOR, ".timeline .round-head")
    )
    return row


@pytest.mark.slow
def test_the_report_in_a_browser_shows_each_sessions_timeline(
    served: tuple[Path, ServeReport], browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    root, _ = served
    browser.get((root / "report.html").as_uri())
    rows = browser.find_elements(By.CSS_SELECTOR, "details.test")
    assert [(r.get_attribute("data-id"), r.get_attribute("data-status")) for r in rows] == [
        ("/s/dropper", "failed"),
        ("/s/quitter", "failed"),
        ("/s/claude", "passed"),
        ("/s/gemini", "passed"),
        ("/s/good", "passed"),
    ]
    assert browser.find_element(By.CSS_SELECTOR, "[data-count=failed] b").text == "2"
    assert browser.find_elements(By.CSS_SELECTOR, ".timeline") == []  # drawn when opened

    dropper = _open(browser, "/s/dropper")
    heads = [
        (h.find_element(By.CSS_SELECTOR, ".at").text, h.find_element(By.CSS_SELECTOR, ".note").text)
        for h in dropper.find_elements(By.CSS_SELECTOR, ".round-head")
    ]
    assert heads == [  # round 1: #1 its turn_start to #11 its turn_end (one call unanswered)
        (f"#1{DASH}11", "request #1 · openai-chat"),
        (
            f"#12{DASH}15",
            "request #2 · openai-chat · results per call of the previous answer: 1, 0",
        ),
    ]
    timeline = dropper.find_element(By.CSS_SELECTOR, ".timeline").text
    for shown in ("prompt", "Find a and b.", "picks search, search", 'search(q="a")',
                  "→ results for a", 'search(q="b")', "→ no result: none in the next request",
                  "Found both.", "finished: the model answered with text"):  # fmt: skip
        assert shown in timeline, (shown, timeline)
    failure = dropper.find_element(By.CSS_SELECTOR, "pre.failure").text
    assert failure.startswith("- client check answered_once broken by request #2")
    verdicts = {
        c.get_attribute("data-client-check"): c.get_attribute("data-verdict")
        for c in dropper.find_elements(By.CSS_SELECTOR, "tr.client-check")
    }
    assert verdicts == {
        "answered_once": "broken", "no_unknown_result": "held", "retry_after": "held",
        "max_retries": "held", "no_key_in_body": "held", "no_request_after_final": "held",
    }  # fmt: skip
    score = dropper.find_element(By.CSS_SELECTOR, "tr.trajectory").get_attribute("data-score")
    assert score == "1.0"
    assert "final text served Found both." in dropper.text

    claude = _open(browser, "/s/claude")
    errs = claude.find_elements(By.CSS_SELECTOR, ".ev.tool .result.err")
    assert [e.text for e in errs] == ["✗ error: ", "search backend down"]

    gemini = _open(browser, "/s/gemini").find_element(By.CSS_SELECTOR, ".timeline").text
    for shown in ("request #1 · gemini", 'search(q="b")', "→ results for b", "Found both."):
        assert shown in gemini, (shown, gemini)

    quitter = _open(browser, "/s/quitter")
    timeline = quitter.find_element(By.CSS_SELECTOR, ".timeline").text
    assert "ended: aborted" in timeline
    assert timeline.count("→ no result: no further request came") == 2
    rules = quitter.find_elements(By.CSS_SELECTOR, "tr.property")
    assert [(r.get_attribute("data-rule"), r.get_attribute("class")) for r in rules] == [
        ("at_most", "property held"),
        ("ends_with", "property broken"),
    ]

    wire = browser.find_element(By.ID, "wire-coverage")
    browser.execute_script("arguments[0].open = true", wire)
    seen = {
        r.get_attribute("data-wire-behaviour"): r.get_attribute("data-status")
        for r in wire.find_elements(By.CSS_SELECTOR, "tr[data-wire-behaviour]")
    }
    assert seen["tool_error_returned"] == "seen" and seen["honoured_retry_after"] == "missing"
    links = wire.find_element(By.ID, "w-every_parallel_result").find_elements(By.TAG_NAME, "a")
    assert sorted(a.text for a in links) == ["/s/claude", "/s/gemini", "/s/good"]
    assert errors(browser) == []


def test_a_session_that_retried_shows_the_retry_on_its_timeline(
    openai: ModuleType, tmp_path: Path
) -> None:
    limited = [
        {"stop_reason": "error", "error": "slow down", "error_reason": "rate_limit",
         "wire": {"retry_after_ms": 150}},
        {"text": "Hello."},
    ]  # fmt: skip
    with serve(["unused"]) as server:
        server.open_session("sdk", limited)
        client = openai.OpenAI(base_url=server.base_url("openai", "sdk"), api_key=KEY)
        started = time.monotonic()
        with client:  # the SDK's own retry, after the retry-after it was sent
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Hi."}]
            )
        assert reply.choices[0].message.content == "Hello."
        assert time.monotonic() - started >= 0.15
        report = server.check()
    (record,) = served_records(report)
    first, second = record["runs"][0]["timeline"]["rounds"]
    assert first["note"] == "request #1 · openai-chat · served HTTP 429 with retry-after 0.15 s"
    assert second["note"].startswith("request #2 · openai-chat · retry of #1 · 0.")
    assert second["note"].endswith(" s after the answer before")
    assert [i["stop"] for r in (first, second) for i in r["items"] if i["kind"] == "model"] == [
        "error",
        "stop",
    ]
    assert record["props"]["retries"] == 1
    assert record["status"] == "passed"


def test_ended_sessions_keep_their_timelines_within_a_budget(tmp_path: Path) -> None:
    """Past the ended sessions' budget a session keeps its verdict, not its timeline; past
    the count cap, passing sessions get no section (failing ones still do)."""
    from openprogram_sim.wire._session import EndedSessions

    turns = [{"tool_calls": [{"search": {"q": "a"}}]}, "Found it."]
    with serve(turns) as server:
        url = server.url
        body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "Go."}]}
        with httpx2.Client() as http:
            first = http.post(f"{url}/s/one/v1/chat/completions", json=body).json()
            (call,) = first["choices"][0]["message"]["tool_calls"]
            body["messages"] += [
                first["choices"][0]["message"],
                {"role": "tool", "tool_call_id": call["id"], "content": "hit"},
            ]
            http.post(f"{url}/s/one/v1/chat/completions", json=body)
            http.post(f"{url}/s/two/v1/chat/completions", json=body)  # stops early: fails
        passing = server.end_session("one")
        failing = server.end_session("two")
    assert (passing.passed, failing.passed) == (True, False)
    size = passing.kept_size
    assert 0 < size < 4096 and passing.trace and passing.rounds

    ended = EndedSessions(keep=2, budget=size + failing.kept_size // 2)
    for report in (passing, failing, passing, failing):
        ended.add(report)
    kept = ended.reports
    assert [(r.name, r.passed, r.timeline_dropped) for r in kept] == [
        ("one", True, False),  # within the budget
        ("two", False, True),  # past it: its verdict, not its timeline
        ("two", False, True),  # failing after the first 2: kept too
    ]
    assert (kept[1].trace, kept[1].rounds, kept[1].failures) == ([], [], failing.failures)
    assert kept[1].trace_dropped == len(failing.numbers) + failing.trace_dropped
    assert (ended.passing_dropped, ended.timelines_dropped, ended.kept_bytes) == (1, 2, size)
    assert ended.get("one") is not None and ended.get("one").trace == []  # by name: light
    record = next(r for r in served_records_of(kept) if r["status"] == "failed")
    assert record["props"]["timeline"] == (
        "not kept: the server's budget for ended sessions' timelines was spent"
    )
    assert record["runs"][0]["timeline"]["rounds"] == []


def served_records_of(reports: list[Any]) -> list[dict[str, Any]]:
    return served_records(ServeReport(sessions=reports))


def test_check_write_takes_writers_and_says_so_for_a_path(tmp_path: Path) -> None:
    with serve(["Hello."]) as server:
        with pytest.raises(TypeError) as caught:
            server.check(write=str(tmp_path / "report.html"))
        got: list[int] = []
        report = server.check(write=[lambda r: got.append(len(r.sessions))])
    assert str(caught.value) == (
        f"check(write=) takes writers (callables given the report), got "
        f"{str(tmp_path / 'report.html')!r}; for a file, pass "
        "openprogram_sim.report.session_html(path) (the HTML report) or session_junit(path) "
        "(JUnit XML)"
    )
    assert got == [len(report.sessions)] == [1]  # the default session, all there is
    assert list(tmp_path.iterdir()) == []
