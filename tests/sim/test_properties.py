"""``expect.properties`` and ``check_properties``/``assert_properties``: each rule holding
and broken (the whole message: the rule, the events ``#N`` that break it and why), the
rules in scenario files (file:line) and their mistakes caught when the file loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from _support import make_runtime, tool

from openprogram_sim.errors import ScenarioError
from openprogram_sim.play import check_outcome, run_scenario
from openprogram_sim.scenario import json_schema, parse_scenario
from openprogram_sim.trace import RULES, assert_properties, check_properties

RESULTS = {"ask_user": "no, don't send it", "lookup_order": "order 7: paid"}


def trace_of(*rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trace of a real run whose model makes these rounds of calls, then answers."""
    names = ("search", "ask_user", "send_email", "lookup_order", "refund", "charge_card",
             "get_weather", "get_time")  # fmt: skip
    props = {"q": {"type": "string"}, "amount": {"type": "integer"}}

    def body(name: str) -> Any:
        return lambda **_: RESULTS.get(name, "ok")

    tools = [tool(n, body(n), props) for n in names]
    runtime, _, rec = make_runtime([{"tool_calls": r} for r in rounds] + ["done"])
    runtime.exec("Go.", tools=tools)
    return rec.trace


ASKED_THEN_SENT = trace_of([{"ask_user": {"q": "send?"}}], [{"send_email": {}}])
LOOKUP_THEN_REFUND = trace_of([{"lookup_order": {}}], [{"refund": {}}])
REFUND_FIRST = trace_of([{"refund": {}}, {"lookup_order": {}}])
THREE_SEARCHES = trace_of([{"search": {"q": "a"}}], [{"search": {"q": "b"}}], [{"search": {}}])
PARALLEL = trace_of([{"get_weather": {}}, {"get_time": {}}])
SEQUENTIAL = trace_of([{"get_weather": {}}], [{"get_time": {}}])
CHARGED_TWICE = trace_of([{"charge_card": {"amount": 5}}], [{"charge_card": {"amount": 5}}])


def broken(trace: list[dict[str, Any]], rule: dict[str, Any]) -> str:
    with pytest.raises(AssertionError) as info:
        assert_properties(trace, [rule])
    return str(info.value)


def test_the_vocabulary_is_closed_and_one_function_a_rule() -> None:
    assert list(RULES) == [
        "never", "before", "at_most", "at_least", "same_round", "no_repeat", "ends_with",
    ]  # fmt: skip
    assert all(r.check.__module__ == "openprogram_sim.trace._properties" for r in RULES.values())


def test_never_holds_when_the_tool_is_not_called() -> None:
    assert check_properties(ASKED_THEN_SENT, [{"never": "charge_card"}]) == []


def test_never_is_broken_by_a_call() -> None:
    assert broken(ASKED_THEN_SENT, {"never": "send_email"}) == (
        'property 1 does not hold: never: "send_email"\n'
        "  send_email was called: #14 send_email({}) d0 r2\n"
        "    #14  tool_execution_start   d0 r2 send_email({})"
    )


def test_never_after_holds_when_the_answer_was_yes() -> None:
    rule = {"never": {"tool": "send_email", "after": {"tool": "ask_user",
                                                      "result": {"$contains": "yes"}}}}  # fmt: skip
    assert check_properties(ASKED_THEN_SENT, [rule]) == []


def test_never_after_is_broken_by_a_call_after_the_no() -> None:
    rule = {"never": {"tool": "send_email", "after": {"tool": "ask_user",
                                                      "result": {"$contains": "no"}}}}  # fmt: skip
    [violation] = check_properties(ASKED_THEN_SENT, [rule])
    assert (violation.rule, violation.name, violation.events) == (0, "never", (7, 14))
    assert broken(ASKED_THEN_SENT, rule) == (
        'property 1 does not hold: never: {"tool": "send_email", "after": {"tool": "ask_user", '
        '"result": {"$contains": "no"}}}\n'
        '  send_email was called at #14 after ask_user returned "no, don\'t send it" at #7\n'
        '    #7   tool_execution_end     d0 r1 ask_user({"q": "send?"}) -> ok: '
        '"no, don\'t send it"\n'
        "    #14  tool_execution_start   d0 r2 send_email({})"
    )


