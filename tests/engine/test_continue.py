"""``exec(None, history=[...])``: a run that continues the history without a new prompt.
The model is sent the history as it is; no prompt message is emitted or added."""

from __future__ import annotations

import asyncio

import pytest
from _support import LAST_TURN_STOPS, compact, make_runtime, one_call, tool

from openprogram import InvalidArgumentError
from openprogram.types import (
    AnyMessage,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

NOOP = tool("noop", lambda: "ok")


def pending_results() -> list[AnyMessage]:
    """A turn whose tool results the model has not answered yet (as an abort leaves it)."""
    return [
        UserMessage.of("Check the box."),
        AssistantMessage([ToolCall("c1", "noop", {})], stop_reason="toolUse"),
        ToolResultMessage("c1", "noop", [TextContent("ok")]),
    ]


def test_a_continue_sends_the_history_as_it_is_and_emits_no_prompt() -> None:
    runtime, model, rec = make_runtime([{"tool_calls": [{"id": "c2", "name": "noop"}]}, "Done."])
    history = pending_results()
    before = list(history)
    assert runtime.exec(None, tools=[NOOP], history=history) == "Done."
    assert model.requests[0].messages == before  # exactly the history, nothing added
    assert [m.role for m in model.requests[1].messages[3:]] == ["assistant", "toolResult"]
    assert history == before
    assert compact(rec.trace) == [
        "agent_start",
        "turn_start",
        "message_start:assistant",
        *one_call("noop"),
        *LAST_TURN_STOPS,
    ]
    assert runtime.last_run is not None
    added = runtime.last_run.loop.messages
    assert [m.role for m in added] == ["assistant", "toolResult", "assistant"]


def test_a_continue_answers_a_pending_user_turn() -> None:
    runtime, model, rec = make_runtime(["Hello."])
    history: list[AnyMessage] = [UserMessage.of("Hi?")]
    assert asyncio.run(runtime.aexec(None, tools=[], history=history)) == "Hello."
    assert model.requests[0].messages == history
    assert compact(rec.trace) == [
        "agent_start",
        "turn_start",
        "message_start:assistant",
        "message_end:assistant[]/stop",
        "turn_end",
        "agent_end:stop",
    ]


def test_content_none_by_keyword_is_the_same() -> None:
    runtime, model, _ = make_runtime(["Hello."])
    assert runtime.exec(content=None, tools=[], history=[UserMessage.of("Hi?")]) == "Hello."
    assert len(model.requests[0].messages) == 1


@pytest.mark.parametrize(
    ("history", "said"),
    [
        (
            [UserMessage.of("Hi?"), AssistantMessage([TextContent("Hello.")])],
            "ends with an assistant message (history[1], stop_reason 'stop')",
        ),
        ([], "history= is empty"),
    ],
    ids=["ends-with-assistant", "empty"],
)
def test_a_continue_needs_a_history_the_model_can_answer(
    history: list[AnyMessage], said: str
) -> None:
    runtime, model, rec = make_runtime(["never"])
    with pytest.raises(InvalidArgumentError) as caught:
        runtime.exec(None, tools=[], history=history)
    assert said in str(caught.value)
    assert "pass content (the next user turn)" in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert model.requests == [] and rec.trace == []  # refused before anything ran


def test_a_continue_with_no_history_at_all_is_refused() -> None:
    runtime, model, _ = make_runtime(["never"])
    with pytest.raises(InvalidArgumentError, match="history= is empty"):
        runtime.exec(None, tools=[])
    assert model.requests == []


def test_a_continue_cannot_carry_choices() -> None:
    runtime, model, _ = make_runtime(["a"])
    with pytest.raises(InvalidArgumentError, match=r"choices=.*needs a prompt"):
        runtime.exec(None, choices=["a", "b"], history=[UserMessage.of("Pick.")])
    assert model.requests == []
