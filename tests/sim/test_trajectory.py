"""``expect.trajectory`` and ``assert_trajectory``: the modes, round groups, argument modes,
depth, the graded score (checked against hand-computed values) and the messages a user
reads when a trajectory does not match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _support import make_runtime, run_cli, tool

from openprogram_sim.errors import ScenarioError
from openprogram_sim.play import check_outcome, run_scenario
from openprogram_sim.scenario import load_scenario, parse_scenario
from openprogram_sim.trace import assert_trajectory, match_trajectory, trace_calls

NAMES = ("search", "fetch", "get_weather", "get_time", "answer", "send_email")


def trace_of(*rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trace of a real run whose model makes these rounds of calls (each a list of
    ``{name: args}``, one reply), then answers "done"."""
    props = {"q": {"type": "string"}, "city": {"type": "string"}, "to": {"type": "string"}}
    tools = [tool(n, lambda **_: "ok", props) for n in NAMES]
    runtime, _, rec = make_runtime([{"tool_calls": r} for r in rounds] + ["done"])
    runtime.exec("Go.", tools=tools)
    return rec.trace


PARALLEL = trace_of(
    [{"search": {"q": "weather in Paris"}}],
    [{"get_weather": {"city": "Paris"}}, {"get_time": {"city": "Paris"}}],
    [{"answer": {}}],
)
"""search; then get_weather and get_time in one round; then answer."""

SEQUENTIAL = trace_of(
    [{"search": {"q": "weather in Paris"}}],
    [{"get_weather": {"city": "Paris"}}],
    [{"get_time": {"city": "Paris"}}],
    [{"answer": {}}],
)
"""The same calls, get_weather and get_time in two rounds."""

PLAN = [{"search": {"q": {"$contains": "weather"}}}, ["get_time", "get_weather"], "answer"]


def failure(trace: list[dict[str, Any]], calls: list[Any], **options: Any) -> str:
    with pytest.raises(AssertionError) as info:
        assert_trajectory(trace, calls, **options)
    return str(info.value)


def test_the_calls_are_read_with_their_rounds_and_event_numbers() -> None:
    calls = trace_calls(PARALLEL)
    assert [(c.index, c.name, c.round, c.end) for c in calls] == [
        (6, "search", 1, 7),
        (14, "get_weather", 2, 15),
        (18, "get_time", 2, 19),
        (26, "answer", 3, 27),
    ]
    assert {c.round_key for c in calls[1:3]} == {(1, 0, 2)}


# -- each mode, passing and failing ------------------------------------------------------


def test_exact_holds_for_the_same_calls_rounds_and_order() -> None:
    result = assert_trajectory(PARALLEL, PLAN, mode="exact")
    assert (result.score, result.precision, result.recall, result.f1) == (1.0, 1.0, 1.0, 1.0)


def test_exact_fails_when_a_round_group_was_made_in_two_rounds() -> None:
    assert failure(SEQUENTIAL, PLAN, mode="exact") == (
        "trajectory (exact) did not match: score 0.75, min_score 1.0\n"
        "  score 0.75 (F1); precision 3/4 = 0.75, recall 3/4 = 0.75, F1 0.75\n"
        "  expected call 2 of 4 (round group 2: [get_time, get_weather]) had no match: "
        "get_time\n"
        "    calls that match it (#22) are not in the round the trajectory gives it: in exact "
        "mode each entry is one round (calls made in one round are a list: [a, b])\n"
        '  unexpected call: #22 get_time({"city": "Paris"}) d0 r3\n'
        "  calls made at depth 0, by round:\n"
        '    #6 search({"q": "weather in Paris"}) d0 r1  <- expected call 1\n'
        '    #14 get_weather({"city": "Paris"}) d0 r2  <- expected call 3\n'
        '    #22 get_time({"city": "Paris"}) d0 r3\n'
        "    #30 answer({}) d0 r4  <- expected call 4"
    )


def test_in_order_allows_other_calls_between() -> None:
    trace = trace_of([{"search": {"q": "a"}}], [{"send_email": {}}], [{"answer": {}}])
    result = assert_trajectory(trace, ["search", "answer"], mode="in_order")
    # 2 of 2 expected matched (recall 1.0, the score); 2 of the 3 calls made (precision 2/3)
    assert result.score == 1.0
    assert result.precision == pytest.approx(2 / 3)