def test_before_holds_when_the_lookup_ended_first() -> None:
    rule = {"before": {"first": "lookup_order", "then": "refund"}}
    assert check_properties(LOOKUP_THEN_REFUND, [rule]) == []


def test_before_is_broken_by_a_refund_with_no_lookup_before_it() -> None:
    rule = {"before": {"first": "lookup_order", "then": "refund"}}
    assert broken(REFUND_FIRST, rule) == (
        'property 1 does not hold: before: {"first": "lookup_order", "then": "refund"}\n'
        "  refund at #6 has no lookup_order that ended before it\n"
        "    #6   tool_execution_start   d0 r1 refund({})"
    )


def test_at_most_holds_and_is_broken_naming_the_calls_beyond_the_limit() -> None:
    assert check_properties(THREE_SEARCHES, [{"at_most": {"tool": "search", "times": 3}}]) == []
    assert broken(THREE_SEARCHES, {"at_most": {"tool": "search", "times": 2}}) == (
        'property 1 does not hold: at_most: {"tool": "search", "times": 2}\n'
        "  search was called 3 times, at most 2 allowed: #6, #14, #22 (beyond the limit: #22)\n"
        "    #22  tool_execution_start   d0 r3 search({})"
    )


def test_at_least_holds_and_is_broken_counting_the_calls_that_match() -> None:
    assert check_properties(THREE_SEARCHES, [{"at_least": {"tool": "search", "times": 3}}]) == []
    rule = {"at_least": {"tool": "search", "args": {"q": "a"}, "times": 2}}
    assert broken(THREE_SEARCHES, rule) == (
        'property 1 does not hold: at_least: {"tool": "search", "args": {"q": "a"}, "times": 2}\n'
        '  search {args: {"q": "a"}} was called 1 times, at least 2 expected: #6\n'
        '    #6   tool_execution_start   d0 r1 search({"q": "a"})'
    )


def test_same_round_holds_for_parallel_calls() -> None:
    assert check_properties(PARALLEL, [{"same_round": ["get_weather", "get_time"]}]) == []


def test_same_round_is_broken_by_sequential_calls() -> None:
    assert broken(SEQUENTIAL, {"same_round": ["get_weather", "get_time"]}) == (
        'property 1 does not hold: same_round: ["get_weather", "get_time"]\n'
        "  [get_weather, get_time] were never called in one round: get_weather at #6 (d0 r1); "
        "get_time at #14 (d0 r2)\n"
        "    #6   tool_execution_start   d0 r1 get_weather({})\n"
        "    #14  tool_execution_start   d0 r2 get_time({})"
    )


def test_same_round_is_broken_by_a_call_never_made() -> None:
    assert broken(PARALLEL, {"same_round": ["get_weather", "search"]}) == (
        'property 1 does not hold: same_round: ["get_weather", "search"]\n'
        "  search never called, so [get_weather, search] were not called in one round"
    )


def test_no_repeat_holds_for_other_arguments_and_is_broken_by_the_same_ones() -> None:
    assert check_properties(THREE_SEARCHES, [{"no_repeat": {"tool": "search"}}]) == []
    assert broken(CHARGED_TWICE, {"no_repeat": {"tool": "charge_card", "args": "same"}}) == (
        'property 1 does not hold: no_repeat: {"tool": "charge_card", "args": "same"}\n'
        '  #14 charge_card({"amount": 5}) d0 r2 repeats #6 (the same arguments)\n'
        '    #6   tool_execution_start   d0 r1 charge_card({"amount": 5})\n'
        '    #14  tool_execution_start   d0 r2 charge_card({"amount": 5})'
    )


