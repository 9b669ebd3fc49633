"""Classifying one run: what it exercised, and which of that its expectations assert.

Each case is a small scenario that passes; the assertions are about the classification, and
pairs of cases differ only in one expectation, so each rule of "asserted" is pinned."""

from __future__ import annotations

from coverage_cases import SEARCH, classified

CALL_THEN_TEXT = (
    SEARCH
    + """
exec: {content: "Find a.", tools: [search]}
model:
  - tool_calls: [{search: {q: a}}]
  - text: "Found."
"""
)


def test_a_run_with_no_expectations_exercises_but_asserts_nothing() -> None:
    run = classified("scenario: bare\n" + CALL_THEN_TEXT)
    assert set(run.exercised) == {"text_finish", "tool_round", "tool_choice_auto"}
    assert run.asserted == ()
    assert run.unasserted == run.exercised


def test_result_asserts_the_text_finish_and_model_calls_the_tool_round() -> None:
    run = classified("scenario: r\n" + CALL_THEN_TEXT + 'expect: {result: "Found."}')
    assert run.asserted == ("text_finish",)
    run = classified("scenario: m\n" + CALL_THEN_TEXT + "expect: {model_calls: 2}")
    assert run.asserted == ("tool_round",)


def test_a_request_asserts_only_when_it_selects_a_witness_and_names_its_field() -> None:
    round_two = "expect:\n  requests:\n    - {round: 2, last_message: {role: toolResult}}\n"
    assert classified("scenario: a\n" + CALL_THEN_TEXT + round_two).asserted == ("tool_round",)
    # round 1's request is no witness of the results going back
    round_one = "expect:\n  requests:\n    - {round: 1, message_count: 1}\n"
    assert classified("scenario: b\n" + CALL_THEN_TEXT + round_one).asserted == ()
    # naming tool_choice on a request asserts tool_choice_auto, nothing else
    choice = "expect:\n  requests:\n    - {round: 1, tool_choice: auto}\n"
    assert classified("scenario: c\n" + CALL_THEN_TEXT + choice).asserted == ("tool_choice_auto",)


def test_a_field_named_as_any_asserts_nothing() -> None:
    loose = "expect:\n  events:\n    - tool_execution_end: {tool_name: search, "
    loose += "is_error: {$any: true}}\n"
    assert classified("scenario: any\n" + CALL_THEN_TEXT + loose).asserted == ()
    tight = "expect:\n  events:\n    - tool_execution_end: {tool_name: search, is_error: false}\n"
    assert classified("scenario: t\n" + CALL_THEN_TEXT + tight).asserted == ("tool_round",)


ERRORS = """
scenario: two error results
tools:
  flaky:
    parameters: {type: object, properties: {}}
    raises: "disk full"
exec: {content: "Go.", tools: [flaky]}
model:
  - tool_calls: [{flaky: {}}]
  - tool_calls: [{ghost: {}}]
  - text: "Gave up."
"""


def test_an_expected_event_asserts_the_event_the_check_matched_it_to() -> None:
    # ordered: {is_error: true} matches flaky's result first, so it pins tool_raised only
    first = "expect:\n  events:\n    - tool_execution_end: {is_error: true}\n"
    run = classified(ERRORS + first)
    assert {"tool_raised", "unknown_tool"} <= set(run.exercised)
    assert "tool_raised" in run.asserted and "unknown_tool" not in run.asserted
    # two of them in order: the second lands on ghost's result
    both = first + "    - tool_execution_end: {is_error: true}\n"
    assert {"tool_raised", "unknown_tool"} <= set(classified(ERRORS + both).asserted)
    # unordered: each takes the first event not yet taken
    unordered = ERRORS + "expect:\n  events_mode: unordered\n  events:\n"
    unordered += "    - tool_execution_end: {tool_name: ghost, is_error: true}\n"
    unordered += "    - tool_execution_end: {is_error: true}\n"
    assert {"tool_raised", "unknown_tool"} <= set(classified(unordered).asserted)


