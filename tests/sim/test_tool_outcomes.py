"""``outcomes:``: a simulated tool's outcome call by call (return, raise, return; the last
repeats), its load-time errors, and the same through the CLI."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from _support import LAST_TURN_STOPS, compact, run_cli

from openprogram_sim import ScenarioError, check_outcome, parse_scenario, run_scenario

FLAKY = """\
scenario: a tool that returns, raises, then returns
tools:
  save:
    parameters: {type: object, properties: {title: {type: string}}}
    outcomes:
      - {returns: "saved"}
      - {raises: "disk full"}
      - {returns: {$error: "quota"}}
      - {returns: "saved again"}
exec: {content: "Save five notes.", tools: [save]}
model:
  - tool_calls: [{save: {title: a}}, {save: {title: b}}, {save: {title: c}}]
  - tool_calls: [{save: {title: d}}, {save: {title: e}}]
  - text: "Done."
"""


def _ends(trace: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return [
        (e["args"], e["result"], e["is_error"], e["error_kind"])
        for e in trace
        if e["type"] == "tool_execution_end"
    ]


def test_each_call_takes_the_next_outcome_and_the_last_repeats() -> None:
    outcome = run_scenario(parse_scenario(FLAKY, "flaky.yaml"))
    assert outcome.error is None and outcome.result == "Done."
    assert _ends(outcome.trace) == [
        ({"title": "a"}, "saved", False, None),
        ({"title": "b"}, "disk full", True, "raised"),
        ({"title": "c"}, "quota", True, "returned"),
        ({"title": "d"}, "saved again", False, None),
        ({"title": "e"}, "saved again", False, None),
    ]
    # a raise is a tool error the model sees: the loop goes on, round after round
    assert compact(outcome.trace)[-6:] == [
        *LAST_TURN_STOPS,
    ]


def test_an_expectation_on_the_sequence_passes_and_a_wrong_one_fails_with_its_line() -> None:
    good = FLAKY + textwrap.dedent(
        """\
        expect:
          events:
            - tool_execution_end: {result: saved, is_error: false}
            - tool_execution_end: {result: "disk full", is_error: true, error_kind: raised}
        """
    )
    assert check_outcome(run_scenario(parse_scenario(good, "good.yaml"))).passed
    bad = FLAKY + "expect:\n  not_events:\n    - tool_execution_end: {error_kind: raised}\n"
    verdict = check_outcome(run_scenario(parse_scenario(bad, "bad.yaml")))
    (failure,) = verdict.failures
    assert failure.title.startswith("an event that must not occur occurred 1 time(s)")
    assert failure.where == "bad.yaml:17"


def test_a_mistyped_outcome_is_a_load_error_with_the_line_and_the_fix() -> None:
    text = """\
scenario: bad outcomes
tools:
  save:
    outcomes:
      - {returns: "saved"}
      - {retruns: "x"}
      - {returns: a, raises: b}
      - {}
  both: {returns: a, raises: b}
  twice: {returns: a, outcomes: [{returns: b}]}
exec: {content: go}
model: [{text: hi}]
"""
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "bad.yaml")
    assert [str(i) for i in info.value.issues] == [
        "bad.yaml:6: (tools.save.outcomes[1].retruns) unknown key 'retruns'; did you mean "
        "'returns'?",
        "bad.yaml:7: (tools.save.outcomes[2]) an outcome is {returns: value} or {raises: "
        "message}; it gives returns and raises: keep one",
        "bad.yaml:8: (tools.save.outcomes[3]) an outcome is {returns: value} or {raises: message}",
        "bad.yaml:9: (tools.both) a tool has one behaviour; it gives returns and raises: keep "
        "one (outcomes: [{returns: ...}, {raises: ...}] mixes both, call by call)",
        "bad.yaml:10: (tools.twice) a tool has one behaviour; it gives returns and outcomes: "
        "keep one",
    ]


def test_progress_updates_come_before_every_outcome() -> None:
    text = FLAKY.replace("    outcomes:", '    updates: ["writing"]\n    outcomes:', 1)
    outcome = run_scenario(parse_scenario(text, "updates.yaml"))
    kinds = [e["type"] for e in outcome.trace if e["type"].startswith("tool_execution")]
    assert kinds == ["tool_execution_start", "tool_execution_update", "tool_execution_end"] * 5


def test_the_cli_runs_it(tmp_path: Path) -> None:
    path = tmp_path / "flaky.yaml"
    path.write_text(
        FLAKY + "expect:\n  events:\n    - tool_execution_end: {result: saved again}\n"
        "  counts: {tool_execution_end: 5}\n"
    )
    result = run_cli("run", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_the_json_schema_describes_outcomes() -> None:
    from openprogram_sim.scenario import json_schema

    defs = json_schema()["$defs"]
    outcomes = defs["ToolDef"]["properties"]["outcomes"]
    assert outcomes["anyOf"][0]["items"] == {"$ref": "#/$defs/ToolOutcome"}
    assert set(defs["ToolOutcome"]["properties"]) == {"returns", "raises"}
