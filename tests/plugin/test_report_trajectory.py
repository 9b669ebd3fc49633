"""A trajectory's graded score and each property's verdict, passed or not, where users read
verdicts: the HTML report's rows, the JUnit XML's test cases and ``run --json``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from openprogram_sim.cli import main as cli_main

HELD = """\
scenario: weather and time, asked together
tools:
  get_weather: {returns: "sunny"}
  get_time: {returns: "14:05"}
exec: {content: "Weather and time?", tools: [get_weather, get_time]}
model:
  - tool_calls: [{get_weather: {city: Paris}}, {get_time: {city: Paris}}]
  - text: "Sunny, 14:05."
expect:
  trajectory:
    mode: exact
    calls: [[get_time, get_weather]]
  properties:
    - same_round: [get_weather, get_time]
    - at_most: {tool: get_time, times: 1}
"""

BROKEN = """\
scenario: a search that runs twice
tools:
  search: {returns: "3 results"}
  lookup: {returns: "ok"}
exec: {content: "Find.", tools: [search, lookup]}
model:
  - tool_calls: [{search: {q: a}}]
  - tool_calls: [{search: {q: b}}]
  - text: done
expect:
  trajectory:
    mode: in_order
    calls: [search, lookup]
  properties:
    - at_most: {tool: search, times: 1}
    - ends_with: {reason: stop}
"""

CONVERSATION = """\
scenario: two execs, each with its trajectory
tools:
  search: {returns: "3 results"}
conversation:
  - exec: {content: "One.", tools: [search]}
    expect:
      trajectory: {mode: superset, calls: [search]}
  - exec: {content: "Two.", tools: [search]}
    expect:
      properties:
        - at_least: {tool: search, times: 2}
model:
  - tool_calls: [{search: {q: a}}]
  - text: "one"
  - tool_calls: [{search: {q: b}}]
  - text: "two"
"""


def _project(root: Path) -> None:
    (root / "scenarios").mkdir(exist_ok=True)
    (root / "scenarios" / "held.yaml").write_text(HELD)
    (root / "scenarios" / "broken.yaml").write_text(BROKEN)


def _junit(path: Path) -> dict[str, dict[str, str]]:
    root = ET.parse(path).getroot()
    return {
        str(case.get("name")): {
            str(p.get("name")): str(p.get("value"))
            for p in case.iter("property")
            if str(p.get("name")).startswith("openprogram.")
        }
        for case in root.iter("testcase")
    }


def test_junit_carries_the_score_and_each_rules_verdict(pytester: pytest.Pytester) -> None:
    _project(pytester.path)
    result = pytester.runpytest("--openprogram-scenarios", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    props = _junit(pytester.path / "junit.xml")
    assert props["a search that runs twice"] == {
        "openprogram.trajectory.mode": "in_order",
        "openprogram.trajectory.score": "0.5",
        "openprogram.trajectory.precision": "0.5",
        "openprogram.trajectory.recall": "0.5",
        "openprogram.trajectory.f1": "0.5",
        "openprogram.trajectory.min_score": "1.0",
        "openprogram.trajectory.verdict": "failed",
        "openprogram.trajectory.where": "scenarios/broken.yaml:11",
        "openprogram.property.1.rule": 'at_most: {"tool": "search", "times": 1}',
        "openprogram.property.1.verdict": "broken",
        "openprogram.property.1.where": "scenarios/broken.yaml:15",
        "openprogram.property.1.events": "#14",
        "openprogram.property.2.rule": 'ends_with: {"reason": "stop"}',
        "openprogram.property.2.verdict": "held",
        "openprogram.property.2.where": "scenarios/broken.yaml:16",
    }
    held = props["weather and time, asked together"]
    assert held["openprogram.trajectory.verdict"] == "passed"
    assert held["openprogram.trajectory.score"] == "1.0"
    assert held["openprogram.property.1.rule"] == 'same_round: ["get_weather", "get_time"]'
    assert [held[f"openprogram.property.{n}.verdict"] for n in (1, 2)] == ["held", "held"]
    assert "openprogram.property.1.events" not in held


def test_a_conversations_execs_are_named_in_junit(pytester: pytest.Pytester) -> None:
    (pytester.path / "talk.yaml").write_text(CONVERSATION)
    result = pytester.runpytest("--openprogram-scenarios", "talk.yaml", "--junitxml=junit.xml")
    result.assert_outcomes(failed=1)
    props = _junit(pytester.path / "junit.xml")["two execs, each with its trajectory"]
    assert props["openprogram.exec.1.trajectory.mode"] == "superset"
    assert props["openprogram.exec.1.trajectory.verdict"] == "passed"
    assert props["openprogram.exec.1.trajectory.where"] == "talk.yaml:7"
    assert props["openprogram.exec.2.property.1.verdict"] == "broken"
    assert props["openprogram.exec.2.property.1.where"] == "talk.yaml:11"


class _Checks(HTMLParser):
    """Each row of a report's checks tables: the test's id, the row's data attributes and
    its cells' text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.test = ""
        self.rows: list[dict[str, Any]] = []
        self.cell: list[str] | None = None
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "details" and "test" in (a.get("class") or "").split():
            self.test = str(a["data-id"])
        elif tag == "tr" and a.get("data-check"):
            self.rows.append({"test": self.test, **a, "cells": [], "links": []})
        elif tag == "td" and self.rows and "cells" in self.rows[-1]:
            self.cell = []
        elif tag == "a" and self.cell is not None and "at-link" in (a.get("class") or ""):
            self.rows[-1]["links"].append(a["data-at"])

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self.cell is not None:
            self.rows[-1]["cells"].append(" ".join("".join(self.cell).split()))
            self.cell = None


