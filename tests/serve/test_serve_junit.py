"""The JUnit XML of served sessions (``serve --junitxml``, ``WireServer.check(write=
session_junit(...))``): a test case per session, named by the session, its classname the
scenario file; a failure with its messages; the properties the pytest plugin writes for a
scenario (the trajectory's score, each property's verdict) and the wire's own (each client
invariant, the behaviours seen). Parsed and asserted whole."""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from test_serve_report import chat_agent, end, write_scenario

from openprogram_sim.play import serve_scenario
from openprogram_sim.report import session_details, session_junit
from openprogram_sim.wire import serve


def parsed(path: Path) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The suite's attributes and each test case: attributes, properties, failure."""
    root = ET.parse(path).getroot()
    assert (root.tag, root.attrib) == ("testsuites", {"name": "openprogram-sim serve"})
    (suite,) = root
    cases = []
    for case in suite:
        assert case.tag == "testcase"
        assert [c.tag for c in case] in (["properties"], ["properties", "failure"], ["failure"])
        props = case.find("properties")
        failure = case.find("failure")
        cases.append(
            {
                **case.attrib,
                "properties": [
                    (p.attrib["name"], p.attrib["value"])
                    for p in (props if props is not None else ())
                ],
                "failure": None if failure is None else (failure.attrib["message"], failure.text),
            }
        )
    return dict(suite.attrib), cases


def checked_props(state: str, answered_once: str, behaviours: str) -> list[tuple[str, str]]:
    return [
        ("model_calls", "2"),
        ("tool_calls", "2"),
        ("errors", "0"),
        ("end_reason", "stop"),
        ("rounds", "2"),
        ("requests", "2"),
        ("retries", "0"),
        ("openprogram.trajectory.mode", "exact"),
        ("openprogram.trajectory.score", "1.0"),
        ("openprogram.trajectory.precision", "1.0"),
        ("openprogram.trajectory.recall", "1.0"),
        ("openprogram.trajectory.f1", "1.0"),
        ("openprogram.trajectory.min_score", "1.0"),
        ("openprogram.trajectory.verdict", "passed"),
        ("openprogram.trajectory.where", "two_searches.yaml:11"),
        ("openprogram.property.1.rule", 'at_most: {"tool": "search", "times": 2}'),
        ("openprogram.property.1.verdict", "held"),
        ("openprogram.property.1.where", "two_searches.yaml:15"),
        ("openprogram.property.2.rule", 'ends_with: {"reason": "stop"}'),
        ("openprogram.property.2.verdict", "held"),
        ("openprogram.property.2.where", "two_searches.yaml:16"),
        ("openprogram.session.state", state),
        ("openprogram.client_check.answered_once", answered_once),
        ("openprogram.client_check.no_unknown_result", "held"),
        ("openprogram.client_check.retry_after", "held"),
        ("openprogram.client_check.max_retries", "held"),
        ("openprogram.client_check.no_key_in_body", "held"),
        ("openprogram.client_check.no_request_after_final", "held"),
        ("openprogram.wire_behaviours", behaviours),
    ]


DROPPED = (
    "- client check answered_once broken by request #2: call call_wire1_1 (search) served in "
    "answer #1 has no result in the next request\n"
    "  at session 'dropper', request #2\n"
    "  (turn it off with serve --no-check answered_once, or the scenario's wire: {checks: "
    "{answered_once: false}})"
)


