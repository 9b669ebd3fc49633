"""Matchers, event modes and the failure diffs users read."""

from __future__ import annotations

from typing import Any

import pytest

from openprogram_sim.play import check_outcome, run_scenario
from openprogram_sim.scenario import parse_scenario
from openprogram_sim.trace import match_events, matches

BASE = """\
scenario: two searches then text
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}}
    returns: ["first hit", "second hit"]
  broken:
    raises: "disk full"
exec:
  content: "Find it."
  tools: [search, broken]
model:
  - tool_calls: [{search: {q: a}}, {broken: {}}, {search: {q: b}}]
  - text: "Found 2."
"""


def verdict(expect: str) -> Any:
    return check_outcome(run_scenario(parse_scenario(BASE + expect, "t.yaml")))


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ({"$regex": "^Skip"}, "Skipped due", True),
        ({"$regex": "^Skip"}, "skipped", False),
        ({"$contains": "disk"}, "disk full", True),
        ({"$contains": "search"}, ["search", "x"], True),
        ({"$contains": "nope"}, ["search"], False),
        ({"$subset": {"q": "a"}}, {"q": "a", "n": 1}, True),
        ({"$subset": {"q": {"$regex": "^a"}}}, {"q": "abc"}, True),
        ({"$subset": {"q": "b"}}, {"q": "a"}, False),
        ({"$in": ["stop", "cap"]}, "cap", True),
        ({"$any": True}, None, True),
        ({"q": "a"}, {"q": "a", "n": 1}, False),  # plain dicts compare whole
        ([1, {"$regex": "x"}], [1, "xyz"], True),
        (3, 3, True),
    ],
)
def test_matchers(expected: Any, actual: Any, ok: bool) -> None:
    assert matches(expected, actual) is ok


def test_ordered_with_gaps_passes_and_results_repeat_the_last_value() -> None:
    v = verdict(
        """\
expect:
  result: "Found 2."
  model_calls: 2
  events:
    - tool_execution_end: {tool_name: search, result: "first hit"}
    - tool_execution_end: {tool_name: broken, is_error: true, result: "disk full"}
    - tool_execution_end: {tool_name: search, result: "second hit"}
    - agent_end: {reason: stop}
  counts: {tool_execution_start: 3, agent_end: 1}
  not_events:
    - tool_execution_end: {tool_name: search, is_error: true}
  requests:
    - {depth: 0, round: 1, tools: [search, broken], tool_choice: auto, message_count: 1}
    - {round: 2, last_message: {role: toolResult, text: "second hit"}, message_count: 5}
"""
    )
    assert v.passed, v.report()


def test_out_of_order_expectation_fails_with_a_diff() -> None:
    v = verdict(
        """\
expect:
  events:
    - tool_execution_end: {tool_name: broken}
    - tool_execution_end: {tool_name: search, result: "first hit"}
"""
    )
    assert not v.passed
    (failure,) = v.failures
    assert failure.title == "events (ordered) did not match"
    lines = failure.detail.splitlines()
    assert lines[0] == (
        "expected event 2 of 2 did not match: out of order: it matches only events before "
        "the previous match (#7)"
    )
    assert lines[1] == '  tool_execution_end {tool_name: "search", result: "first hit"}'
    assert "  > #" in failure.detail  # the marker on the closest actual event
    assert lines[-3:] == [
        "  field      expected     actual",
        '  tool_name  "search"     "search"',
        '  result     "first hit"  "second hit"  <- differs',
    ]


def test_exact_mode_pins_the_whole_sequence() -> None:
    trace = run_scenario(parse_scenario(BASE + "expect: {}\n")).trace
    exact = [{e["type"]: {}} for e in trace]
    assert match_events(exact, trace, "exact") is None
    short = match_events(exact[:-1], trace, "exact")
    assert short is not None and short.reason == (
        "the trace has 1 more event(s), first a agent_end"
    )
    wrong = exact.copy()
    wrong[3] = {"turn_end": {}}
    mismatch = match_events(wrong, trace, "exact")
    assert mismatch is not None and (mismatch.index, mismatch.reason) == (
        3,
        f"the event at this position is a {trace[3]['type']}",
    )
    assert match_events([*exact, {"agent_end": {}}], trace, "exact").reason == (  # type: ignore[union-attr]
        "the trace ended before this event"
    )