def _checks(html: str) -> list[dict[str, Any]]:
    parser = _Checks()
    parser.feed(html)
    return parser.rows


def test_the_report_shows_the_score_and_each_rule_on_passing_and_failing_rows(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester.path)
    pytester.runpytest("--openprogram-scenarios", "--openprogram-report=report.html")
    html = (pytester.path / "report.html").read_text()
    rows = _checks(html)
    broken = [r for r in rows if r["test"].endswith("broken.yaml::a search that runs twice")]
    assert [r["cells"] for r in broken] == [
        [
            "trajectory in_order",
            "fail",
            "scenarios/broken.yaml:11",
            "score 0.50 (recall), min_score 1.0 · precision 1/2 = 0.50 · recall 1/2 = 0.50 · "
            "F1 0.50",
        ],
        [
            'property 1 at_most: {"tool": "search", "times": 1}',
            "broken",
            "scenarios/broken.yaml:15",
            "#14search was called 2 times, at most 1 allowed: #6, #14 (beyond the limit: #14)",
        ],
        ['property 2 ends_with: {"reason": "stop"}', "held", "scenarios/broken.yaml:16", ""],
    ]
    assert broken[0]["data-score"] == "0.5" and broken[0]["data-mode"] == "in_order"
    assert broken[1]["links"] == ["14"]  # to the timeline's node of #14
    assert (broken[1]["class"], broken[2]["class"]) == ("property broken", "property held")
    held = [r for r in rows if "held.yaml" in r["test"]]
    assert [r["cells"][:2] for r in held] == [
        ["trajectory exact", "pass"],
        ['property 1 same_round: ["get_weather", "get_time"]', "held"],
        ['property 2 at_most: {"tool": "get_time", "times": 1}', "held"],
    ]
    assert held[0]["cells"][3].startswith("score 1.00 (F1), min_score 1.0")
    # the row's summary line gives the score and the rules held
    assert "trajectory 0.50 · properties 1/2 held" in html
    assert "trajectory 1.00 · properties 2/2 held" in html


def test_run_json_has_the_score_and_each_rules_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert cli_main(["run", "scenarios", "--json"]) == 1
    data = {s["path"]: s for s in json.loads(capsys.readouterr().out)["scenarios"]}
    broken = data["scenarios/broken.yaml"]
    assert broken["trajectory"] == [
        {
            "label": "",
            "run": 0,
            "mode": "in_order",
            "args": "subset",
            "depth": 0,
            "score": 0.5,
            "scored_by": "recall",
            "precision": 0.5,
            "recall": 0.5,
            "f1": 0.5,
            "matched": 1,
            "expected": 2,
            "made": 2,
            "min_score": 1.0,
            "passed": False,
            "measures": "score 0.50 (recall); precision 1/2 = 0.50, recall 1/2 = 0.50, F1 0.50",
            "where": "scenarios/broken.yaml:11",
        }
    ]
    assert [(p["rule"], p["held"], p["events"], p["where"]) for p in broken["properties"]] == [
        ("at_most", False, [14], "scenarios/broken.yaml:15"),
        ("ends_with", True, [], "scenarios/broken.yaml:16"),
    ]
    assert broken["properties"][0]["why"] == [
        "search was called 2 times, at most 1 allowed: #6, #14 (beyond the limit: #14)"
    ]
    held = data["scenarios/held.yaml"]
    assert [t["passed"] for t in held["trajectory"]] == [True]
    assert [p["held"] for p in held["properties"]] == [True, True]