def test_in_order_fails_naming_the_call_with_no_match_and_the_differing_argument() -> None:
    calls = [{"search": {"q": {"$contains": "Rome"}}}, "answer"]
    assert failure(PARALLEL, calls, mode="in_order") == (
        "trajectory (in_order) did not match: score 0.50, min_score 1.0\n"
        "  score 0.50 (recall); precision 1/4 = 0.25, recall 1/2 = 0.50, F1 0.33\n"
        '  expected call 1 of 2 had no match: search {q: contains "Rome"}\n'
        '    closest actual call: #6 search({"q": "weather in Paris"}) d0 r1\n'
        "      field   expected         actual\n"
        '      args.q  contains "Rome"  "weather in Paris"  <- differs\n'
        "  calls made at depth 0, by round:\n"
        '    #6 search({"q": "weather in Paris"}) d0 r1\n'
        '    #14 get_weather({"city": "Paris"}) d0 r2\n'
        '    #18 get_time({"city": "Paris"}) d0 r2\n'
        "    #26 answer({}) d0 r3  <- expected call 2"
    )


def test_in_order_fails_on_calls_out_of_order() -> None:
    message = failure(PARALLEL, ["answer", "search"], mode="in_order")
    assert message.splitlines()[1:4] == [
        "  score 0.50 (recall); precision 1/4 = 0.25, recall 1/2 = 0.50, F1 0.33",
        "  expected call 2 of 2 had no match: search",
        "    calls that match it (#6) are out of the order the trajectory gives",
    ]


def test_any_order_holds_for_the_same_calls_in_another_order() -> None:
    calls = ["answer", "get_time", "search", "get_weather"]
    assert assert_trajectory(SEQUENTIAL, calls, mode="any_order").score == 1.0


def test_any_order_fails_naming_the_unexpected_call() -> None:
    assert failure(PARALLEL, ["answer", "get_time", "search"], mode="any_order") == (
        "trajectory (any_order) did not match: score 0.86, min_score 1.0\n"
        "  score 0.86 (F1); precision 3/4 = 0.75, recall 3/3 = 1.00, F1 0.86\n"
        '  unexpected call: #14 get_weather({"city": "Paris"}) d0 r2\n'
        "  calls made at depth 0, by round:\n"
        '    #6 search({"q": "weather in Paris"}) d0 r1  <- expected call 3\n'
        '    #14 get_weather({"city": "Paris"}) d0 r2\n'
        '    #18 get_time({"city": "Paris"}) d0 r2  <- expected call 2\n'
        "    #26 answer({}) d0 r3  <- expected call 1"
    )


def test_subset_is_an_allow_list() -> None:
    allowed = ["search", "get_weather", "get_time", "answer", "fetch", "fetch"]
    result = assert_trajectory(PARALLEL, allowed, mode="subset")
    assert (result.score, result.recall) == (1.0, pytest.approx(4 / 6))


def test_subset_fails_on_a_call_not_allowed() -> None:
    trace = trace_of([{"search": {"q": "a"}}], [{"send_email": {"to": "boss"}}])
    assert failure(trace, ["search", "answer"], mode="subset") == (
        "trajectory (subset) did not match: score 0.50, min_score 1.0\n"
        "  score 0.50 (precision); precision 1/2 = 0.50, recall 1/2 = 0.50, F1 0.50\n"
        '  unexpected call: #14 send_email({"to": "boss"}) d0 r2\n'
        "  calls made at depth 0, by round:\n"
        '    #6 search({"q": "a"}) d0 r1  <- expected call 1\n'
        '    #14 send_email({"to": "boss"}) d0 r2'
    )