def test_no_repeat_args_any_forbids_a_second_call_whatever_its_arguments() -> None:
    found = check_properties(THREE_SEARCHES, [{"no_repeat": {"tool": "search", "args": "any"}}])
    # each later search repeats the first
    assert [v.events for v in found] == [(6, 14), (6, 22)]
    assert found[0].message == '#14 search({"q": "b"}) d0 r2 repeats #6 (args: any)'


def test_ends_with_holds_and_is_broken_naming_the_agent_end() -> None:
    assert check_properties(PARALLEL, [{"ends_with": {"reason": "stop"}}]) == []
    assert broken(PARALLEL, {"ends_with": {"reason": "cap"}}) == (
        'property 1 does not hold: ends_with: {"reason": "cap"}\n'
        '  the run ended with reason "stop" at #19, expected "cap"\n'
        "    #19  agent_end              d0 r2 reason=stop"
    )


def test_ends_with_tool_checks_the_last_call() -> None:
    assert check_properties(SEQUENTIAL, [{"ends_with": {"tool": "get_time"}}]) == []
    assert broken(SEQUENTIAL, {"ends_with": {"tool": "get_weather"}}) == (
        'property 1 does not hold: ends_with: {"tool": "get_weather"}\n'
        "  the last call is #14 get_time({}) d0 r2, expected get_weather\n"
        "    #14  tool_execution_start   d0 r2 get_time({})"
    )


def test_a_selector_narrows_by_depth_result_and_error() -> None:
    rule = {"at_most": {"tool": {"$in": ["ask_user", "send_email"]}, "depth": 0, "times": 1}}
    [violation] = check_properties(ASKED_THEN_SENT, [rule])
    assert violation.events == (14,)
    narrowed = {"at_least": {"tool": "ask_user", "result": {"$regex": "^no"}, "is_error": False,
                             "times": 1}}  # fmt: skip
    assert check_properties(ASKED_THEN_SENT, [narrowed]) == []


