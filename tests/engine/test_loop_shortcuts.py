"""The loop's hot path takes shortcuts for the common case (issue 28 item 5); the uncommon
cases they step around still behave: message sources that are async or return another
sequence than a list, a provider whose options class is a subclass, a tool returning an
awaitable from a sync function."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from _support import compact, tool

from openprogram.agent import AgentContext, LoopConfig, run_agent_loop
from openprogram.events import ProviderEvent
from openprogram.providers import Context, RunOptions, StreamOptions
from openprogram.tools import as_tool
from openprogram.types import UserMessage
from openprogram_sim.models import ScriptedModel
from openprogram_sim.trace import TraceRecorder


def test_async_and_tuple_message_sources_are_polled_every_round() -> None:
    """A steering source that is async and a follow-up source that returns a tuple: both
    are awaited / taken as lists, after every round and when the model would finish."""
    steering = [UserMessage.of("steer")]
    follow_ups = [UserMessage.of("also this")]
    polled: list[str] = []

    async def steer() -> list[UserMessage]:
        polled.append("steering")
        return [steering.pop()] if steering and len(polled) > 1 else []

    def follow() -> tuple[UserMessage, ...]:
        polled.append("follow_up")
        return (follow_ups.pop(),) if follow_ups else ()

    model = ScriptedModel([{"tool_calls": [{"noop": {}}]}, "after steering", "after follow-up"])
    config = LoopConfig(provider=model, get_steering_messages=steer, get_follow_up_messages=follow)
    context = AgentContext(tools=[as_tool(tool("noop", lambda: "ok"))])
    rec = TraceRecorder()
    result = asyncio.run(run_agent_loop([UserMessage.of("go")], context, config, [rec]))
    assert result.reason == "stop"
    assert [m.text for m in model.requests[1].messages][-1] == "steer"
    assert [m.text for m in model.requests[2].messages][-1] == "also this"
    origins = [e["origin"] for e in rec.trace if e["type"] == "message_end" and e["role"] == "user"]
    assert origins == ["prompt", "steering", "follow_up"]
    assert compact(rec.trace).count("agent_end:stop") == 1


@dataclass(frozen=True, slots=True, kw_only=True)
class TaggedOptions(StreamOptions):
    tag: str = "mine"


def test_stream_options_of_a_subclass_builds_it_whole() -> None:
    run = RunOptions(tool_choice="required", max_iterations=3, temperature=0.2)
    made = TaggedOptions.of(run, cancel=None, depth=1, round=2)
    assert type(made) is TaggedOptions
    assert (made.tag, made.tool_choice, made.max_iterations, made.depth, made.round) == (
        "mine",
        "required",
        3,
        1,
        2,
    )
    plain = StreamOptions.of(run, cancel=None, depth=1, round=2)
    assert plain == StreamOptions(
        tool_choice="required", max_iterations=3, temperature=0.2, depth=1, round=2
    )
    assert (
        plain.extra == {}
        and plain.extra is not StreamOptions.of(run, cancel=None, depth=0, round=1).extra
    )


def test_a_sync_tool_returning_a_coroutine_has_it_awaited() -> None:
    async def later() -> str:
        await asyncio.sleep(0)
        return "awaited"

    def starts_later() -> Any:
        return later()

    async def failing() -> str:
        raise LookupError("no such row")

    def starts_failing() -> Any:
        return failing()

    model = ScriptedModel([{"tool_calls": [{"a": {}}, {"b": {}}]}, "done"])
    config = LoopConfig(provider=model)
    context = AgentContext(
        tools=[as_tool(tool("a", starts_later)), as_tool(tool("b", starts_failing))]
    )
    rec = TraceRecorder()
    asyncio.run(run_agent_loop([UserMessage.of("go")], context, config, [rec]))
    ends = [(e["result"], e["error_kind"]) for e in rec.trace if e["type"] == "tool_execution_end"]
    assert ends == [("awaited", None), ("no such row", "raised")]


class CountingProvider:
    """A provider of our own (not the scripted one): its stream sees the options built for
    each call."""

    def __init__(self) -> None:
        self.seen: list[StreamOptions] = []
        self.inner = ScriptedModel(["hi"])

    def stream(self, context: Context, options: StreamOptions) -> AsyncIterator[ProviderEvent]:
        self.seen.append(options)
        return self.inner.stream(context, options)


def test_each_model_call_gets_the_runs_options() -> None:
    provider = CountingProvider()
    options = RunOptions(tool_choice="none", parallel_tool_calls=False, max_tokens=7)
    config = LoopConfig(provider=provider, options=options, depth=2)
    asyncio.run(run_agent_loop([UserMessage.of("go")], AgentContext(), config))
    (seen,) = provider.seen
    assert (
        seen.tool_choice,
        seen.parallel_tool_calls,
        seen.max_tokens,
        seen.depth,
        seen.round,
    ) == (
        "none",
        False,
        7,
        2,
        1,
    )
    assert seen.cancel is not None and not seen.cancel.is_set()
