"""A ``conversation:`` step without ``exec.content``: a continue without a new prompt
(``Runtime.exec(None, history=...)``). Where it may stand (load errors with their lines), what
it sends and emits, the error when the history before it cannot be continued, the JSON Schema
and the report."""

from __future__ import annotations

import textwrap

import jsonschema
import pytest
import yaml
from _support import compact, tool_round_then_stop

from openprogram_sim import ScenarioError, check_outcome, json_schema, parse_scenario, run_scenario
from openprogram_sim.report import scenario_record

CONTINUE = """\
scenario: a continue after an abort
tools:
  fetch:
    parameters: {type: object, properties: {url: {type: string}}}
    returns: "page"
conversation:
  - exec: {content: "Fetch a.", tools: [fetch]}
    abort: {during_tool: 1}
    expect:
      raises: {type: RunAbortedError}
  - exec: {tools: [fetch]}
    expect:
      result: "Here is a."
model:
  - tool_calls: [{fetch: {url: a}}]
  - tool_calls: [{fetch: {url: a}}]
  - text: "Here is a."
"""


def run(text: str) -> object:
    return run_scenario(parse_scenario(textwrap.dedent(text), "talk.yaml"))


def test_a_step_without_content_continues_the_history_with_no_new_prompt() -> None:
    scenario = parse_scenario(CONTINUE, "talk.yaml")
    assert scenario.conversation is not None and scenario.conversation[1].exec.content is None
    outcome = run_scenario(scenario)
    verdict = check_outcome(outcome)
    assert verdict.passed, verdict
    first, second = outcome.steps
    # the second exec was sent exactly the history the first left, nothing added
    sent = outcome.recorded[1].messages
    assert [m.role for m in sent] == ["user", "assistant", "toolResult"]
    assert sent == first.final_messages
    assert compact(second.trace, rounds=True) == [
        "agent_start@0",
        "turn_start@1",
        "message_start:assistant@1",
        *tool_round_then_stop("fetch"),
    ]
    roles = [m.role for m in outcome.final_messages]
    assert roles == ["user", "assistant", "toolResult", "assistant", "toolResult", "assistant"]


def test_content_null_is_a_continue_too() -> None:
    text = CONTINUE.replace(
        "  - exec: {tools: [fetch]}", "  - exec: {content: null, tools: [fetch]}"
    )
    assert check_outcome(run(text)).passed


def test_a_step_s_expect_checks_a_continue_as_any_exec() -> None:
    text = CONTINUE.replace('      result: "Here is a."', '      result: "Something else."')
    verdict = check_outcome(run(text))
    assert not verdict.passed
    assert [f.title.split(":")[0] for f in verdict.failures] == ["exec 2"]


def test_a_continue_after_a_finished_exec_raises_and_its_expect_can_say_so() -> None:
    text = """\
    scenario: nothing to continue
    conversation:
      - exec: {content: "Hi", tools: []}
        expect: {result: "Hello."}
      - exec: {tools: []}
        expect:
          raises: "ends with an assistant message"
    model:
      - text: "Hello."
    """
    outcome = run(text)
    assert check_outcome(outcome).passed
    error = outcome.steps[1].error  # type: ignore[attr-defined]
    assert type(error).__name__ == "InvalidArgumentError"
    assert "pass content (the next user turn)" in str(error)


def test_the_first_step_continues_a_history_that_ends_with_a_user_message() -> None:
    text = """\
    scenario: a pending user turn
    history:
      - {role: user, text: "Hi?"}
    conversation:
      - exec: {tools: []}
        expect:
          result: "Hello."
          requests: [{call: 1, message_count: 1, last_message: {role: user, text: "Hi?"}}]
          not_events: [{message_start: {role: user}}]
    model:
      - text: "Hello."
    """
    assert check_outcome(run(text)).passed


NOTHING = (
    "the first exec has no content (a continue without a new prompt), but {why}, so there is "
    "nothing to continue; give it content: (the first prompt), or end history: with a user "
    "message or a tool result"
)


@pytest.mark.parametrize(
    ("head", "step", "where", "why"),
    [
        (
            "",
            "  - exec: {tools: []}\n",
            "talk.yaml:3: (conversation[0].exec)",
            "there is no history:",
        ),
        (
            "",
            "  - exec:\n      content: null\n",
            "talk.yaml:4: (conversation[0].exec.content)",
            "there is no history:",
        ),
        (
            "history:\n  - {role: user, text: Hi}\n  - {role: assistant, text: Hello}\n",
            "  - exec: {}\n",
            "talk.yaml:6: (conversation[0].exec)",
            "history: ends with an assistant message (history[1])",
        ),
    ],
    ids=["no-history", "content-null", "history-ends-with-assistant"],
)
def test_a_first_step_with_nothing_to_continue_is_a_load_error_with_its_line(
    head: str, step: str, where: str, why: str
) -> None:
    text = f"scenario: x\n{head}conversation:\n{step}model:\n  - text: a\n"
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "talk.yaml")
    assert [str(i) for i in info.value.issues] == [f"{where} {NOTHING.format(why=why)}"]


@pytest.mark.parametrize(
    ("text", "issue"),
    [
        (
            "scenario: x\nexec: {tools: []}\nmodel: [{text: a}]\n",
            "talk.yaml:2: (exec) missing required key 'content'",
        ),
        (
            "scenario: x\ntools:\n  t: {exec: {tools: []}}\nexec: {content: go}\n"
            "model: [{text: a}]\n",
            "talk.yaml:3: (tools.t.exec) missing required key 'content'",
        ),
    ],
    ids=["top-level-exec", "a-tool-s-exec"],
)
def test_content_stays_required_outside_conversation_steps(text: str, issue: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "talk.yaml")
    assert issue in [str(i) for i in info.value.issues]


def test_the_json_schema_lets_a_step_leave_content_out_and_nothing_else() -> None:
    validator = jsonschema.Draft202012Validator(json_schema())
    assert list(validator.iter_errors(yaml.safe_load(CONTINUE))) == []
    top = yaml.safe_load("scenario: x\nexec: {tools: []}\nmodel: [{text: a}]\n")
    assert [e.message for e in validator.iter_errors(top)] == ["'content' is a required property"]


def test_the_report_labels_a_continue() -> None:
    verdict = check_outcome(run(CONTINUE))
    record = scenario_record(verdict, id="talk", path="talk.yaml")
    assert [r["label"] for r in record["runs"]] == [
        "exec 1/2: Fetch a.",
        "exec 2/2: (continue, no new prompt)",
    ]
    assert record["runs"][1]["timeline"]["reason"] == "stop"