def test_exact_mode_asserts_with_the_event_at_the_same_position() -> None:
    text = """
scenario: the whole trace of a text finish
exec: {content: "Hi.", tools: []}
model:
  - text: "Hello."
expect:
  events_mode: exact
  events:
    - agent_start: {}
    - turn_start: {}
    - message_start: {role: user}
    - message_end: {role: user}
    - message_start: {role: assistant}
    - message_end: {role: assistant}
    - turn_end: {}
    - agent_end: {reason: stop}
"""
    assert "text_finish" in classified(text).asserted
    loose = text.replace("agent_end: {reason: stop}", "agent_end: {}")
    assert "text_finish" not in classified(loose).asserted


def test_why_a_call_failed_is_read_from_the_data_never_the_text() -> None:
    text = """
scenario: a raising tool sent broken arguments, and a tool returning its own error
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}, required: [q]}
    raises: "must not run"
  fetch:
    parameters: {type: object, properties: {}}
    returns: {$error: "404"}
exec: {content: "Go.", tools: [search, fetch]}
model:
  - tool_calls: [{name: search, arguments: "[1, 2]"}, {fetch: {}}]
  - text: "Both failed."
"""
    run = classified(text)
    assert "invalid_arguments" in run.exercised
    assert "tool_raised" not in run.exercised  # its body never ran
    assert "unknown_tool" not in run.exercised
    assert "error_result_returned" in run.exercised  # both results went back


def test_two_calls_of_a_batch_assert_its_order_one_does_not() -> None:
    batch = (
        SEARCH
        + """
exec: {content: "Find two.", tools: [search]}
model:
  - tool_calls: [{search: {q: a}}, {search: {q: b}}]
  - text: "Both."
expect:
  events:
"""
    )
    one = batch + "    - tool_execution_start: {tool_call_id: call_1}\n"
    run = classified("scenario: one\n" + one)
    assert "several_calls_one_round" in run.exercised
    assert "several_calls_one_round" not in run.asserted
    two = one + "    - tool_execution_end: {tool_call_id: call_2}\n"
    assert "several_calls_one_round" in classified("scenario: two\n" + two).asserted
    reply = batch + "    - message_end: {role: assistant, tool_calls: [search, search]}\n"
    assert "several_calls_one_round" in classified("scenario: reply\n" + reply).asserted


STEERED = (
    SEARCH
    + """
exec: {content: "Find two.", tools: [search]}
model:
  - tool_calls: [{search: {q: a}}, {search: {q: b}}]
  - text: "Switched."
steering:
  - {after_tool: 1, text: "Stop."}
"""
)


def test_a_python_tool_that_returns_an_error_result_did_not_raise() -> None:
    """Read from the trace's error_kind: the same kind of tool (python) raising in one run
    and answering with an error result of its own in the other."""
    text = """
scenario: a python tool fails
tools:
  {name}: {{python: "coverage_tools:{name}"}}
exec: {{content: "Find a.", tools: [{name}]}}
model:
  - tool_calls: [{{{name}: {{q: a}}}}]
  - text: "Nothing."
expect:
  events:
    - tool_execution_end: {{tool_name: {name}, is_error: true, error_kind: {kind}}}
"""
    raised = classified(text.format(name="explode", kind="raised"))
    assert "tool_raised" in raised.exercised and "tool_raised" in raised.asserted
    refused = classified(text.format(name="refuse", kind="returned"))
    assert "tool_raised" not in refused.exercised
    assert "error_result_returned" in refused.exercised


def test_not_events_never_assert_a_behaviour() -> None:
    absent = "expect:\n  not_events:\n    - tool_execution_end: {tool_name: nope}\n"
    run = classified("scenario: n\n" + STEERED + absent)
    assert "steering_skip" in run.exercised and run.asserted == ()
    skipped = "expect:\n  events:\n    - tool_execution_end: {skipped: true}\n"
    assert "steering_skip" in classified("scenario: s\n" + STEERED + skipped).asserted


