"""``expect.history``: the run's final history (what the model would see next), matched in
order with gaps or one for one, with a diff that lists the history; for ``exec:`` and for a
``call:`` entry point; load-time errors; the CLI."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from _support import run_cli

from openprogram_sim import (
    ScenarioError,
    check_outcome,
    load_scenario,
    parse_scenario,
    run_scenario,
)

BASE = """\
scenario: a run's final history
tools:
  add:
    parameters: {type: object, properties: {a: {type: integer}, b: {type: integer}}}
    returns: "4"
history:
  - {role: user, text: "Hi"}
  - {role: assistant, text: "Hello."}
exec: {content: "What is 2+2?"}
model:
  - tool_calls: [{add: {a: 2, b: 2}}]
  - text: "It is 4."
"""


def failures(expect: str) -> list[str]:
    scenario = parse_scenario(BASE + textwrap.dedent(expect), "h.yaml")
    return [str(f) for f in check_outcome(run_scenario(scenario)).failures]


def test_the_final_history_is_the_given_history_the_prompt_and_what_the_run_added() -> None:
    outcome = run_scenario(parse_scenario(BASE, "h.yaml"))
    assert outcome.history == [
        {"role": "user", "text": "Hi"},
        {"role": "assistant", "text": "Hello.", "tool_calls": []},
        {"role": "user", "text": "What is 2+2?"},
        {
            "role": "assistant",
            "text": "",
            "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 2}}],
        },
        {"role": "toolResult", "text": "4", "tool_name": "add", "is_error": False},
        {"role": "assistant", "text": "It is 4.", "tool_calls": []},
    ]
    # what the model would see next: the last request's messages and the last reply
    assert outcome.history == [*outcome.requests[-1]["messages"], outcome.history[-1]]


def test_ordered_with_gaps_and_matchers_passes() -> None:
    assert (
        failures(
            """\
            expect:
              history:
                - {role: user, text: "What is 2+2?"}
                - {role: assistant, tool_calls: [{name: add, arguments: {a: 2, b: 2}}]}
                - {role: toolResult, tool_name: add, is_error: false}
                - {role: assistant, text: {$regex: "^It is \\\\d"}}
            """
        )
        == []
    )


def test_a_message_that_differs_fails_listing_the_history_and_the_closest_message() -> None:
    assert failures(
        """\
        expect:
          history:
            - {role: user, text: "What is 2+2?"}
            - {role: toolResult, tool_name: add, text: "5"}
        """
    ) == [
        "history (ordered) did not match\n"
        "at h.yaml:16\n"
        "expected message 2 of 2 did not match: not found after the previous match\n"
        '  {role: "toolResult", text: "5", tool_name: "add"}\n'
        "the final history (6 message(s)):\n"
        '    #0   user "Hi"\n'
        '    #1   assistant "Hello."\n'
        '    #2   user "What is 2+2?"\n'
        '  > #3   assistant calls add({"a": 2, "b": 2})\n'
        '    #4   toolResult add -> "4"\n'
        '    #5   assistant "It is 4."\n'
        "closest actual message: #4\n"
        '  text: expected "5", actual "4"'
    ]


def test_out_of_order_is_named() -> None:
    (failure,) = failures(
        """\
        expect:
          history:
            - {role: toolResult}
            - {role: user, text: "Hi"}
        """
    )
    assert "expected message 2 of 2 did not match: it matches only messages before the " in failure


def test_exact_mode_pins_every_message() -> None:
    whole = """\
        expect:
          history_mode: exact
          history:
            - {role: user, text: "Hi"}
            - {role: assistant}
            - {role: user}
            - {role: assistant}
            - {role: toolResult}
            - {role: assistant, text: "It is 4."}
        """
    assert failures(whole) == []
    short = failures(
        """\
        expect:
          history_mode: exact
          history:
            - {role: user, text: "Hi"}
            - {role: assistant}
        """
    )
    assert short[0].startswith(
        "history (exact) did not match\nat h.yaml:15\n"
        'the history has 4 more message(s) than the 2 expected, first: user "What is 2+2?"\n'
    )
    swapped = failures(whole.replace("{role: user}", "{role: toolResult}"))
    assert swapped[0].startswith(
        "history (exact) did not match\nat h.yaml:18\n"
        "expected message 3 of 6 did not match: the message at this position differs\n"
    )


def test_an_aborted_run_keeps_the_aborted_reply_and_the_results_of_the_calls_never_run() -> None:
    text = """\
scenario: abort mid-batch
tools: {search: {returns: "hit"}}
exec: {content: "Find two."}
model:
  - tool_calls: [{search: {q: a}}, {search: {q: b}}]
abort: {after_tool: 1}
expect:
  raises: {type: RunAbortedError}
  history_mode: exact
  history:
    - {role: user, text: "Find two."}
    - role: assistant
      tool_calls: [{name: search, arguments: {q: a}}, {name: search, arguments: {q: b}}]
    - {role: toolResult, text: "hit", is_error: false}
    - {role: toolResult, text: "Not run: the run was aborted.", is_error: true}
"""
    verdict = check_outcome(run_scenario(parse_scenario(text, "abort.yaml")))
    assert verdict.passed, verdict.report()


def test_mistakes_in_expect_history_are_load_errors_with_lines() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(
            BASE + "expect:\n  history:\n    - {role: usr, txt: Hi}\n"
            '    - {is_error: maybe, text: {$regex: "("}}\n  history_mode: strict\n',
            "bad.yaml",
        )
    got = [str(i) for i in info.value.issues]
    assert got[:3] == [
        "bad.yaml:15: (expect.history[0].txt) unknown key 'txt'; did you mean 'text'?",
        "bad.yaml:15: (expect.history[0].role) role is one of user, assistant, toolResult; got "
        "'usr'",
        "bad.yaml:16: (expect.history[1].is_error) is_error is a boolean; got 'maybe'",
    ]
    assert got[3].startswith("bad.yaml:16: (expect.history[1].text) bad regex '('")
    assert got[4].startswith("bad.yaml:17: (expect.history_mode) Input should be 'ordered' or")


AGENT = """
from openprogram import Runtime
from openprogram.types import AssistantMessage, TextContent, UserMessage


async def chat(runtime: Runtime) -> str:
    earlier = [UserMessage.of("Hi"), AssistantMessage(content=[TextContent("Hello.")])]
    return await runtime.aexec("And now?", tools=[], history=earlier)
"""


def test_a_call_entry_point_s_history_is_read_back_from_what_the_model_was_sent(
    tmp_path: Path,
) -> None:
    name = f"histagent_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(AGENT)
    path = tmp_path / "case.yaml"
    path.write_text(
        f'scenario: call\ncall: "{name}:chat"\nmodel: [{{text: "Now this."}}]\n'
        "expect:\n  history_mode: exact\n  history:\n    - {role: user, text: Hi}\n"
        '    - {role: assistant, text: "Hello."}\n    - {role: user, text: "And now?"}\n'
        '    - {role: assistant, text: "Now this."}\n'
    )
    try:
        verdict = check_outcome(run_scenario(load_scenario(path)))
    finally:
        sys.modules.pop(name, None)
    assert verdict.passed, verdict.report()


def test_the_cli_reports_a_history_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "h.yaml"
    path.write_text(BASE + "expect:\n  history:\n    - {role: assistant, text: It is 5.}\n")
    result = run_cli("run", str(path))
    assert result.returncode == 1
    assert "- history (ordered) did not match" in result.stdout
    assert '  text: expected "It is 5.", actual "It is 4."' in result.stdout
