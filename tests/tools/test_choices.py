"""exec(choices=...): a function pick, a value pick, a malformed pick and its re-ask, and
DecisionError."""

from __future__ import annotations

from typing import Any

import pytest
from tools_support import run_with

from openprogram import DecisionError, Runtime, ToolRegistry, agentic_function, function

MENU = (
    "\nOptions. Do the work first; then finish your reply with exactly one pick, as a single "
    "JSON object on the last line:\n"
    '- {"call": "escalate", "args": {...}} -- Hand the ticket to a human. (args: '
    '{"reason": {"type": "string"}})\n'
    '- {"value": "spam"}\n'
    '- {"value": "ham"}'
)
REASK = (
    "Your reply did not end with a valid pick: {reason}. Reply with only the JSON object of "
    'your pick, one of: {{"call": "escalate", "args": {{...}}}}, {{"value": "spam"}}, '
    '{{"value": "ham"}}'
)


@function(registry=None)
def escalate(reason: str) -> dict[str, str]:
    """Hand the ticket to a human."""
    return {"escalated": reason}


def _decide(turns: list[Any], registry: ToolRegistry) -> tuple[Any, Any, Any]:
    runtime, model, rec = run_with(turns, registry)
    result = runtime.exec("Classify this ticket.", choices=[escalate, "spam", "ham"])
    return result, model, rec


def test_value_pick_is_returned_and_the_menu_is_in_the_prompt(registry: ToolRegistry) -> None:
    result, model, rec = _decide(['Looks like an ad.\n```json\n{"value": "spam"}\n```'], registry)
    assert result == "spam"
    assert model.requests[0].messages[0].content[-1].text == MENU
    assert model.requests[0].tools == []  # choices are not tools (empty registry)
    assert rec.lines("agent_start", "agent_end") == ["agent_start@0.0", "agent_end:stop@0.1"]


def test_function_pick_runs_it_and_returns_its_value(registry: ToolRegistry) -> None:
    reply = 'Angry customer. {"call": "escalate", "args": {"reason": "refund"}}'
    result, model, _ = _decide([reply], registry)
    assert result == {"escalated": "refund"}  # the return value itself, not JSON text
    assert model.calls == 1


def test_malformed_pick_gets_one_reask(registry: ToolRegistry) -> None:
    result, model, rec = _decide(["I think it is spam.", '{"value": "ham"}'], registry)
    assert result == "ham"
    assert model.requests[1].messages[-1].text == REASK.format(reason="it has no JSON object")
    assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "user"]
    # the re-ask enters as a follow-up of the same run: one exec, one agent_end
    assert rec.lines("agent_start", "message_end", "agent_end") == [
        "agent_start@0.0",
        "message_end:user@0.1",
        "message_end:assistant@0.1",
        "message_end:user@0.2",
        "message_end:assistant@0.2",
        "agent_end:stop@0.2",
    ]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ('{"value": "eggs"}', 'the value "eggs" is not an option (values: "spam", "ham")'),
        ('{"call": "delete"}', '"delete" is not one of the functions (escalate)'),
        (
            '{"pick": "spam"}',
            'the JSON object {"pick": "spam"} has neither a "call" nor a "value" key',
        ),
        (
            '{"call": "escalate", "args": {}}',
            "Validation failed for tool \"escalate\":   - root: 'reason' is a required property  "
            "Received arguments: {}",
        ),
    ],
)
def test_each_malformed_pick_is_explained_in_the_reask(
    registry: ToolRegistry, reply: str, reason: str
) -> None:
    result, model, _ = _decide([reply, '{"value": "spam"}'], registry)
    assert result == "spam"
    assert model.requests[1].messages[-1].text == REASK.format(reason=reason)


def test_two_malformed_picks_raise_decision_error_quoting_the_reply(
    registry: ToolRegistry,
) -> None:
    with pytest.raises(DecisionError) as info:
        _decide(["no idea", 'still {"value": 1}'], registry)
    error = info.value
    assert str(error) == (
        "exec(choices=...): the model did not pick a valid option, even after a re-ask: the "
        'value 1 is not an option (values: "spam", "ham"). Its reply: \'still {"value": 1}\''
    )
    assert error.replies == ["no idea", 'still {"value": 1}']
    assert error.reply == 'still {"value": 1}'
    assert isinstance(error, ValueError)


def test_picked_agentic_function_runs_with_the_runtime(registry: ToolRegistry) -> None:
    @agentic_function
    def dig(topic: str, runtime: Runtime) -> str:
        """Dig into a topic."""
        return f"dug: {runtime.exec(f'dig {topic}', toolset='none')}"

    def plain_done() -> str:
        """Stop here."""
        return "stopped"

    runtime, model, _ = run_with(['{"call": "dig", "args": {"topic": "x"}}', "deep"], registry)
    assert runtime.exec("Next?", choices=[dig, plain_done, True]) == "dug: deep"
    assert [r.depth for r in model.requests] == [0, 1]  # the nested exec is one level down
    assert "plain_done" in model.requests[0].messages[0].content[-1].text


def test_menu_misuse_is_refused_before_any_model_call(registry: ToolRegistry) -> None:
    runtime, model, _ = run_with([], registry)
    with pytest.raises(ValueError, match=r"choices=\[\] offers nothing to pick"):
        runtime.exec("x", choices=[])
    with pytest.raises(ValueError, match="the value 'a' is listed twice"):
        runtime.exec("x", choices=["a", "a"])
    with pytest.raises(ValueError, match="two functions are named 'escalate'"):
        runtime.exec("x", choices=[escalate, escalate])
    with pytest.raises(TypeError, match=r"choices entry .* is neither a value"):
        runtime.exec("x", choices=[object()])
    with pytest.raises(TypeError, match="must be a list of options"):
        runtime.exec("x", choices="ab")
    assert model.requests == []
