"""``exec(..., history=[...])``: a conversation continued. The model sees the history before
the new content; only the new content is emitted as events and added by the run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _support import LAST_TURN_STOPS, OPENING, compact, make_runtime, one_call, tool

from openprogram import ArgumentTypeError, InvalidArgumentError
from openprogram.types import (
    AnyMessage,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

NOOP = tool("noop", lambda: "ok")


def conversation() -> list[AnyMessage]:
    return [
        UserMessage.of("What is in the box?"),
        AssistantMessage([ToolCall("c1", "noop", {})], stop_reason="toolUse"),
        ToolResultMessage("c1", "noop", [TextContent("ok")]),
        AssistantMessage([TextContent("A noop.")]),
    ]


def test_the_model_sees_the_history_before_the_new_content() -> None:
    runtime, model, rec = make_runtime([{"tool_calls": [{"id": "c1", "name": "noop"}]}, "Two."])
    history = conversation()
    before = list(history)
    assert runtime.exec("And now?", tools=[NOOP], history=history) == "Two."
    first = model.requests[0].messages
    assert first[:4] == before and [m.role for m in first[4:]] == ["user"]
    assert first[4].text == "And now?"
    assert history == before  # the caller's list is not appended to
    # only the new prompt is emitted; the history is not replayed as events
    assert compact(rec.trace) == [
        *OPENING,
        *one_call("noop"),
        *LAST_TURN_STOPS,
    ]
    assert runtime.last_run is not None
    added = runtime.last_run.loop.messages
    assert [m.role for m in added] == ["user", "assistant", "toolResult", "assistant"]
    # the model reused the history's id c1: the new call is renamed, and answered as such
    assert [c.id for c in added[1].tool_calls] == ["c1_2"]  # type: ignore[union-attr]
    assert added[2].tool_call_id == "c1_2"  # type: ignore[union-attr]


def test_aexec_takes_a_history_too() -> None:
    runtime, model, _ = make_runtime(["fine"])
    asyncio.run(runtime.aexec("more", tools=[], history=conversation()))
    assert [m.role for m in model.requests[0].messages] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "user",
    ]


def test_a_call_of_an_aborted_reply_needs_no_result() -> None:
    """An aborted or failed reply is never answered (the run ended on it), so a history
    saved from such a run continues as it is."""
    history: list[AnyMessage] = [
        UserMessage.of("go"),
        AssistantMessage([ToolCall("half", "noop", {})], stop_reason="aborted"),
    ]
    runtime, model, _ = make_runtime(["resumed"])
    assert runtime.exec("again", tools=[NOOP], history=history) == "resumed"
    assert len(model.requests[0].messages) == 3


def unanswered() -> list[AnyMessage]:
    history = conversation()
    del history[2]
    return history


def answered_twice() -> list[AnyMessage]:
    history = conversation()
    history.insert(3, ToolResultMessage("c1", "noop", [TextContent("again")]))
    return history


def result_before_its_call() -> list[AnyMessage]:
    history = conversation()
    history[1], history[2] = history[2], history[1]
    return history


def repeated_id() -> list[AnyMessage]:
    history = conversation()
    history += [
        AssistantMessage([ToolCall("c1", "noop", {})], stop_reason="toolUse"),
        ToolResultMessage("c1", "noop", [TextContent("ok")]),
    ]
    return history


@pytest.mark.parametrize(
    ("history", "error", "message"),
    [
        (
            unanswered(),
            InvalidArgumentError,
            "history[1]: tool call 'c1' (noop) has no result in the history; add a "
            "ToolResultMessage with tool_call_id='c1' after it, or leave the call out",
        ),
        (
            answered_twice(),
            InvalidArgumentError,
            "history[3]: a second result for tool call 'c1' (each call has exactly one)",
        ),
        (
            result_before_its_call(),
            InvalidArgumentError,
            "history[1]: tool result for 'c1' answers no tool call before it",
        ),
        (
            repeated_id(),
            InvalidArgumentError,
            "history[4]: tool call id 'c1' is used twice (first at history[1]); ids must be unique",
        ),
        (
            [UserMessage.of("hi"), {"role": "user", "content": "hi"}],
            ArgumentTypeError,
            "history[1] is a dict, not a message (UserMessage, AssistantMessage or "
            "ToolResultMessage); load dicts with openprogram.types.message_from_dict",
        ),
    ],
    ids=["unanswered", "answered-twice", "result-first", "repeated-id", "not-a-message"],
)
def test_a_bad_history_is_refused_before_anything_runs(
    history: list[Any], error: type[Exception], message: str
) -> None:
    runtime, model, rec = make_runtime(["never"])
    with pytest.raises(error) as info:
        runtime.exec("go", tools=[NOOP], history=history)
    assert str(info.value) == message
    assert model.calls == 0 and rec.trace == []


def test_history_must_be_a_sequence_of_messages() -> None:
    runtime, _, _ = make_runtime([])
    with pytest.raises(ArgumentTypeError, match="history= must be a sequence of messages"):
        runtime.exec("go", tools=[], history="earlier chat")  # type: ignore[arg-type]
