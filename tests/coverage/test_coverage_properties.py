"""Coverage counts the trajectory modes and property rules a suite asserts with: in the
table ``--coverage`` prints, its JSON, the plugin's table and JSON, and the HTML report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _support import run_cli

from openprogram_sim.coverage import EXPECTATION_KEYS, BehaviourCoverage

WEATHER = """\
scenario: weather and time, asked together
tools:
  get_weather: {returns: "sunny"}
  get_time: {returns: "14:05"}
exec: {content: "Weather and time?", tools: [get_weather, get_time]}
model:
  - tool_calls: [{get_weather: {city: Paris}}, {get_time: {city: Paris}}]
  - text: "Sunny, 14:05."
expect:
  trajectory: {mode: exact, calls: [[get_time, get_weather]]}
  properties:
    - same_round: [get_weather, get_time]
    - at_most: {tool: get_time, times: 1}
    - at_most: {tool: get_weather, times: 1}
"""

SEARCH = """\
scenario: one search, then the answer
tools:
  search: {returns: "3 results"}
exec: {content: "Find.", tools: [search]}
model:
  - tool_calls: [{search: {q: a}}]
  - text: done
expect:
  trajectory: {mode: in_order, calls: [search]}
  properties:
    - at_most: {tool: search, times: 1}
    - ends_with: {reason: stop}
"""

TALK = """\
scenario: a conversation whose second exec has a rule
tools:
  search: {returns: "3 results"}
conversation:
  - exec: {content: "One.", tools: [search]}
    expect:
      trajectory: {mode: superset, calls: [search]}
  - exec: {content: "Two.", tools: [search]}
    expect:
      properties: [{no_repeat: search}]
model:
  - tool_calls: [{search: {q: a}}]
  - text: "one"
  - tool_calls: [{search: {q: b}}]
  - text: "two"
"""

PLAIN = """\
scenario: no trajectory, no rule
exec: {content: "Hi"}
model: [{text: "Hello"}]
expect: {result: "Hello"}
"""

EXPECTED = {
    "trajectory.exact": ["scenarios/weather.yaml"],
    "trajectory.in_order": ["scenarios/search.yaml"],
    "trajectory.any_order": [],
    "trajectory.subset": [],
    "trajectory.superset": ["scenarios/talk.yaml"],
    "property.never": [],
    "property.before": [],
    "property.at_most": ["scenarios/search.yaml", "scenarios/weather.yaml"],
    "property.at_least": [],
    "property.same_round": ["scenarios/weather.yaml"],
    "property.no_repeat": ["scenarios/talk.yaml"],
    "property.ends_with": ["scenarios/search.yaml"],
}
LINES = [
    "trajectory modes asserted (scenarios): exact 1, in_order 1, any_order 0, subset 0, superset 1",
    "property rules asserted (scenarios): never 0, before 0, at_most 2, at_least 0, "
    "same_round 1, no_repeat 1, ends_with 1",
]


def _suite(root: Path) -> Path:
    folder = root / "scenarios"
    folder.mkdir(exist_ok=True)
    for name, text in (("weather", WEATHER), ("search", SEARCH), ("talk", TALK), ("plain", PLAIN)):
        (folder / f"{name}.yaml").write_text(text)
    return root


def test_the_json_names_the_scenarios_of_each_mode_and_rule(tmp_path: Path) -> None:
    result = run_cli("run", "scenarios", "--coverage", "--json", cwd=_suite(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["expectations"] == EXPECTED
    assert list(data["expectations"]) == list(EXPECTATION_KEYS)
    assert BehaviourCoverage.from_json(data).to_json()["expectations"] == EXPECTED


def test_the_table_counts_the_scenarios_of_each_mode_and_rule(tmp_path: Path) -> None:
    result = run_cli("run", "scenarios", "--coverage", cwd=_suite(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.rstrip().splitlines()[-2:] == LINES


def test_the_plugin_prints_and_writes_the_same(pytester: pytest.Pytester) -> None:
    _suite(pytester.path)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--openprogram-scenarios", "--openprogram-coverage",
        "--openprogram-coverage-json", "cov.json", "--openprogram-report", "report.html",
    )  # fmt: skip
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(LINES)
    data = json.loads((pytester.path / "cov.json").read_text())
    assert data["expectations"] == EXPECTED
    # the report's coverage section: each mode and rule with its count of scenarios
    html = (pytester.path / "report.html").read_text()
    counts = dict(
        re.findall(r'data-expectation="([a-z_.]+)"[^>]*><code>[a-z_]+</code> <b>(\d+)', html)
    )
    assert counts == {key: str(len(paths)) for key, paths in EXPECTED.items()}
    assert 'title="scenarios/search.yaml, scenarios/weather.yaml"><code>at_most</code>' in html


def test_merging_two_halves_adds_their_scenarios() -> None:
    """What the pytest-xdist controller does with its workers' records."""
    first, second = BehaviourCoverage(), BehaviourCoverage()
    first.add("a.yaml", {"exercised": [], "expectations": ["property.at_most"]})
    second.add(
        "b.yaml", {"exercised": [], "expectations": ["property.at_most", "trajectory.exact"]}
    )
    first.update(second)
    data = first.to_json()["expectations"]
    assert data["property.at_most"] == ["a.yaml", "b.yaml"]
    assert data["trajectory.exact"] == ["b.yaml"]
    assert first.expectation_lines()[0].startswith(
        "trajectory modes asserted (scenarios): exact 1,"
    )
