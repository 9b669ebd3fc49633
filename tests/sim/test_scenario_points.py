"""Injection points, time limits and expectation rules of scenario files: a scenario never
passes or hangs by accident, and its failures name their line."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

from _support import run_cli

from openprogram_sim import check_outcome, parse_scenario, run_scenario

BASE = """\
scenario: points
tools:
  search: {returns: "hit"}
exec: {content: "Find it.", tools: [search]}
model:
  - tool_calls: [{search: {q: a}}, {search: {q: b}}]
  - text: "Done."
"""


def verdict(extra: str, base: str = BASE) -> list[str]:
    scenario = parse_scenario(base + textwrap.dedent(extra), "points.yaml")
    return [str(f) for f in check_outcome(run_scenario(scenario)).failures]


def test_every_steering_entry_at_one_point_is_delivered_in_file_order() -> None:
    scenario = parse_scenario(
        BASE + "steering:\n  - {after_tool: 1, text: A}\n  - {after_tool: 1, text: B}\n"
        "  - {after_round: 1, text: C}\n  - {after_round: 1, text: D}\n",
        "two.yaml",
    )
    outcome = run_scenario(scenario)
    users = [m["text"] for m in outcome.requests[1]["messages"] if m["role"] == "user"]
    assert users == ["Find it.", "A", "B", "C", "D"]
    assert outcome.unfired == []


def test_a_steering_entry_that_never_fires_fails_naming_it_and_its_line() -> None:
    failures = verdict(
        """\
        steering:
          - {after_tool: 1, text: early}
          - {after_tool: 5, text: never}
        expect: {result: "Done."}
        """
    )
    assert failures == [
        "steering entry 2 (after_tool: 5) never fired: the run did not reach that point\n"
        "at points.yaml:10\n"
        "the run had 2 tool call(s)"
    ]


def test_an_abort_that_never_fires_fails_too() -> None:
    failures = verdict("abort: {after_round: 7}\nexpect: {result: Done.}\n")
    assert failures == [
        "abort (after_round: 7) never fired: the run did not reach that point\n"
        "at points.yaml:8\n"
        "the run had 2 round(s) in the outer exec"
    ]


def test_an_abort_mid_batch_runs_no_further_tool() -> None:
    scenario = parse_scenario(BASE + "abort: {after_tool: 1}\n", "mid.yaml")
    outcome = run_scenario(scenario)
    started = [e["args"] for e in outcome.trace if e["type"] == "tool_execution_start"]
    ran = [
        e["args"] for e in outcome.trace if e["type"] == "tool_execution_end" and not e["skipped"]
    ]
    assert ran == [{"q": "a"}] and started[0] == {"q": "a"}
    assert outcome.trace[-1] == {"type": "agent_end", "depth": 0, "round": 1, "reason": "aborted"}
    assert type(outcome.error).__name__ == "RunAbortedError"


HANG = """\
scenario: hangs
exec: {content: "Think.", tools: []}
model:
  - {text: "Let me think", fault: hang}
"""


def test_a_hanging_run_fails_at_its_timeout_with_the_trace_so_far() -> None:
    start = time.perf_counter()
    failures = verdict("timeout: 0.2\n", base=HANG)
    assert time.perf_counter() - start < 30  # bounded: it did not hang
    (failure,) = failures
    lines = failure.splitlines()
    assert lines[0] == (
        "the run did not finish within its timeout of 0.2 s (real time); it was aborted"
    )
    assert lines[1] == "at points.yaml:5"
    assert lines[2] == "raise `timeout:`, or add an `abort:` point for a turn that hangs"
    assert lines[3] == "trace when the time ran out (5 events):"
    assert lines[-2].endswith("message_start          d0 r1 assistant")
    assert lines[-1] == "  (then the abort: 3 more event(s), ending the run)"


def test_the_cli_finishes_on_a_hanging_file(tmp_path: Path) -> None:
    (tmp_path / "hang.yaml").write_text(HANG + "timeout: 0.3\n")
    result = run_cli("run", "hang.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert "did not finish within its timeout of 0.3 s" in result.stdout


def test_raises_accepts_several_types() -> None:
    error_turn = BASE.replace('  - text: "Done."', '  - {stop_reason: error, error: "quota"}')
    assert verdict("expect: {raises: {type: [RunAbortedError, ModelError]}}\n", error_turn) == []
    assert verdict("expect: {raises: {type: [RunAbortedError, KeyError]}}\n", error_turn) == [
        "exec raised ModelError, expected RunAbortedError or KeyError\n"
        "at points.yaml:8\n"
        "raised: ModelError: quota"
    ]


NESTED = """\
scenario: nested
tools:
  search: {returns: "hit"}
  research: {exec: {content: "look into {topic}", tools: [search]}}
exec: {content: "Go.", tools: [research]}
model:
  - tool_calls: [{research: {topic: owls}}]
  - tool_calls: [{search: {q: owls}}]
  - text: "Owls hoot."
  - text: "Done."
"""


def test_requests_with_depth_and_round_match_by_those_fields() -> None:
    # listed out of call order: matched by depth/round, not by position
    assert (
        verdict(
            """\
            expect:
              requests:
                - {depth: 1, round: 2, tools: [search]}
                - {depth: 0, round: 2, tools: [research]}
                - {depth: 1, round: 1, tools: [search]}
                - {depth: 0, round: 1, tools: [research]}
            """,
            NESTED,
        )
        == []
    )
    assert verdict("expect: {requests: [{depth: 2, round: 1}]}\n", NESTED) == [
        "expected a request at depth 2, round 1, but the model was called 0 time(s) there\n"
        "at points.yaml:11"
    ]
    assert verdict("expect: {requests: [{depth: 1, round: 1, tools: []}]}\n", NESTED) == [
        "request 2 (depth 1, round 1) differs\n"
        "at points.yaml:11\n"
        '  tools: expected [], actual ["search"]'
    ]


def test_values_print_alike_on_both_sides_with_real_characters() -> None:
    weather = BASE.replace('text: "Done."', 'text: "39.2°F"')
    assert verdict('expect: {result: "39°F"}\n', weather) == [
        'exec returned something else\nat points.yaml:8\n  expected: "39°F"\n  actual:   "39.2°F"'
    ]
