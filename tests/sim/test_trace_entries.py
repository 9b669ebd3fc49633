"""The trace recorder's fast path (one builder per event class) writes exactly the entry
the field-by-field writers write: the same keys, in the same order, with the same values,
for every event of generated runs (errors, aborts, steering, nested execs, skips)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from openprogram.events import MessageEnd, MessageStart, TurnEnd
from openprogram.types import (
    AssistantMessage,
    ErrorDetails,
    TextContent,
    ToolCall,
    UserMessage,
)
from openprogram_sim.fuzz.loop import scenario_from_bytes
from openprogram_sim.play import arun_scenario
from openprogram_sim.scenario import Scenario
from openprogram_sim.trace import TraceRecorder, event_to_dict
from openprogram_sim.trace._normalize import _generic


def _same(fast: dict[str, Any], slow: dict[str, Any]) -> None:
    assert list(fast.items()) == list(slow.items())


def test_generated_runs_record_what_the_field_writers_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, int] = {}
    record = TraceRecorder.__call__

    def checked(self: TraceRecorder, event: Any) -> None:
        _same(event_to_dict(event), _generic(event))
        seen[event.type] = seen.get(event.type, 0) + 1
        record(self, event)

    monkeypatch.setattr(TraceRecorder, "__call__", checked)
    rng = random.Random(7)
    loop = asyncio.new_event_loop()
    try:
        for _ in range(300):
            scenario = Scenario.model_validate(scenario_from_bytes(rng.randbytes(160)))
            outcome = loop.run_until_complete(arun_scenario(scenario))
            assert outcome.trace  # recorded through the checked recorder
    finally:
        loop.close()
    # every kind of event a generated run emits went through both paths
    assert {
        "agent_start",
        "agent_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
    } <= set(seen)


def test_an_error_reply_and_a_subclass_keep_every_field() -> None:
    reply = AssistantMessage(
        content=[TextContent("part"), ToolCall(id="c1", name="add", arguments={})],
        stop_reason="error",
        error_message="boom",
        error_details=ErrorDetails(
            reason="rate_limit", status=429, retryable=True, retry_after=2.0
        ),
    )
    for event in (
        MessageEnd(message=reply, round=2, depth=1),
        TurnEnd(message=reply, tool_results=[], round=2),
        MessageStart(message=UserMessage.of("hi"), origin="steering", round=3),
    ):
        entry = event_to_dict(event)
        _same(entry, _generic(event))
    assert event_to_dict(MessageEnd(message=reply, round=2, depth=1)) == {
        "type": "message_end",
        "depth": 1,
        "round": 2,
        "role": "assistant",
        "text": "part",
        "tool_calls": ["add"],
        "stop_reason": "error",
        "error": "boom",
        "error_reason": "rate_limit",
        "error_status": 429,
        "retryable": True,
        "retry_after": 2.0,
    }

    class Shouted(UserMessage):
        pass

    event = MessageStart(message=Shouted([TextContent("x")]), origin="prompt")
    assert event_to_dict(event) == {
        "type": "message_start",
        "depth": 0,
        "round": 0,
        "role": "user",
        "text": "x",
        "origin": "prompt",
    }
