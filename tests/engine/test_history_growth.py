"""What an exec continuing a long history pays for it, and that the shortcuts taken keep what
was checked and recorded (issue 28 item 3): the history is checked in one pass whose tool-call
ids the run reuses to make a reply's ids unique, and the scripted model records what each
call was sent without copying the whole history on every call."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from _support import make_runtime, tool

from openprogram import Agent, InvalidArgumentError
from openprogram.types import (
    AnyMessage,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from openprogram_sim.models import ScriptedModel

NOOP = tool("noop", lambda: "ok")


def rounds(count: int, stem: str = "h") -> list[AnyMessage]:
    out: list[AnyMessage] = [UserMessage.of("start")]
    for n in range(count):
        out.append(AssistantMessage([ToolCall(f"{stem}{n}", "noop", {})], stop_reason="toolUse"))
        out.append(ToolResultMessage(f"{stem}{n}", "noop", [TextContent("ok")]))
    out.append(AssistantMessage([TextContent("done")]))
    return out


def test_a_reply_reusing_an_id_of_the_history_gets_a_fresh_one() -> None:
    """The ids the history check found are the ones the run keeps clear of."""
    history = rounds(3)
    runtime, model, rec = make_runtime(
        [{"tool_calls": [{"name": "noop", "arguments": {}, "id": "h1"}]}, "fine"]
    )
    assert runtime.exec("again", tools=[NOOP], history=history) == "fine"
    ids = [e["tool_call_id"] for e in rec.trace if e["type"] == "tool_execution_end"]
    assert ids == ["h1_2"]
    sent = model.requests[1].messages
    assert [m.tool_call_id for m in sent if isinstance(m, ToolResultMessage)][-1] == "h1_2"


@dataclass(slots=True)
class NotedReply(AssistantMessage):
    """A user's own subclass of a message class (checked as its base class is)."""

    note: str = ""


def test_a_history_of_message_subclasses_is_checked_as_their_classes_are() -> None:
    good: list[AnyMessage] = [
        UserMessage.of("go"),
        NotedReply([ToolCall("s1", "noop", {})], stop_reason="toolUse", note="mine"),
        ToolResultMessage("s1", "noop", [TextContent("ok")]),
        NotedReply([TextContent("done")]),
    ]
    runtime, _, rec = make_runtime([{"tool_calls": [{"name": "noop", "id": "s1"}]}, "fine"])
    assert runtime.exec("again", tools=[NOOP], history=good) == "fine"
    assert [e["tool_call_id"] for e in rec.trace if e["type"] == "tool_execution_end"] == ["s1_2"]
    unanswered = good[:2]
    runtime, model, _ = make_runtime(["never"])
    with pytest.raises(InvalidArgumentError, match=r"history\[1\]: tool call 's1' \(noop\)"):
        runtime.exec("again", tools=[NOOP], history=unanswered)
    assert model.calls == 0


def test_the_same_result_object_twice_is_named_at_its_second_place() -> None:
    history = rounds(2)
    history.insert(3, history[2])  # the very same ToolResultMessage again
    runtime, _, _ = make_runtime(["never"])
    with pytest.raises(InvalidArgumentError) as info:
        runtime.exec("again", tools=[NOOP], history=history)
    assert str(info.value) == (
        "history[3]: a second result for tool call 'h0' (each call has exactly one)"
    )


def test_each_request_keeps_what_that_call_was_sent_at_every_length() -> None:
    """Requests read after the run hold the history as each call saw it, though the model
    no longer copies it whole on every call."""
    history = rounds(200)
    runtime, model, _ = make_runtime([{"tool_calls": [{"noop": {}}]}] * 3 + ["end"])
    runtime.exec("go on", tools=[NOOP], history=history)
    lengths = [len(r.messages) for r in model.requests]
    base = len(history) + 1
    assert lengths == [base, base + 2, base + 4, base + 6]
    assert model.requests[0].messages == [*history, model.requests[3].messages[base - 1]]
    last = model.requests[3].messages
    assert [m.role for m in last[base:]] == ["assistant", "toolResult"] * 3
    for request in model.requests:  # each a prefix of the last, object by object
        assert all(a is b for a, b in zip(request.messages, last, strict=False))


def test_requests_stay_as_sent_when_the_agents_history_is_cleared_and_rebuilt() -> None:
    """An Agent's history cleared in place between prompts (the live list the model was
    shown) does not change what earlier requests say they were sent."""
    model = ScriptedModel(["one", "two", "three"])
    agent = Agent(model)
    asyncio.run(agent.prompt("first"))
    asyncio.run(agent.prompt("second"))
    before = [[m.text for m in r.messages] for r in model.requests]
    agent.state.messages.clear()
    agent.state.messages.extend([UserMessage.of("other"), AssistantMessage([TextContent("x")])])
    asyncio.run(agent.prompt("third"))
    texts = [[m.text for m in r.messages] for r in model.requests]
    assert texts[:2] == before == [["first"], ["first", "one", "second"]]
    assert texts[2] == ["other", "x", "third"]


def test_requests_stay_as_sent_when_an_earlier_message_is_replaced_in_place() -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent(model)
    asyncio.run(agent.prompt("first"))
    agent.state.messages[0] = UserMessage.of("rewritten")
    asyncio.run(agent.prompt("second"))
    texts = [[m.text for m in r.messages] for r in model.requests]
    assert texts == [["first"], ["rewritten", "one", "second"]]