def test_several_rules_are_checked_in_order_each_with_its_number() -> None:
    rules = [
        {"ends_with": {"reason": "stop"}},
        {"never": "refund"},
        {"at_least": {"tool": "x", "times": 1}},
    ]
    found = check_properties(REFUND_FIRST, rules)
    assert [(v.rule, v.name, v.events) for v in found] == [(1, "never", (6,)), (2, "at_least", ())]


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"nevr": "x"}, "property 1 ({\"nevr\": \"x\"}): nevr: unknown rule 'nevr'; did you mean "
         "'never'?"),
        ({"at_most": {"tool": "x"}}, "property 1 ({\"at_most\": {\"tool\": \"x\"}}): "
         "at_most.times: missing required key 'times'"),
        ({"never": {"tol": "x"}}, "property 1 ({\"never\": {\"tol\": \"x\"}}): never.tol: "
         "unknown key 'tol'; did you mean 'tool'?"),
        ({"ends_with": {}}, "property 1 ({\"ends_with\": {}}): ends_with: ends_with needs "
         "reason: (stop, error, aborted, cap) or tool:"),
        ({"same_round": ["a"]}, "property 1 ({\"same_round\": [\"a\"]}): same_round: same_round "
         "lists two calls or more: [get_weather, get_time]"),
        ({"no_repeat": {"tool": "a", "args": "similar"}}, "property 1 ({\"no_repeat\": {\"tool\": "
         "\"a\", \"args\": \"similar\"}}): no_repeat.args: Input should be 'same' or 'any' (got "
         "\"similar\")"),
        ({"a": 1, "b": 2}, "property 1 ({\"a\": 1, \"b\": 2}): : a property is one rule: {name: "
         "parameters}, e.g. {at_most: {tool: search, times: 3}}; rules: never, before, at_most, "
         "at_least, same_round, no_repeat, ends_with"),
    ],
)  # fmt: skip
def test_a_bad_rule_is_a_value_error_naming_it(rule: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        check_properties(PARALLEL, [rule])
    assert str(info.value) == message


SCENARIO = """\
scenario: refunds need a lookup
tools:
  lookup_order: {returns: "order 7: paid"}
  refund: {returns: "refunded"}
exec: {content: "Refund order 7.", tools: [lookup_order, refund]}
model:
  - tool_calls: [{refund: {order: 7}}]
  - tool_calls: [{lookup_order: {order: 7}}]
  - text: "Refunded."
expect:
  properties:
    - ends_with: {reason: stop}
    - before: {first: lookup_order, then: refund}
    - at_most: {tool: refund, times: 1}
"""


def test_a_scenario_names_each_broken_rule_with_its_line() -> None:
    verdict = check_outcome(run_scenario(parse_scenario(SCENARIO, "refund.yaml")))
    assert verdict.report() == (
        'property 2 (before) does not hold: before: {"first": "lookup_order", "then": "refund"}\n'
        "at refund.yaml:13\n"
        "refund at #6 has no lookup_order that ended before it\n"
        '  #6   tool_execution_start   d0 r1 refund({"order": 7})'
    )
    assert [(rule, len(v)) for rule, v in verdict.properties] == [
        ({"ends_with": {"reason": "stop"}}, 0),
        ({"before": {"first": "lookup_order", "then": "refund"}}, 1),
        ({"at_most": {"tool": "refund", "times": 1}}, 0),
    ]


def test_the_fixed_scenario_passes() -> None:
    fixed = SCENARIO.replace("[{refund: {order: 7}}]", "[{lookup_order: {order: 7}}]", 1)
    fixed = fixed.replace(
        "[{lookup_order: {order: 7}}]\n  - text", "[{refund: {order: 7}}]\n  - text"
    )
    verdict = check_outcome(run_scenario(parse_scenario(fixed, "refund.yaml")))
    assert verdict.passed, verdict.report()


@pytest.mark.parametrize(
    ("rules", "error"),
    [
        ("[{nevr: refund}]", "refund.yaml:11: (expect.properties[0].nevr) unknown rule 'nevr'; "
         "did you mean 'never'?"),
        ("[{at_most: {tool: refund, times: many}}]", "refund.yaml:11: "
         "(expect.properties[0].at_most.times) Input should be a valid integer, unable to parse "
         "string as an integer (got \"many\")"),
        ("[{never: {tool: refund, after: {tool: lookup_order, reslt: no}}}]", "refund.yaml:11: "
         "(expect.properties[0].never.after.reslt) unknown key 'reslt'; did you mean 'result'?"),
        ("[{never: {tool: {$regex: '('}}}]", "refund.yaml:11: (expect.properties[0].never.tool) "
         "bad regex '(': missing ) at position 1; escape special characters such as ( [ . with \\"),
    ],
)  # fmt: skip
def test_a_bad_rule_is_named_with_its_line_when_the_file_loads(rules: str, error: str) -> None:
    text = SCENARIO.split("expect:")[0] + f"expect:\n  properties: {rules}\n"
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "refund.yaml")
    assert [str(i) for i in info.value.issues] == [error]


def test_the_json_schema_describes_every_rule_and_mode_and_holds_the_library() -> None:
    root = Path(__file__).resolve().parents[2]
    schema = json_schema()
    assert json.loads((root / "schema" / "scenario.schema.json").read_text()) == schema
    rules = schema["$defs"]["PropertyRule"]["properties"]
    assert list(rules) == list(RULES)
    for name, rule in rules.items():
        assert rule["description"].startswith(" ".join(RULES[name].doc.split())), name
        assert f"Example: {{{name}: " in rule["description"], name
    modes = schema["$defs"]["Trajectory"]["properties"]["mode"]
    assert modes["enum"] == ["exact", "in_order", "any_order", "subset", "superset"]
    assert all(f"{mode}:" in modes["description"] for mode in modes["enum"])
    validator = jsonschema.Draft202012Validator(schema)
    for path in sorted((root / "scenarios" / "trajectories").glob("*.yaml")):
        assert list(validator.iter_errors(yaml.safe_load(path.read_text()))) == [], path.name
    wrong = {"at_most": {"tool": "search"}}  # no times
    assert not validator.is_valid({"scenario": "x", "exec": {"content": "a"}, "model": [],
                                   "expect": {"properties": [wrong]}})  # fmt: skip
