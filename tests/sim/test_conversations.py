"""``conversation:``: several execs on one history, the script consumed across them, each
exec checked against its own ``expect:`` and the whole against the top level's; one trace,
each exec between its own ``agent_start``/``agent_end``; load errors; the CLI; the report."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from _support import compact, run_cli, tool_round_then_stop

from openprogram_sim import ScenarioError, check_outcome, parse_scenario, run_scenario
from openprogram_sim.report import build_timeline, scenario_record

TALK = """\
scenario: two user turns
tools:
  weather:
    parameters: {type: object, properties: {city: {type: string}, day: {type: string}}}
    outcomes: [{returns: "rain"}, {returns: "sun"}]
history:
  - {role: user, text: "Hi"}
  - {role: assistant, text: "Hello."}
conversation:
  - exec: {content: "Weather in Oslo?", tools: [weather]}
    expect:
      result: "Rain in Oslo."
  - exec: {content: "And tomorrow?", tools: [weather]}
    expect:
      result: "Sun tomorrow."
model:
  - tool_calls: [{weather: {city: Oslo}}]
  - text: "Rain in Oslo."
  - tool_calls: [{weather: {city: Oslo, day: tomorrow}}]
  - text: "Sun tomorrow."
"""

ONE_EXEC = [
    "agent_start",
    "turn_start@1",
    "message_start:user@1",
    "message_end:user@1",
    "message_start:assistant@1",
    *tool_round_then_stop("weather"),
]


def talk(extra: str = "", base: str = TALK) -> object:
    return run_scenario(parse_scenario(base + textwrap.dedent(extra), "talk.yaml"))


def test_each_exec_is_a_run_of_its_own_in_one_trace_on_one_history() -> None:
    outcome = talk()
    assert outcome.error is None and outcome.result == "Sun tomorrow."  # type: ignore[attr-defined]
    trace = outcome.trace  # type: ignore[attr-defined]
    assert [s.replace("@0", "") for s in compact(trace, rounds=True)] == ONE_EXEC + ONE_EXEC
    first, second = outcome.steps  # type: ignore[attr-defined]
    assert (first.result, second.result) == ("Rain in Oslo.", "Sun tomorrow.")
    assert (len(first.trace), len(second.trace), first.model_calls, second.model_calls) == (
        16,
        16,
        2,
        2,
    )
    # the second exec is sent the history, the first exec's four messages, then its prompt
    sent = [(m["role"], m["text"]) for m in second.requests[0]["messages"]]
    assert sent == [
        ("user", "Hi"),
        ("assistant", "Hello."),
        ("user", "Weather in Oslo?"),
        ("assistant", ""),
        ("toolResult", "rain"),
        ("assistant", "Rain in Oslo."),
        ("user", "And tomorrow?"),
    ]
    # the final history: all of it, and the assistant's call and the last result after it
    final = [m["text"] for m in outcome.history]  # type: ignore[attr-defined]
    assert final == [*(text for _, text in sent), "", "sun", "Sun tomorrow."]
    assert [m["text"] for m in first.history][-1] == "Rain in Oslo."
    assert check_outcome(outcome).passed  # type: ignore[arg-type]


def test_each_exec_s_expect_fails_on_its_own_with_its_lines_and_the_whole_too() -> None:
    text = TALK.replace('result: "Sun tomorrow."', 'result: "Snow tomorrow."')
    text = text.replace(
        '      result: "Rain in Oslo."\n',
        '      result: "Rain in Oslo."\n      model_calls: 3\n      requests:\n'
        "        - {call: 1, message_count: 4}\n",
    )
    text += "expect:\n  model_calls: 5\n  counts: {agent_end: 2}\n"
    verdict = check_outcome(run_scenario(parse_scenario(text, "talk.yaml")))
    assert [(f.title, f.where) for f in verdict.failures] == [
        ("exec 1: the model was called 2 times, expected 3", "talk.yaml:13"),
        ("exec 1: request 1 (depth 0, round 1) differs", "talk.yaml:15"),
        ("exec 2: exec returned something else", "talk.yaml:18"),
        ("the model was called 4 times, expected 5", "talk.yaml:25"),
    ]
    assert verdict.failures[1].detail == "  message_count: expected 4, actual 3"


def test_a_step_s_steering_and_abort_count_within_its_exec() -> None:
    text = """\
scenario: points per exec
tools:
  fetch: {returns: "page"}
conversation:
  - exec: {content: "Fetch a and b."}
    abort: {during_tool: 1}
    expect:
      raises: {type: RunAbortedError}
  - exec: {content: "Just a."}
    steering: [{after_tool: 1, text: "Stop there."}]
    expect:
      result: "Stopped."
      events:
        - message_end: {role: user, origin: steering, text: "Stop there."}
model:
  - tool_calls: [{fetch: {url: a}}, {fetch: {url: b}}]
  - tool_calls: [{fetch: {url: a}}, {fetch: {url: c}}]
  - text: "Stopped."
expect:
  events:
    - agent_end: {reason: aborted}
    - agent_end: {reason: stop}