def test_subset_names_the_closest_allowed_call_and_a_call_allowed_once() -> None:
    trace = trace_of([{"search": {"q": "a"}}], [{"search": {"q": "a"}}], [{"fetch": {}}])
    message = failure(trace, [{"search": {"q": "a"}}, {"fetch": {"q": "x"}}], mode="subset")
    assert message.splitlines()[1:10] == [
        "  score 0.33 (precision); precision 1/3 = 0.33, recall 1/2 = 0.50, F1 0.40",
        '  unexpected call: #14 search({"q": "a"}) d0 r2',
        "    expected call(s) 1 allow it but matched other calls: an entry allows one call "
        "(list it again to allow another)",
        "  unexpected call: #22 fetch({}) d0 r3",
        '    closest expected call 2: fetch {q: "x"}',
        "      field   expected  actual",
        '      args.q  "x"       (absent)  <- differs',
        "  calls made at depth 0, by round:",
        '    #6 search({"q": "a"}) d0 r1  <- expected call 1',
    ]


def test_superset_must_include_and_allows_more() -> None:
    assert assert_trajectory(PARALLEL, ["answer", "search"], mode="superset").score == 1.0


def test_superset_fails_naming_what_was_not_made() -> None:
    assert failure(PARALLEL, ["answer", "send_email"], mode="superset") == (
        "trajectory (superset) did not match: score 0.50, min_score 1.0\n"
        "  score 0.50 (recall); precision 1/4 = 0.25, recall 1/2 = 0.50, F1 0.33\n"
        "  expected call 2 of 2 had no match: send_email\n"
        "    no call of send_email was made\n"
        "  calls made at depth 0, by round:\n"
        '    #6 search({"q": "weather in Paris"}) d0 r1\n'
        '    #14 get_weather({"city": "Paris"}) d0 r2\n'
        '    #18 get_time({"city": "Paris"}) d0 r2\n'
        "    #26 answer({}) d0 r3  <- expected call 1"
    )


# -- round groups ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["exact", "in_order"])
def test_a_round_group_holds_for_parallel_calls_and_fails_for_sequential_ones(mode: str) -> None:
    group = ["search", ["get_time", "get_weather"]]
    calls = [*group, "answer"] if mode == "exact" else group
    assert match_trajectory(PARALLEL, calls, mode=mode).passed
    result = match_trajectory(SEQUENTIAL, calls, mode=mode)
    assert not result.passed
    assert "(round group 2: [get_time, get_weather]) had no match" in result.explain()


def test_in_order_a_round_group_message_says_they_are_not_in_one_round() -> None:
    message = failure(SEQUENTIAL, [["get_weather", "get_time"]], mode="in_order")
    assert message.splitlines()[1:4] == [
        "  score 0.50 (recall); precision 1/4 = 0.25, recall 1/2 = 0.50, F1 0.33",
        "  expected call 2 of 2 (round group 1: [get_weather, get_time]) had no match: get_time",
        "    calls that match it (#22) are not in one round with its group, in order",
    ]


@pytest.mark.parametrize("mode", ["any_order", "superset", "subset"])
def test_modes_that_keep_no_order_count_a_groups_calls_whatever_their_rounds(mode: str) -> None:
    calls = ["search", ["get_weather", "get_time"], "answer"]
    assert match_trajectory(SEQUENTIAL, calls, mode=mode).passed


def test_two_single_entries_may_be_made_in_one_round_in_order() -> None:
    assert match_trajectory(PARALLEL, ["get_weather", "get_time"], mode="in_order").passed


# -- the graded score, by hand -----------------------------------------------------------


def test_the_in_order_score_is_a_longest_common_subsequence() -> None:
    trace = trace_of([{"search": {}}], [{"send_email": {}}], [{"answer": {}}], [{"fetch": {}}])
    result = match_trajectory(trace, ["search", "fetch", "answer"], mode="in_order", min_score=0.6)
    # made: search, send_email, answer, fetch; expected in order: search, fetch, answer.
    # longest common subsequence: 2 (search, fetch or search, answer)
    # precision 2/4 = 0.5; recall 2/3 = 0.667; F1 = 2 * 0.5 * 0.667 / (0.5 + 0.667) = 0.571
    assert len(result.matched) == 2
    assert result.precision == 0.5
    assert result.recall == pytest.approx(2 / 3)
    assert result.f1 == pytest.approx(4 / 7)
    assert result.score == pytest.approx(2 / 3) and result.passed  # 0.667 >= min_score 0.6


