"""The scripted model's ready turns: read from a plain iterator, whole when no piece is read,
and the same reply, events and aborts as when streamed with ``async for``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from openprogram import Runtime, ToolRegistry
from openprogram.agent import AbortSignal
from openprogram.providers import Context, StreamOptions
from openprogram.providers.base import ReadyStream
from openprogram.tools import ToolSpec
from openprogram.types import UserMessage
from openprogram_sim.errors import ScriptedFault, ScriptExhaustedError
from openprogram_sim.models import ScriptedModel
from openprogram_sim.trace import TraceRecorder

TURNS: list[Any] = [
    {"text": "plain"},
    {"thinking": "let me see", "text": "abcdefghijklmnopqrstuvwxyz0123456789"},
    {"tool_calls": [{"search": {"q": "a"}}, {"search": {"q": "b", "n": 2}}]},
    {"tool_calls": [{"search": {"q": {"nested": [1, 2]}}}]},
    {"tool_calls": [{"name": "search", "arguments": "{not json", "id": "mine"}]},
    {"tool_calls": [{"search": {}}], "text": "and a call", "usage": {"input": 3, "output": 4}},
    {"stop_reason": "error", "error": "boom", "error_reason": "rate_limit", "retryable": True},
    {"stop_reason": "aborted", "text": "cut"},
    {"stop_reason": "length", "text": "long"},
    {"text": "half", "fault": "truncate"},
]


def context() -> Context:
    return Context("sys", [UserMessage.of("hi")], [ToolSpec("search")])


def streamed(turn: Any, cancel: Any = None) -> list[Any]:
    model = ScriptedModel([turn], chunk_size=8)

    async def collect() -> list[Any]:
        options = StreamOptions(round=1, cancel=cancel)
        return [e async for e in model.stream(context(), options)]

    return asyncio.run(collect())


def ready(turn: Any, *, pieces: bool, cancel: Any = None) -> list[Any]:
    model = ScriptedModel([turn], chunk_size=8)
    stream = model.stream(context(), StreamOptions(round=1, cancel=cancel))
    assert isinstance(stream, ReadyStream)
    events = stream.ready(pieces)
    assert events is not None
    return list(events)


def final(events: list[Any]) -> Any:
    last = events[-1]
    return last.message if last.type == "done" else last.error if last.type == "error" else None


@pytest.mark.parametrize("turn", TURNS)
def test_a_ready_turn_plays_the_reply_it_streams(turn: Any) -> None:
    events = streamed(turn)
    with_pieces = ready(turn, pieces=True)
    whole = ready(turn, pieces=False)
    assert [e.type for e in with_pieces] == [e.type for e in events]
    # without pieces: the start and the final event only, and the same reply
    assert [e.type for e in whole] == [events[0].type] + (
        [events[-1].type] if final(events) is not None else []
    )
    for played in (with_pieces, whole):
        got, want = final(played), final(events)
        if want is None:  # truncated: no final event; the partial is as far as it got
            assert played[0].partial.content == events[0].partial.content
            continue
        assert (got.content, got.stop_reason, got.error_message, got.usage) == (
            want.content,
            want.stop_reason,
            want.error_message,
            want.usage,
        )
        assert got.error_details == want.error_details


def test_a_raising_turn_raises_from_the_ready_iterator_too() -> None:
    turn = {"text": "then", "fault": "raise", "error": "crashed"}
    for pieces in (True, False):
        with pytest.raises(ScriptedFault, match="crashed"):
            ready(turn, pieces=pieces)


def test_a_call_beyond_the_script_raises_when_the_stream_is_first_read() -> None:
    model = ScriptedModel([])
    stream = model.stream(context(), StreamOptions(round=1))  # nothing recorded yet
    assert model.calls == 0
    with pytest.raises(ScriptExhaustedError, match="model call #1"):
        stream.ready()
    assert model.calls == 1


class FlipsAfter(asyncio.Event):
    """An abort signal that reads as set from its ``n``-th look on (another thread's abort,
    landing between two of the reply's blocks)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.looks, self.n = 0, n

    def is_set(self) -> bool:
        self.looks += 1
        return self.looks >= self.n


@pytest.mark.parametrize("looks", [2, 3, 4])
def test_an_abort_between_whole_blocks_ends_the_reply_there(looks: int) -> None:
    turn = {"thinking": "t", "text": "x", "tool_calls": [{"search": {"q": "a"}}]}
    events = ready(turn, pieces=False, cancel=FlipsAfter(looks))
    error = events[-1]
    assert [e.type for e in events] == ["start", "error"] and error.reason == "aborted"
    # the first look is as the reply starts; each later one follows a block
    assert [b.type for b in error.error.content] == ["thinking", "text", "toolCall"][: looks - 1]


def test_an_abort_as_the_reply_starts_ends_it_after_its_first_piece_either_way() -> None:
    """A listener of message_start that aborts: the reply ends as the streamed body does,
    after its first piece, whether or not a listener reads the pieces."""
    seen: dict[bool, list[Any]] = {}
    for updates in (True, False):
        runtime = Runtime(
            provider=ScriptedModel([{"text": "hello there", "tool_calls": [{"t": {}}]}]),
            registry=ToolRegistry(),
        )
        recorder = TraceRecorder()
        recorder.wants_updates = updates  # type: ignore[misc]
        runtime.subscribe(recorder)

        def abort_on_reply(event: Any, runtime: Runtime = runtime) -> None:
            if event.type == "message_start" and event.message.role == "assistant":
                runtime.abort()

        abort_on_reply.wants_updates = False  # type: ignore[attr-defined]
        runtime.subscribe(abort_on_reply)
        with pytest.raises(Exception, match="aborted"):
            runtime.exec("go")
        reply = runtime.last_run.loop.final  # type: ignore[union-attr]
        seen[updates] = [reply.stop_reason, reply.error_message, list(reply.content)]
        assert [e["type"] for e in recorder.trace][-2:] == ["turn_end", "agent_end"]
    assert seen[True] == seen[False]
    assert seen[False][0] == "aborted" and seen[False][2][0].text == ""  # its first piece


def test_a_turn_that_waits_is_iterated_async_after_ready_declines() -> None:
    async def go() -> list[str]:
        signal = AbortSignal()
        model = ScriptedModel([{"text": "later", "latency": 2.0}, {"fault": "hang"}])
        first = model.stream(context(), StreamOptions(round=1, cancel=signal))
        assert first.ready() is None  # latency: recorded, played async
        types = [e.type async for e in first]
        second = model.stream(context(), StreamOptions(round=2, cancel=signal))
        assert second.ready(False) is None  # a hang waits for the abort
        asyncio.get_running_loop().call_soon(signal.set)
        types += [e.type async for e in second]
        assert model.calls == 2 and model.clock.now == 2.0
        return types

    streamed = ["start", "text_start", "text_delta", "text_end", "done"]
    assert asyncio.run(go()) == [*streamed, "start", "error"]


def test_the_stream_is_an_async_iterator_with_aclose() -> None:
    async def go() -> list[str]:
        model = ScriptedModel(["one two"], chunk_size=3)
        stream = model.stream(context(), StreamOptions(round=1))
        first = await stream.__anext__()  # anext() without async for
        second = await stream.__anext__()
        await stream.aclose()
        await model.stream(context(), StreamOptions(round=2)).aclose()  # never iterated
        return [first.type, second.type]

    assert asyncio.run(go()) == ["start", "text_start"]
