"""The loop's own costs per round (issue 28 goal 5) come from shortcuts; what a user sees
stays as it was: a provider stream with its events ready is read as any other stream, an
agent and its history go by reference counting, a tool dict passed again is adapted once
unless it changed, and an exec that sets no options sees the runtime's current ones."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from _support import compact

from openprogram import Agent, ArgumentTypeError, Runtime, ToolRegistry
from openprogram.events import ProviderEvent
from openprogram.providers import Context, MessageBuilder, StreamOptions
from openprogram.providers.base import ReadyStream
from openprogram.tools import as_tool
from openprogram_sim.models import ScriptedModel
from openprogram_sim.trace import TraceRecorder


def reply_events(call: int) -> list[ProviderEvent]:
    """Call 1 picks the tool ``t`` (its arguments streamed in two pieces); call 2 answers."""
    b = MessageBuilder(api="own", model="own")
    events: list[ProviderEvent] = [b.start()]
    if call == 1:
        events += [b.toolcall_start("c1", "t"), b.toolcall_delta('{"x"'), b.toolcall_delta(": 1}")]
        events.append(b.toolcall_end())
    else:
        events += [b.text_start(), b.text_delta("done"), b.text_end()]
    return [*events, b.done()]


class Ready(ReadyStream):
    def __init__(self, events: list[ProviderEvent] | None, log: list[Any]) -> None:
        self.events, self.log = events, log

    def ready(self, pieces: bool = True) -> Iterator[ProviderEvent] | None:
        self.log.append(("ready", pieces))
        return None if self.events is None else iter(self.events)

    def __aiter__(self) -> AsyncIterator[ProviderEvent]:
        async def gen() -> AsyncIterator[ProviderEvent]:
            for event in self.events or []:
                yield event

        self.log.append("async for")
        return gen()


class Provider:
    """Streams :func:`reply_events` as a plain async generator, or as a :class:`Ready`
    stream (``ready``: its iterator; ``declines``: ``ready()`` says None, iterate async)."""

    def __init__(self, how: str) -> None:
        self.how, self.calls, self.log = how, 0, []

    def stream(self, context: Context, options: StreamOptions) -> Any:
        self.calls += 1
        events = reply_events(self.calls)
        if self.how == "ready":
            return Ready(events, self.log)
        if self.how == "declines":
            return _Declines(events, self.log)
        return _gen(events)


class _Declines(Ready):
    def ready(self, pieces: bool = True) -> None:
        self.log.append(("ready", pieces))
        return None


async def _gen(events: list[ProviderEvent]) -> AsyncIterator[ProviderEvent]:
    for event in events:
        yield event


def run_with(how: str, *, updates: bool) -> tuple[list[str], list[Any], int]:
    provider = Provider(how)
    runtime = Runtime(provider=provider, registry=ToolRegistry())
    recorder = TraceRecorder()
    runtime.subscribe(recorder)
    pieces: list[str] = []
    if updates:  # a listener that reads message_update (a trace recorder does not)
        runtime.subscribe(
            lambda e: pieces.append(e.event.type) if e.type == "message_update" else None
        )
    tool = {"spec": {"name": "t", "parameters": {"type": "object"}}, "execute": lambda x: x + 1}
    assert runtime.exec("go", tools=[tool]) == "done"
    return compact(recorder.trace), provider.log, len(pieces)


@pytest.mark.parametrize("updates", [True, False])
def test_a_ready_stream_gives_the_run_the_events_an_async_stream_gives(updates: bool) -> None:
    plain, _, plain_updates = run_with("async", updates=updates)
    ready, log, ready_updates = run_with("ready", updates=updates)
    declined, declined_log, declined_updates = run_with("declines", updates=updates)
    assert ready == plain == declined
    assert ready_updates == plain_updates == declined_updates == (7 if updates else 0)
    # asked once per call, with whether a listener reads the pieces
    assert log == [("ready", updates), ("ready", updates)]
    assert declined_log == [("ready", updates), "async for", ("ready", updates), "async for"]


def test_a_ready_stream_that_raises_is_the_providers_error() -> None:
    class Raises(ReadyStream):
        def ready(self, pieces: bool = True) -> Iterator[ProviderEvent] | None:
            def events() -> Iterator[ProviderEvent]:
                b = MessageBuilder(api="own", model="own")
                yield b.start()
                b.text_start()
                raise RuntimeError("lost the script")

            return events()

    class Provider:
        def stream(self, context: Context, options: StreamOptions) -> Raises:
            return Raises()

    result = asyncio.run(Agent(Provider()).prompt("go"))
    assert result.reason == "error" and result.final is not None
    assert result.final.error_message == "Provider raised RuntimeError: lost the script"
    assert [b.type for b in result.final.content] == ["text"]  # the partial as it got


def test_the_base_ready_stream_has_no_ready_events() -> None:
    stream = ReadyStream()
    assert stream.ready() is None and stream.ready(False) is None
    with pytest.raises(NotImplementedError):
        stream.__aiter__()


def test_an_agent_and_its_history_go_without_the_cycle_collector() -> None:
    agent = Agent(ScriptedModel(["hi"]))
    asyncio.run(agent.prompt("go"))
    gone, model = weakref.ref(agent), weakref.ref(agent.provider)
    gc.disable()
    try:
        del agent
        assert gone() is None and model() is None  # the model the history was held with
    finally:
        gc.enable()


def test_before_finish_is_asked_through_the_agent_attribute() -> None:
    agent = Agent(ScriptedModel(["first", "second"]))
    asked: list[str] = []

    def once(last: Any) -> list[Any]:
        asked.append(last.text)
        agent.before_finish = None
        return [agent_message("again")]

    agent.before_finish = once
    assert agent.before_finish is once
    result = asyncio.run(agent.prompt("go"))
    assert asked == ["first"] and result.final is not None and result.final.text == "second"
    assert agent.before_finish is None


def agent_message(text: str) -> Any:
    from openprogram.types import UserMessage

    return UserMessage.of(text)


def test_a_tool_dict_passed_again_is_adapted_once_unless_it_changed() -> None:
    def add(a: int) -> int:
        return a + 1

    spec = {"name": "add", "description": "Add one.", "parameters": {"type": "object"}}
    entry: dict[str, Any] = {"spec": spec, "execute": add}
    first = as_tool(entry)
    assert as_tool(entry) is first
    spec["description"] = "Add one, again."
    changed = as_tool(entry)
    assert changed is not first and changed.spec.description == "Add one, again."
    entry["execute"] = lambda a: a + 2
    assert as_tool(entry) is not changed and as_tool(entry).run("c", {"a": 1}, None, None) == 3
    entry["spec"] = changed.spec  # a ToolSpec object as the spec
    kept = as_tool(entry)
    assert as_tool(entry) is kept and kept.spec is changed.spec
    gated = {**entry, "defer": True}  # a gate key: adapted each time, gates read
    assert as_tool(gated) is not as_tool(gated) and as_tool(gated).gates.defer


def test_an_exec_without_options_of_its_own_sees_the_runtimes_current_ones() -> None:
    seen: list[tuple[Any, Any]] = []

    class Model(ScriptedModel):
        def stream(self, context: Context, options: StreamOptions) -> Any:
            seen.append((options.max_tokens, options.temperature))
            return super().stream(context, options)

    runtime = Runtime(provider=Model(["a", "b", "c"]), registry=ToolRegistry(), max_tokens=5)
    runtime.exec("one")
    runtime.temperature = 0.5
    runtime.exec("two")
    runtime.max_tokens = 7
    runtime.exec("three")
    assert seen == [(5, None), (5, 0.5), (7, 0.5)]
    runtime.max_tokens = True  # type: ignore[assignment]
    with pytest.raises(ArgumentTypeError, match="max_tokens=True"):
        runtime.exec("four")


def test_a_system_prompt_changed_mid_run_reaches_the_next_model_call() -> None:
    model = ScriptedModel([{"tool_calls": [{"t": {}}]}, "done"])
    agent = Agent(model, system_prompt="before", tools=[tool_t()])

    def change(event: Any) -> None:
        if event.type == "tool_execution_end":
            agent.state.context.system_prompt = "after"

    agent.subscribe(change)
    asyncio.run(agent.prompt("go"))
    assert [r.system_prompt for r in model.requests] == ["before", "after"]


def tool_t() -> dict[str, Any]:
    return {"spec": {"name": "t"}, "execute": lambda: "ok"}