def test_the_exact_score_aligns_rounds() -> None:
    trace = trace_of([{"search": {}}], [{"get_weather": {}}], [{"get_time": {}}, {"answer": {}}])
    result = match_trajectory(
        trace, ["search", ["get_weather", "get_time"], "answer"], mode="exact"
    )
    # expected rounds [search] [get_weather, get_time] [answer] against the rounds made
    # [search] [get_weather] [get_time, answer]: aligned one to one, in order, they share
    # 1 + 1 + 1 = 3 calls (get_time is in the third round made, with answer).
    # precision 3/4, recall 3/4, F1 = 0.75
    assert (len(result.matched), result.precision, result.recall) == (3, 0.75, 0.75)
    assert result.f1 == pytest.approx(0.75)
    assert result.score == pytest.approx(0.75) and not result.passed


def test_the_unordered_scores_are_a_one_to_one_matching() -> None:
    trace = trace_of([{"search": {}}, {"search": {}}], [{"fetch": {}}])
    calls = ["search", "answer", "fetch", "fetch"]
    # made: search, search, fetch; expected: search, answer, fetch, fetch.
    # one to one: search-search, fetch-fetch: 2 matched
    # precision 2/3 = 0.667 (subset's score); recall 2/4 = 0.5 (superset's);
    # F1 = 2 * 0.667 * 0.5 / 1.167 = 0.571 (any_order's)
    scores = {m: match_trajectory(trace, calls, mode=m).score for m in ("any_order", "subset")}
    assert scores == {"any_order": pytest.approx(4 / 7), "subset": pytest.approx(2 / 3)}
    assert match_trajectory(trace, calls, mode="superset").score == 0.5


def test_no_calls_made_and_none_expected_is_a_match() -> None:
    trace = trace_of()
    assert assert_trajectory(trace, [], mode="exact").score == 1.0
    result = match_trajectory(trace, ["search"], mode="exact")
    # precision: no call made, 1.0 by definition; recall 0/1; F1 = 0
    assert (result.precision, result.recall, result.f1) == (1.0, 0.0, 0.0)


# -- arguments ---------------------------------------------------------------------------


def test_args_exact_subset_and_ignore() -> None:
    trace = trace_of([{"search": {"q": "a", "lang": "fr"}}])
    given = [{"search": {"q": "a"}}]
    assert match_trajectory(trace, given, args="subset").passed
    assert not match_trajectory(trace, given, args="exact").passed
    assert match_trajectory(trace, [{"search": {"q": "zzz"}}], args="ignore").passed
    override = [{"search": {"q": "a"}, "args_mode": "exact"}]
    message = failure(trace, override, args="subset")
    assert message.splitlines()[2:6] == [
        '  expected call 1 of 1 had no match: search {q: "a"} (exact args)',
        '    closest actual call: #6 search({"q": "a", "lang": "fr"}) d0 r1',
        "      field      expected  actual",
        '      args.lang  (absent)  "fr"    <- differs',
    ]


def test_a_bare_name_matches_any_arguments_and_an_empty_mapping_none_in_exact() -> None:
    trace = trace_of([{"search": {"q": "a"}}])
    assert match_trajectory(trace, ["search"], args="exact").passed
    assert not match_trajectory(trace, [{"search": {}}], args="exact").passed


def test_matchers_work_on_the_arguments_and_on_each_one() -> None:
    trace = trace_of([{"search": {"q": "weather in Paris", "city": "Paris"}}])
    holds = [
        {"search": {"$subset": {"q": {"$regex": "^weather"}}}},
        {"search": {"q": {"$in": ["weather in Paris", "x"]}, "city": {"$any": True}}},
        {"search": {"q": {"$contains": "Paris"}, "city": "Paris"}, "args_mode": "exact"},
    ]
    for call in holds:
        assert match_trajectory(trace, [call]).passed, call
    assert not match_trajectory(trace, [{"search": {"q": {"$json": True}}}]).passed


# -- scenario files ----------------------------------------------------------------------

NESTED = """\
scenario: research nests a search
tools:
  research:
    parameters: {type: object, properties: {topic: {type: string}}}
    exec: {content: "look into {topic}", tools: [search]}
  search: {returns: "3 results"}
exec: {content: "Research it.", tools: [research]}
model:
  - tool_calls: [{research: {topic: tides}}]
  - tool_calls: [{search: {q: tides}}]
  - text: "Tides are lunar."
  - text: "Done."
expect:
  trajectory:
    depth: DEPTH
    mode: exact
    calls: CALLS
"""


