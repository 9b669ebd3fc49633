"""Steering and follow-up messages: where they enter, what they skip, what they keep alive."""

from __future__ import annotations

import asyncio
from typing import Any

from _support import OPENING_IN_ROUNDS, compact, make_runtime, tool

from openprogram import Agent
from openprogram.agent import SKIPPED_TEXT
from openprogram.events import ToolExecutionEnd
from openprogram.types import ToolResultMessage
from openprogram_sim.models import ScriptedModel

SEARCH_LOG: list[str] = []


def search(q: str) -> str:
    SEARCH_LOG.append(q)
    return f"results for {q}"


SEARCH = tool("search", search, {"q": {"type": "string"}}, ["q"])


def steer_after_tool(runtime: Any, n: int, text: str) -> None:
    """Queue a steering message once the n-th tool call of the run has finished."""
    seen = {"ends": 0}

    def listener(event: Any) -> None:
        if event.type == "tool_execution_end" and event.depth == 0:
            seen["ends"] += 1
            if seen["ends"] == n:
                runtime.steer(text)

    runtime.subscribe(listener)


def record_tool_ends(runtime: Any) -> list[ToolExecutionEnd]:
    """The ``tool_execution_end`` events of the outer exec, as they are emitted."""
    ends: list[ToolExecutionEnd] = []

    def listener(event: Any) -> None:
        if isinstance(event, ToolExecutionEnd) and event.depth == 0:
            ends.append(event)

    runtime.subscribe(listener)
    return ends


def test_steering_skips_every_remaining_call() -> None:
    """Seed: "If get_steering_messages returns user-queued messages mid-way, the remaining
    unexecuted ToolCalls are marked by _skip_tool_call as 'Skipped due to queued user
    message' and the user messages take priority"."""
    SEARCH_LOG.clear()
    runtime, model, rec = make_runtime(
        [
            {"tool_calls": [{"search": {"q": q}} for q in "abc"]},
            {"text": "Switching to the new request."},
        ]
    )
    steer_after_tool(runtime, 1, "Stop, do X instead.")
    ends = record_tool_ends(runtime)
    assert runtime.exec("Find three things.", tools=[SEARCH]) == "Switching to the new request."
    assert SEARCH_LOG == ["a"]
    assert compact(rec.trace, rounds=True) == [
        *OPENING_IN_ROUNDS,
        "message_end:assistant[search,search,search]/toolUse@1",
        "tool_start:search@1",
        "tool_end:search:ok@1",
        "message_start:toolResult@1",
        "message_end:toolResult@1",
        "tool_start:search@1",
        "tool_end:search:error@1",
        "message_start:toolResult@1",
        "message_end:toolResult@1",
        "tool_start:search@1",
        "tool_end:search:error@1",
        "message_start:toolResult@1",
        "message_end:toolResult@1",
        "turn_end@1",
        "turn_start@2",
        "message_start:user@2",
        "message_end:user@2",
        "message_start:assistant@2",
        "message_end:assistant[]/stop@2",
        "turn_end@2",
        "agent_end:stop@2",
    ]
    assert [(e.skipped, e.is_error, e.result.skipped) for e in ends] == [
        (False, False, False),
        (True, True, True),
        (True, True, True),
    ]
    sent = model.requests[1].messages
    assert [m.role for m in sent] == [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "toolResult",
        "user",
    ]
    assert sent[-1].text == "Stop, do X instead."
    assert [m.skipped for m in sent if isinstance(m, ToolResultMessage)] == [False, True, True]


def test_a_skipped_call_tells_the_model_why() -> None:
    """The one test that pins the skip text: it is what the model reads. Code recognises a
    skip by the ``skipped`` flag, never by this text."""
    runtime, model, _ = make_runtime(
        [{"tool_calls": [{"search": {"q": "a"}}, {"search": {"q": "b"}}]}, "ok"]
    )
    steer_after_tool(runtime, 1, "stop")
    runtime.exec("go", tools=[SEARCH])
    results = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert [(m.text, m.is_error, m.skipped) for m in results] == [
        ("results for a", False, False),
        ("Skipped due to queued user message.", True, True),
    ]
    assert SKIPPED_TEXT == "Skipped due to queued user message."


def test_steering_after_the_last_call_skips_nothing_and_enters_next_round() -> None:
    SEARCH_LOG.clear()
    runtime, model, _ = make_runtime([{"tool_calls": [{"search": {"q": "a"}}]}, "ok"])
    steer_after_tool(runtime, 1, "also b")
    ends = record_tool_ends(runtime)
    runtime.exec("go", tools=[SEARCH])
    assert [(e.skipped, e.is_error) for e in ends] == [(False, False)]
    assert model.requests[1].messages[-1].text == "also b"


# A text reply ends turn 1; the queued user message (steering or follow-up) opens turn 2.
QUEUED_MESSAGE_OPENS_TURN_2 = [
    *OPENING_IN_ROUNDS,
    "message_end:assistant[]/stop@1",
    "turn_end@1",
    "turn_start@2",
    "message_start:user@2",
    "message_end:user@2",
    "message_start:assistant@2",
]