def test_unordered_mode_needs_distinct_events() -> None:
    trace = run_scenario(parse_scenario(BASE + "expect: {}\n")).trace
    two = [{"tool_execution_end": {"tool_name": "search"}}] * 2
    assert match_events(two, trace, "unordered") is None
    assert match_events(two * 2, trace, "unordered") is not None


def test_every_other_check_reports_what_differs() -> None:
    v = verdict(
        """\
expect:
  result: {$regex: "^Nothing"}
  model_calls: 3
  counts: {tool_execution_end: 2}
  not_events:
    - tool_execution_end: {tool_name: broken}
  requests:
    - {tools: [search]}
    - {call: 5, round: 1}
"""
    )
    titles = [f.title for f in v.failures]
    assert titles == [
        "exec returned something else",
        "the model was called 2 times, expected 3",
        "request 1 (depth 0, round 1) differs",
        "expected request 5, but the model was called 2 times",
        "an event that must not occur occurred 1 time(s): "
        '{"tool_execution_end": {"tool_name": "broken"}}',
        "tool_execution_end occurred 3 time(s), expected 2",
    ]
    assert v.failures[0].detail == '  expected: regex "^Nothing"\n  actual:   "Found 2."'
    assert v.failures[2].detail == '  tools: expected ["search"], actual ["search", "broken"]'


def test_raises_expectations_and_unconsumed_turns() -> None:
    erroring = BASE.replace('  - text: "Found 2."', '  - {stop_reason: error, error: "quota"}')
    ok = check_outcome(run_scenario(parse_scenario(erroring + "expect: {raises: quota}\n")))
    assert ok.passed, ok.report()
    wrong = check_outcome(run_scenario(parse_scenario(erroring + "expect: {raises: timeout}\n")))
    assert [f.title for f in wrong.failures] == ['exec raised, but its message lacks "timeout"']
    unexpected = check_outcome(run_scenario(parse_scenario(erroring + "expect: {}\n")))
    assert unexpected.failures[0].detail == "ModelError: quota"
    extra = BASE + '  - text: "never used"\nexpect: {raises: true}\n'
    titles = [f.title for f in check_outcome(run_scenario(parse_scenario(extra))).failures]
    assert titles == [
        "exec returned, and the scenario expects it to raise",
        "1 of 3 scripted turns were never requested",
    ]


def test_a_call_beyond_the_script_fails_the_scenario_even_if_raising_is_expected() -> None:
    short = BASE.replace('  - text: "Found 2."\n', "")
    v = check_outcome(run_scenario(parse_scenario(short + "expect: {raises: true}\n")))
    assert v.failures[0].title == "the model was called beyond its script"
    assert "model call #2 (depth 0, round 2) has no scripted turn" in v.failures[0].detail


def test_raises_can_name_the_error_type() -> None:
    erroring = BASE.replace('  - text: "Found 2."', '  - {stop_reason: error, error: "quota"}')

    def titles(raises: str) -> list[str]:
        text = erroring + f"expect: {{raises: {raises}}}\n"
        return [f.title for f in check_outcome(run_scenario(parse_scenario(text))).failures]

    assert titles("{type: ModelError, message: quota}") == []
    assert titles("{type: RunError}") == []  # a base class counts
    assert titles("{type: RunAbortedError}") == ["exec raised ModelError, expected RunAbortedError"]


def test_request_messages_compare_the_fields_given_including_tool_calls() -> None:
    v = verdict(
        """\
expect:
  requests:
    - call: 2
      messages:
        - {role: user}
        - role: assistant
          tool_calls:
            - {name: search, arguments: {q: a}}
            - {name: broken, arguments: {}}
            - {name: search, arguments: {q: b}}
        - {role: toolResult, tool_name: search, is_error: false}
        - {role: toolResult, tool_name: broken, is_error: true, text: disk full}
        - {role: toolResult, text: second hit}
      last_message: {text: second hit}
"""
    )
    assert v.passed, v.report()