@pytest.mark.parametrize(
    ("depth", "calls", "passes"),
    [
        ("0", "[research]", True),
        ("1", "[search]", True),
        ("all", "[research, search]", True),
        ("0", "[research, search]", False),
    ],
)
def test_depth_chooses_whose_calls(depth: str, calls: str, passes: bool) -> None:
    text = NESTED.replace("DEPTH", depth).replace("CALLS", calls)
    verdict = check_outcome(run_scenario(parse_scenario(text, "nested.yaml")))
    assert verdict.passed is passes, verdict.report()


def test_a_scenario_failure_names_the_file_lines_and_the_score() -> None:
    text = NESTED.replace("DEPTH", "0").replace(
        "    calls: CALLS\n", "    calls:\n      - research: {topic: {$regex: ^sea}}\n"
    )
    verdict = check_outcome(run_scenario(parse_scenario(text, "nested.yaml")))
    assert verdict.report() == (
        "trajectory (exact) did not match: score 0.00, min_score 1.0\n"
        "at nested.yaml:14\n"
        "score 0.00 (F1); precision 0/1 = 0.00, recall 0/1 = 0.00, F1 0.00\n"
        'expected call 1 of 1 had no match: research {topic: regex "^sea"} (line 18)\n'
        '  closest actual call: #6 research({"topic": "tides"}) d0 r1\n'
        "    field       expected      actual\n"
        '    args.topic  regex "^sea"  "tides"  <- differs\n'
        'unexpected call: #6 research({"topic": "tides"}) d0 r1\n'
        "calls made at depth 0, by round:\n"
        '  #6 research({"topic": "tides"}) d0 r1'
    )
    assert verdict.trajectory is not None and verdict.trajectory.score == 0.0


@pytest.mark.parametrize(
    ("trajectory", "error"),
    [
        ("{mod: exact, calls: []}", "nested.yaml:14: (expect.trajectory.mod) unknown key 'mod'; "
         "did you mean 'mode'?"),
        ("{mode: sorted, calls: []}", "nested.yaml:14: (expect.trajectory.mode) Input should be "
         "'exact', 'in_order', 'any_order', 'subset' or 'superset' (got \"sorted\")"),
        ("{calls: [[]]}", "nested.yaml:14: (expect.trajectory.calls[0]) a round group lists one "
         "call or more: [get_weather, get_time]"),
        ("{calls: [{search: {q: {$regex: '('}}}]}", "nested.yaml:14: "
         "(expect.trajectory.calls[0].search) bad regex '(': missing ) at position 1; escape "
         "special characters such as ( [ . with \\"),
        ("{calls: [{search: {}, fetch: {}}]}", "nested.yaml:14: (expect.trajectory.calls[0]) an "
         "expected call names one tool: {search: {q: ...}} (calls made in one round are a list: "
         "[get_weather, get_time]); got {\"search\": {}, \"fetch\": {}}"),
        ("{calls: [{search: {}, args_mode: loose}]}", "nested.yaml:14: "
         "(expect.trajectory.calls[0].args_mode) args_mode is one of exact, subset, ignore; got "
         "\"loose\""),
        ("{calls: [search], depth: -1}", "nested.yaml:14: (expect.trajectory.depth) depth is 0 or "
         "more, or 'all'; got -1"),
    ],
)  # fmt: skip
def test_a_bad_trajectory_is_named_with_its_line_when_the_file_loads(
    trajectory: str, error: str
) -> None:
    text = NESTED.split("expect:")[0] + f"expect:\n  trajectory: {trajectory}\n"
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "nested.yaml")
    assert [str(i) for i in info.value.issues] == [error]


def test_the_python_api_names_a_bad_argument() -> None:
    with pytest.raises(ValueError, match=r"^bad trajectory: mode: Input should be 'exact'"):
        assert_trajectory(PARALLEL, ["search"], mode="sorted")
    with pytest.raises(ValueError, match=r"calls\.0: an expected call is a tool name"):
        assert_trajectory(PARALLEL, [3])


# -- where a scenario runs: openprogram-sim run, the pytest plugin, a cassette replay -------