def test_pending_steering_keeps_the_loop_alive_after_a_text_reply() -> None:
    """Seed: "the inner while also runs on pending_messages, so queued user (steering)
    messages keep the loop alive even after a pure-text reply"."""
    runtime, model, rec = make_runtime(["first answer", "second answer"])

    def listener(event: Any) -> None:
        if event.type == "message_end" and event.message.role == "assistant" and event.round == 1:
            runtime.steer("one more thing")

    runtime.subscribe(listener)
    assert runtime.exec("go", tools=[SEARCH]) == "second answer"
    assert compact(rec.trace, rounds=True) == [
        *QUEUED_MESSAGE_OPENS_TURN_2,
        "message_end:assistant[]/stop@2",
        "turn_end@2",
        "agent_end:stop@2",
    ]
    assert model.requests[1].messages[-1].text == "one more thing"


def test_steering_queued_before_the_run_enters_turn_one_after_the_prompt() -> None:
    runtime, model, rec = make_runtime(["ok"])
    runtime.steer("early note")
    runtime.exec("go", tools=[])
    assert [m.text for m in model.requests[0].messages] == ["go", "early note"]
    assert compact(rec.trace)[:6] == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:user",
        "message_end:user",
    ]


def test_follow_ups_start_another_pass_after_the_inner_loop_ends() -> None:
    """Seed: "After the inner loop exits, get_follow_up_messages may supply follow-up
    messages which become pending_messages for another round"."""
    runtime, model, rec = make_runtime(
        ["Here is X.", {"tool_calls": [{"search": {"q": "y"}}]}, "Here is Y."]
    )
    runtime.follow_up("Also check Y.")
    assert runtime.exec("Find X.", tools=[SEARCH]) == "Here is Y."
    assert compact(rec.trace, rounds=True) == [
        *QUEUED_MESSAGE_OPENS_TURN_2,
        "message_end:assistant[search]/toolUse@2",
        "tool_start:search@2",
        "tool_end:search:ok@2",
        "message_start:toolResult@2",
        "message_end:toolResult@2",
        "turn_end@2",
        "turn_start@3",
        "message_start:assistant@3",
        "message_end:assistant[]/stop@3",
        "turn_end@3",
        "agent_end:stop@3",
    ]
    assert model.requests[1].messages[-1].text == "Also check Y."


def test_cap_counts_follow_up_rounds_and_keeps_what_was_not_delivered() -> None:
    """The cap is per run (follow-up passes included); messages still queued when it is
    reached are not lost: they stay queued for the next exec."""
    runtime, model, rec = make_runtime(["one", "two", "three"])
    runtime.follow_up("f1")
    runtime.follow_up("f2")
    runtime.exec("go", tools=[], max_iterations=1)
    assert model.calls == 1
    assert rec.trace[-1]["reason"] == "cap"
    runtime.exec("again", tools=[], max_iterations=3)
    assert [m.text for m in model.requests[1].messages] == ["again"]
    assert [m.text for m in model.requests[2].messages] == ["again", "two", "f1", "f2"]


def test_agent_steering_at_cap_stays_queued() -> None:
    model = ScriptedModel([{"tool_calls": [{"search": {"q": "a"}}]}])
    agent = Agent(model, tools=[SEARCH], max_iterations=1)

    def listener(event: Any) -> None:
        if event.type == "tool_execution_end":
            agent.steer("late")

    agent.subscribe(listener)
    result = asyncio.run(agent.prompt("go"))
    assert result.reason == "cap"
    assert [m.text for m in agent.queued_steering] == ["late"]
    assert model.calls == 1


def test_steering_queued_as_a_turn_closes_joins_the_batch_steering() -> None:
    """Found by the fuzzer: a message steered at turn_end, while the loop holds steering from
    the batch, must reach the next model call (not wait for the next batch and skip it)."""
    SEARCH_LOG.clear()
    runtime, model, _ = make_runtime(
        [
            {"tool_calls": [{"search": {"q": "a"}}, {"search": {"q": "b"}}]},
            {"tool_calls": [{"search": {"q": "c"}}, {"search": {"q": "d"}}]},
            "done",
        ]
    )
    steer_after_tool(runtime, 1, "first")

    def at_turn_end(event: Any) -> None:
        if event.type == "turn_end" and event.round == 1:
            runtime.steer("second")

    runtime.subscribe(at_turn_end)
    runtime.exec("go", tools=[SEARCH])
    assert [m.text for m in model.requests[1].messages[-2:]] == ["first", "second"]
    assert SEARCH_LOG == ["a", "c", "d"]


def test_each_user_message_says_how_it_entered() -> None:
    """The same words as prompt, steering and follow-up: ``origin`` on the message events
    (and in the trace) tells them apart; other roles carry none."""
    runtime, _, rec = make_runtime(
        [{"tool_calls": [{"search": {"q": "a"}}]}, {"text": "One."}, {"text": "Two."}]
    )
    steer_after_tool(runtime, 1, "Again.")
    runtime.follow_up("Again.")
    origins: list[tuple[str, str, Any]] = []

    def listener(event: Any) -> None:
        if event.type in ("message_start", "message_end"):
            origins.append((event.type, event.message.role, event.origin))

    runtime.subscribe(listener)
    assert runtime.exec("Again.", tools=[SEARCH]) == "Two."
    users = [(t, o) for t, role, o in origins if role == "user"]
    assert users == [
        ("message_start", "prompt"),
        ("message_end", "prompt"),
        ("message_start", "steering"),
        ("message_end", "steering"),
        ("message_start", "follow_up"),
        ("message_end", "follow_up"),
    ]
    assert {o for _, role, o in origins if role != "user"} == {None}
    traced = [(e["text"], e["origin"]) for e in rec.trace if e.get("role") == "user"]
    assert traced == [("Again.", o) for _, o in users]