"""
    outcome = run_scenario(parse_scenario(text, "points.yaml"))
    verdict = check_outcome(outcome)
    assert verdict.passed, verdict.report()
    ends = [
        (e["args"]["url"], e["error_kind"])
        for e in outcome.trace
        if e["type"] == "tool_execution_end"
    ]
    assert ends == [("a", "cancelled"), ("b", "skipped"), ("a", None), ("c", "skipped")]


def test_an_unfired_point_of_a_step_names_the_step_s_line() -> None:
    text = TALK.replace(
        '  - exec: {content: "And tomorrow?", tools: [weather]}\n',
        '  - exec: {content: "And tomorrow?", tools: [weather]}\n'
        "    steering: [{after_tool: 4, text: never}]\n",
    )
    verdict = check_outcome(run_scenario(parse_scenario(text, "talk.yaml")))
    assert [str(f) for f in verdict.failures] == [
        "exec 2: steering entry 1 (after_tool: 4) never fired: the run did not reach that point\n"
        "at talk.yaml:14\n"
        "the run had 1 tool call(s)"
    ]


def test_the_conversation_ends_when_the_script_runs_out() -> None:
    text = TALK.split("model:")[0] + 'model:\n  - text: "Rain in Oslo."\n'
    text = text.replace('    expect:\n      result: "Rain in Oslo."\n', "", 1)
    outcome = run_scenario(parse_scenario(text, "short.yaml"))
    verdict = check_outcome(outcome)
    assert len(outcome.steps) == 2 and outcome.model_calls == 2
    assert [f.title for f in verdict.failures] == ["exec 2: the model was called beyond its script"]
    text3 = text.replace("conversation:\n", 'conversation:\n  - exec: {content: "First."}\n', 1)
    outcome = run_scenario(parse_scenario(text3, "short.yaml"))
    assert len(outcome.steps) == 2  # the third exec never started: the script had ended


def test_the_time_limit_ends_the_conversation() -> None:
    text = (
        "scenario: hangs\ntimeout: 0.3\nconversation:\n"
        "  - exec: {content: Hi, tools: []}\n  - exec: {content: Again, tools: []}\n"
        "model: [{fault: hang}, {text: never}]\n"
    )
    outcome = run_scenario(parse_scenario(text, "hang.yaml"))
    assert outcome.timed_out is not None and len(outcome.steps) == 1
    assert [e["type"] for e in outcome.trace].count("agent_start") == 1
    (failure,) = check_outcome(outcome).failures
    assert failure.title.startswith("the run did not finish within its timeout of 0.3 s")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("conversation:\n", "exec: {content: x}\nconversation:\n"),
            "talk.yaml:1: give conversation: (several execs) or exec: or call:, only one of them",
        ),
        (
            ("model:\n", "steering: [{after_round: 1, text: x}]\nmodel:\n"),
            "talk.yaml:16: (steering) with conversation:, steering: belongs to the step whose "
            "exec it is for (conversation: [{exec: ..., steering: ...}])",
        ),
        (
            ("model:\n", "abort: {after_round: 1}\nmodel:\n"),
            "talk.yaml:16: (abort) with conversation:, abort: belongs to the step whose exec it "
            "is for (conversation: [{exec: ..., abort: ...}])",
        ),
        (
            ('  - exec: {content: "Weather', '  - exec: {content: "Weather'),
            None,
        ),
        (
            (
                'tools: [weather]}\n    expect:\n      result: "Rain',
                'tools: [wether]}\n    expect:\n      result: "Rain',
            ),
            "talk.yaml:10: (conversation[0].exec.tools[0]) exec.tools names tool 'wether', which "
            "is not defined; did you mean 'weather'?",
        ),
        (
            ('      result: "Rain in Oslo."\n', '      reslt: "Rain in Oslo."\n'),
            "talk.yaml:12: (conversation[0].expect.reslt) unknown key 'reslt'; did you mean "
            "'result'?",
        ),
        (
            (
                '      result: "Rain in Oslo."\n',
                "      events: [{tool_execution_end: {tol_name: x}}]\n",
            ),
            "talk.yaml:12: (conversation[0].expect.events[0].tool_execution_end.tol_name) "
            "tool_execution_end has no field 'tol_name'; did you mean 'tool_name'?",
        ),
    ],
)
def test_mistakes_are_load_errors_with_their_lines(
    change: tuple[str, str], message: str | None
) -> None:
    text = TALK.replace(*change, 1)
    if message is None:
        parse_scenario(text, "talk.yaml")
        return
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "talk.yaml")
    assert [str(i) for i in info.value.issues] == [message]


def test_result_and_raises_at_the_top_level_are_refused() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(TALK + "expect:\n  result: x\n  raises: true\n", "talk.yaml")
    assert [str(i) for i in info.value.issues] == [
        "talk.yaml:21: (expect) with conversation:, expect.raises and expect.result belong to "
        "each step's expect: (what that exec returned or raised); the top-level expect: is "
        "for the whole conversation (events, requests, model_calls, history)"
    ]


def test_the_cli_runs_a_conversation(tmp_path: Path) -> None:
    path = tmp_path / "talk.yaml"
    path.write_text(TALK.replace('result: "Sun tomorrow."', 'result: "Snow."'))
    result = run_cli("run", str(path))
    assert result.returncode == 1
    assert "- exec 2: exec returned something else" in result.stdout
    path.write_text(TALK)
    assert run_cli("run", str(path)).returncode == 0


def test_the_report_shows_each_exec_as_a_run_and_the_whole_trace_still_builds() -> None:
    outcome = talk()
    record = scenario_record(check_outcome(outcome), id="talk", path="talk.yaml")  # type: ignore[arg-type]
    runs = record["runs"]
    assert [r["label"] for r in runs] == [
        "exec 1/2: Weather in Oslo?",
        "exec 2/2: And tomorrow?",
    ]
    for run in runs:
        timeline = run["timeline"]
        assert (timeline["reason"], len(timeline["rounds"])) == ("stop", 2)
        assert timeline["rounds"][0]["items"][0]["label"] == "prompt"
    whole = build_timeline({"trace": outcome.trace})  # type: ignore[attr-defined]
    assert [r["n"] for r in whole["rounds"]] == [1, 2, 1, 2]