def test_steering_follow_ups_and_re_asks_are_told_apart_by_the_scenarios_own_entries() -> None:
    after_text = """
scenario: steering after text, then a follow-up
exec: {content: "Summarise.", tools: []}
model:
  - text: "Summary."
  - text: "Shorter."
  - text: "Shortest."
steering:
  - {after_round: 1, text: "Shorter, please."}
follow_ups:
  - text: "Once more."
expect:
  events:
    - message_end: {role: user, text: "Once more."}
"""
    run = classified(after_text)
    assert {"steering_after_text", "follow_up_pass"} <= set(run.exercised)
    assert "steering_after_round" not in run.exercised
    assert "choices_reask" not in run.exercised
    assert "follow_up_pass" in run.asserted and "steering_after_text" not in run.asserted
    reask = """
scenario: a malformed pick is asked again
exec: {content: "Yes or no?", tools: [], choices: ["yes", "no"]}
model:
  - text: "Maybe."
  - text: '{"value": "no"}'
expect: {result: "no"}
"""
    run = classified(reask)
    assert {"choices_reask", "choices_pick"} <= set(run.exercised)
    assert "choices_pick" in run.asserted and "choices_reask" not in run.asserted


def test_the_same_text_as_steering_and_follow_up_is_told_apart_by_its_origin() -> None:
    """One text for both entries, and the cap ends the run before the follow-up is
    delivered: only the trace's origin says the message that entered was the steering."""
    same = """
scenario: the same words steer and would follow up
exec: {content: "Summarise.", tools: [], max_iterations: 2}
model:
  - text: "Summary."
  - text: "Shorter."
steering:
  - {after_round: 1, text: "Again."}
follow_ups:
  - text: "Again."
"""
    run = classified(same)
    assert "steering_after_text" in run.exercised
    assert "follow_up_pass" not in run.exercised  # the follow-up never entered


NESTED = (
    SEARCH
    + """
  research:
    parameters: {type: object, properties: {topic: {type: string}}, required: [topic]}
    exec: {content: "look into {topic}"}
exec: {content: "Research tides.", tools: [research, search]}
model:
  - tool_calls: [{research: {topic: tides}}]
  - text: "Inner."
  - text: "Outer."
"""
)


def test_requests_are_selected_as_the_check_selects_them() -> None:
    # {round: 1} without depth is the first request of round 1: the outer one
    outer = "expect:\n  requests:\n    - {round: 1, tools: [research, search]}\n"
    run = classified("scenario: o\n" + NESTED + outer)
    assert {"nested_exec", "nested_inherits_tools"} <= set(run.exercised)
    assert "nested_inherits_tools" not in run.asserted
    inner = "expect:\n  requests:\n    - {depth: 1, round: 1, tools: [research, search]}\n"
    run = classified("scenario: i\n" + NESTED + inner)
    assert {"nested_exec", "nested_inherits_tools"} <= set(run.asserted)
    by_call = "expect:\n  requests:\n    - {call: 2, tools: [research, search]}\n"
    assert "nested_inherits_tools" in classified("scenario: c\n" + NESTED + by_call).asserted


def test_the_cap_floor_and_an_abort_between_rounds() -> None:
    floor = (
        SEARCH
        + """
scenario: floor
exec: {content: "Go.", tools: [search], max_iterations: 0}
model:
  - tool_calls: [{search: {q: a}}]
expect: {model_calls: 1}
"""
    )
    run = classified(floor)
    assert {"cap_hit", "cap_floor_at_one"} <= set(run.asserted)
    assert "hard_cap_50" not in run.exercised
    aborted = (
        SEARCH
        + """
scenario: abort after the first call
exec: {content: "Go.", tools: [search]}
model:
  - tool_calls: [{search: {q: a}}, {search: {q: b}}]
abort: {after_tool: 1}
expect: {raises: {type: RunAbortedError}}
"""
    )
    run = classified(aborted)
    assert "run_aborted" in run.asserted
    assert "aborted_stop" not in run.exercised  # no reply said aborted
    assert "steering_skip" not in run.exercised  # skipped by the abort, not steering