@pytest.mark.slow
def test_a_test_case_per_session_with_its_failure_and_properties(
    openai: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = write_scenario(tmp_path)
    with serve_scenario(path, details=session_details(path)) as server:
        assert chat_agent(openai, server.base_url("openai", "good")) == "Found both."
        end(server, "good")
        chat_agent(openai, server.base_url("openai", "dropper"), drop_second=True)
        report = server.check(write=session_junit("out/junit.xml", scenario=path))
    assert not report.passed
    suite, cases = parsed(tmp_path / "out" / "junit.xml")

    timing = {k: suite.pop(k) for k in ("time", "timestamp", "hostname")}
    assert suite == {
        "name": "two searches in one round, then the answer",
        "errors": "0",
        "failures": "1",
        "skipped": "0",
        "tests": "2",
    }
    assert re.fullmatch(r"\d+\.\d{3}", timing["time"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", timing["timestamp"])
    assert timing["hostname"] == os.uname().nodename
    times = [float(c.pop("time")) for c in cases]
    assert all(0 < t < 5 for t in times)
    assert (
        cases
        == [  # the live session, then the ended one
            {
                "classname": "two_searches",
                "name": "dropper",
                "properties": checked_props(
                    "live", "broken", "tool_round stopped_on_text not_streamed"
                ),
                "failure": (DROPPED.splitlines()[0][2:], DROPPED),
            },
            {
                "classname": "two_searches",
                "name": "good",
                "properties": checked_props(
                    "ended", "held", "tool_round every_parallel_result stopped_on_text not_streamed"
                ),
                "failure": None,
            },
        ]
    )


def test_the_default_session_and_the_servers_own_failures_are_test_cases(tmp_path: Path) -> None:
    import httpx2

    with serve(["Hello.", "Bye."], max_sessions=1) as server:
        with httpx2.Client(base_url=server.url) as http:
            body = {"model": "m", "messages": [{"role": "user", "content": "Hi."}]}
            assert http.post("/v1/chat/completions", json=body).status_code == 200
            assert http.post("/s/a/v1/chat/completions", json=body).status_code == 200
            assert http.post("/s/b/v1/chat/completions", json=body).status_code == 503
        server.check(write=session_junit(tmp_path / "junit.xml"))
    suite, cases = parsed(tmp_path / "junit.xml")
    assert (suite["name"], suite["tests"], suite["failures"]) == ("openprogram-sim serve", "3", "3")
    unserved = "1 of 2 scripted turns were never requested (the client made 1 model call(s))"
    assert [(c["classname"], c["name"], c["failure"]) for c in cases] == [
        ("openprogram-sim serve", "default", (unserved, f"- {unserved}\n  remove them, or "
                                              "check why the client stopped early")),
        ("openprogram-sim serve", "a", (unserved, f"- {unserved}\n  remove them, or check why "
                                        "the client stopped early")),
        ("openprogram-sim serve", "(server)", (
            "1 request(s) were refused: 1 sessions were live (max_sessions)",
            "- 1 request(s) were refused: 1 sessions were live (max_sessions)\n  end sessions "
            "when done (DELETE /s/NAME), shorten the session TTL, or raise max_sessions "
            "(--max-sessions)",
        )),
    ]  # fmt: skip
    default = dict(cases[0]["properties"])
    assert default["openprogram.wire_behaviours"] == "stopped_on_text not_streamed"
    assert not any(k.startswith("openprogram.client_check.") for k in default)  # shared: unchecked
    assert "openprogram.client_check.answered_once" in dict(cases[1]["properties"])


def test_characters_xml_cannot_hold_are_escaped(tmp_path: Path) -> None:
    import httpx2

    path = tmp_path / "bell.yaml"
    path.write_text(
        'scenario: "a bell \\a in the title"\n'
        'exec: {content: "Hi."}\n'
        "model: [{text: Hello.}, {text: Bye.}]\n"
    )
    with serve_scenario(path) as server:
        body = {"model": "m", "messages": [{"role": "user", "content": "Hi."}]}
        httpx2.post(f"{server.url}/s/one/v1/chat/completions", json=body)
        server.check(write=session_junit(tmp_path / "junit.xml", scenario=path))
    suite, cases = parsed(tmp_path / "junit.xml")  # it parses
    assert suite["name"] == "a bell \\u0007 in the title"
    assert [(c["name"], c["failure"][0]) for c in cases] == [
        ("one", "1 of 2 scripted turns were never requested (the client made 1 model call(s))")
    ]
