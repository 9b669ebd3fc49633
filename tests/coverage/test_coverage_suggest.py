"""Starter scenarios for gaps: for every behaviour, on a suite's own tools, a file that
passes on the loop and exercises and asserts the behaviour it was written for."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from openprogram_sim.coverage import CATALOGUE, behaviours_of, starter_document, suggest
from openprogram_sim.coverage._suggest import suite_tools
from openprogram_sim.play import check_outcome, run_scenario
from openprogram_sim.scenario import Scenario, discover, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "weather_agent"
IDS = [b.id for b in CATALOGUE]


def _suite(folder: Path) -> list[Scenario]:
    return [load_scenario(p, pythonpath=[EXAMPLE / "src"]) for p in discover([folder])]


SUITES = {
    "library": lambda: _suite(ROOT / "scenarios"),
    "weather_agent": lambda: _suite(EXAMPLE / "scenarios"),
    "no tools": lambda: [],
}


@pytest.mark.parametrize("suite", list(SUITES))
def test_every_starter_passes_and_asserts_its_behaviour(suite: str) -> None:
    scenarios = SUITES[suite]()
    wrong = {}
    for id, text in suggest(IDS, scenarios):
        scenario = parse_scenario(text, path=str(ROOT / "scenarios" / f"{id}.yaml"))
        outcome = run_scenario(scenario)
        verdict = check_outcome(outcome)
        asserted = behaviours_of(outcome).asserted
        if not verdict.passed or id not in asserted:
            wrong[id] = verdict.report() or f"asserts {asserted}"
    assert wrong == {}


def test_starters_use_the_suites_own_tools_and_arguments() -> None:
    tools = suite_tools(_suite(EXAMPLE / "scenarios"))
    assert tools[0].name == "get_weather" and tools[0].python == "weather_agent.tools:get_weather"
    assert tools[0].args == {"city": "Cairo"}  # what the suite already sends it
    doc = starter_document("tool_raised", tools)
    assert doc["tools"] == {
        "get_weather": {
            "python": "weather_agent.tools:get_weather",
            "raises": "get_weather is down",
        }
    }
    assert "remove returns:/raises: to run your code" in doc["description"]
    assert doc["description"].startswith('Seed: "tool.execute(...) raises')
    assert doc["tags"] == ["errors", "starter"]


def test_the_text_is_the_fuzz_writers_with_the_schema_line() -> None:
    ((_, text),) = suggest(["steering_skip"], _suite(ROOT / "scenarios" / "steering"))
    first, rest = text.split("\n", 1)
    # saved as scenarios/<id>.yaml, the schema beside scenarios/ (where init writes it)
    assert first == "# yaml-language-server: $schema=../schema/scenario.schema.json"
    from openprogram_sim.fuzz._regression import regression_text

    assert rest == regression_text(yaml.safe_load(rest))
    assert "  - tool_execution_end: {tool_call_id: call_2, skipped: true, is_error: true}" in rest
