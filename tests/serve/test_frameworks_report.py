"""Three frameworks' sessions in one report: ``openprogram-sim serve
examples/any_agent/weather.yaml --report PATH --junitxml PATH`` as a real process, and
pydantic-ai (passing), openai-agents (its weather tool in Fahrenheit: a property broken) and
langchain (its graph capped too low: the trajectory broken) against it, each in its own
session. Ctrl-C writes the report; a real headless Chromium shows each session's verdict and
its timeline: the picks as served, the results each agent's real tools returned."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_support import interrupt, read_banner, serve_process
from test_frameworks import FRAMEWORKS, ROOT, SCENARIO, UNLIMITED, Tools
from test_serve_report import _open, browser, errors

__all__ = ["browser"]  # the fixture, shared with the served-report tests

DASH = "\u2013"
SESSIONS = {  # session (the framework's name) -> its tools (openai-agents': the bug)
    "pydantic-ai": Tools(),
    "openai-agents": Tools(units="F"),
    "langchain": Tools(),
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, int]]:
    """The three sessions played against ``serve --report``; the report's folder, what the
    server printed at Ctrl-C and its exit status."""
    for name in FRAMEWORKS:
        pytest.importorskip(FRAMEWORKS[name][3])
    root = tmp_path_factory.mktemp("frameworks-report")
    report, junit = root / "report.html", root / "junit.xml"
    old = Path.cwd()
    os.chdir(ROOT)  # the scenario named from the project's root, as a user names it
    try:
        with serve_process(SCENARIO, "--report", str(report), "--junitxml", str(junit)) as proc:
            url, _ = read_banner(proc)
            for name, tools in SESSIONS.items():
                agent, api, cap, _ = FRAMEWORKS[name]
                base = f"{url}/s/{name}" + ("/v1" if api == "openai" else "")
                limit = cap if name == "langchain" else UNLIMITED[name]
                agent(base, tools, limit)
            out, _ = interrupt(proc)
            status = proc.returncode
    finally:
        os.chdir(old)
    yield root, out, status


@pytest.mark.slow
def test_the_servers_report_names_each_frameworks_session(
    written: tuple[Path, str, int],
) -> None:
    root, out, status = written
    assert status == 1
    summary = out[out.index("openprogram-sim serve: ") :].splitlines()
    assert summary[:3] == [
        "openprogram-sim serve: 7 model call(s); checked: session 'pydantic-ai', session "
        "'openai-agents', session 'langchain'",
        "FAIL 4 problem(s)",
        "- session 'openai-agents': property 1 (before) does not hold: before: {\"first\": "
        '{"tool": "get_weather", "result": {"$contains": "°C"}}, "then": "to_fahrenheit"}',
    ]
    titles = [line for line in summary if line.startswith("- session ")]
    assert titles == [
        summary[2],
        "- session 'langchain': 2 of 3 scripted turns were never requested (the client made "
        "1 model call(s))",
        "- session 'langchain': trajectory (exact) did not match: score 0.67, min_score 1.0",
        "- session 'langchain': property 3 (ends_with) does not hold: ends_with: "
        '{"reason": "stop"}',
    ]
    cases = ET.parse(root / "junit.xml").getroot().iter("testcase")
    verdicts = {c.get("name"): c.find("failure") is not None for c in cases}
    assert verdicts == {"pydantic-ai": False, "openai-agents": True, "langchain": True}


@pytest.mark.slow
def test_each_frameworks_timeline_in_a_browser(
    written: tuple[Path, str, int], browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    root, _, _ = written
    browser.get((root / "report.html").as_uri())
    rows = browser.find_elements(By.CSS_SELECTOR, "details.test")
    assert sorted((r.get_attribute("data-id"), r.get_attribute("data-status")) for r in rows) == [
        ("/s/langchain", "failed"),
        ("/s/openai-agents", "failed"),
        ("/s/pydantic-ai", "passed"),
    ]

    def timeline(session: str) -> tuple[Any, str, list[tuple[str, str]]]:
        row = _open(browser, session)
        heads = [
            (h.find_element(By.CSS_SELECTOR, ".at").text,
             h.find_element(By.CSS_SELECTOR, ".note").text)
            for h in row.find_elements(By.CSS_SELECTOR, ".round-head")
        ]  # fmt: skip
        drawn = row.find_element(By.CSS_SELECTOR, ".timeline")
        assert drawn.is_displayed()
        return row, drawn.text, heads

    passing, text, heads = timeline("/s/pydantic-ai")
    assert [note for _, note in heads] == [
        "request #1 · anthropic (stream)",  # pydantic-ai's Anthropic model streams
        "request #2 · anthropic (stream)",
        "request #3 · anthropic (stream)",
    ]
    for shown in ("What's the weather in Paris, in Fahrenheit?", 'get_weather(city="Paris")',
                  "→ sunny, 21°C", "to_fahrenheit(celsius=21)", "→ 69.8°F",
                  "Sunny in Paris, 69.8°F.", "finished: the model answered with text"):  # fmt: skip
        assert shown in text, (shown, text)
    assert passing.find_element(By.CSS_SELECTOR, "tr.trajectory").get_attribute("data-score") == (
        "1.0"
    )

    fahrenheit, text, heads = timeline("/s/openai-agents")
    assert heads[0][1] == "request #1 · openai-responses"
    assert "→ sunny, 70°F" in text and "→ 69.8°F" in text
    rules = fahrenheit.find_elements(By.CSS_SELECTOR, "tr.property")
    assert [(r.get_attribute("data-rule"), r.get_attribute("class")) for r in rules] == [
        ("before", "property broken"),
        ("at_most", "property held"),
        ("ends_with", "property held"),
    ]

    capped, text, heads = timeline("/s/langchain")
    assert [note for _, note in heads] == ["request #1 · openai-chat"]
    for shown in ('get_weather(city="Paris")', "→ no result: no further request came",
                  "ended: aborted"):  # fmt: skip
        assert shown in text, (shown, text)
    assert "to_fahrenheit" not in text
    score = capped.find_element(By.CSS_SELECTOR, "tr.trajectory").get_attribute("data-score")
    assert score == "0.6667"  # 2/3, the F1 of one call made of the two expected
    assert capped.find_element(By.CSS_SELECTOR, "pre.failure").text.startswith(
        "- 2 of 3 scripted turns were never requested"
    )
    assert errors(browser) == []