RUN_SCENARIO = """\
scenario: the weather, asked in parallel
tools:
  get_weather: {returns: "sunny"}
  get_time: {returns: "noon"}
exec: {content: "Weather and time in Paris?", tools: [get_weather, get_time]}
model:
  - tool_calls: [{get_weather: {city: Paris}}]
  - tool_calls: [{get_time: {city: Paris}}]
  - text: "Sunny, noon."
expect:
  trajectory:
    mode: in_order
    calls:
      - [get_weather, get_time]
  properties:
    - same_round: [get_weather, get_time]
"""

RUN_FAILURES = [
    "- trajectory (in_order) did not match: score 0.50, min_score 1.0",
    "  at weather.yaml:11",
    "  score 0.50 (recall); precision 1/2 = 0.50, recall 1/2 = 0.50, F1 0.50",
    "  expected call 2 of 2 (round group 1: [get_weather, get_time]) had no match: get_time "
    "(line 14)",
    "    calls that match it (#14) are not in one round with its group, in order",
    "  calls made at depth 0, by round:",
    '    #6 get_weather({"city": "Paris"}) d0 r1  <- expected call 1',
    '    #14 get_time({"city": "Paris"}) d0 r2',
    "",
    '- property 1 (same_round) does not hold: same_round: ["get_weather", "get_time"]',
    "  at weather.yaml:16",
    "  [get_weather, get_time] were never called in one round: get_weather at #6 (d0 r1); "
    "get_time at #14 (d0 r2)",
    '    #6   tool_execution_start   d0 r1 get_weather({"city": "Paris"})',
    '    #14  tool_execution_start   d0 r2 get_time({"city": "Paris"})',
]


def test_openprogram_sim_run_fails_with_both_messages(tmp_path: Path) -> None:
    (tmp_path / "weather.yaml").write_text(RUN_SCENARIO)
    result = run_cli("run", "weather.yaml", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    start = lines.index(RUN_FAILURES[0])
    assert lines[start : start + len(RUN_FAILURES)] == RUN_FAILURES
    parallel = RUN_SCENARIO.replace(
        "{city: Paris}}]\n  - tool_calls: [{get_time:", "{city: Paris}}, {get_time:"
    )
    (tmp_path / "weather.yaml").write_text(parallel)
    assert run_cli("run", "weather.yaml", cwd=tmp_path).returncode == 0


def test_the_pytest_plugin_fails_the_item_with_both_messages(pytester: pytest.Pytester) -> None:
    (pytester.path / "scenarios").mkdir()
    (pytester.path / "scenarios" / "weather.yaml").write_text(RUN_SCENARIO)
    result = pytester.runpytest("--openprogram-scenarios=scenarios", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    shown = [line.replace(" weather.yaml", " scenarios/weather.yaml") for line in RUN_FAILURES]
    lines = result.stdout.lines
    start = lines.index(shown[0])
    assert lines[start : start + len(shown)] == shown


REPLAY = (Path(__file__).parent / "data" / "weather_replay.yaml").read_text(encoding="utf-8")
CASSETTE = (Path(__file__).parent / "data" / "weather_cassette.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("city", "times", "passes"), [("Brest", 2, True), ("Rome", 2, False), ("Brest", 1, False)]
)
def test_a_cassette_replay_is_checked_for_both(
    tmp_path: Path, city: str, times: int, passes: bool
) -> None:
    (tmp_path / "cassettes").mkdir()
    (tmp_path / "cassettes" / "weather.yaml").write_text(CASSETTE, encoding="utf-8")
    expect = (
        "  trajectory:\n    mode: exact\n    calls:\n"
        f"      - [{{get_weather: {{city: Paris}}}}, {{get_weather: {{city: {city}}}}}]\n"
        f"  properties:\n    - at_most: {{tool: get_weather, times: {times}}}\n"
    )
    (tmp_path / "weather.yaml").write_text(REPLAY + expect, encoding="utf-8")
    verdict = check_outcome(run_scenario(load_scenario(tmp_path / "weather.yaml")))
    assert verdict.passed is passes, verdict.report()
    if city == "Rome":
        assert 'args.city  "Rome"    "Brest"  <- differs' in verdict.report()
    if times == 1:
        assert "get_weather was called 2 times, at most 1 allowed: #6, #10" in verdict.report()
