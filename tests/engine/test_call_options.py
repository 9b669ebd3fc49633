"""Each model call's ``StreamOptions`` (issue 28 goal 5): the loop renews the last call's
options in place when nothing but the run holds them, and builds new ones otherwise. What a
provider sees is the same either way: every call's options carry the run's options, its
cancel signal, its depth and the call's round, with an empty ``extra``; options (or an
``extra``) a provider kept are never changed afterwards."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import fields
from typing import Any

from _support import compact

from openprogram import Agent, Runtime, ToolRegistry
from openprogram.events import ProviderEvent
from openprogram.providers import Context, MessageBuilder, RunOptions, StreamOptions
from openprogram_sim.trace import TraceRecorder

ROUNDS = 4
RUN_OPTIONS = RunOptions(
    tool_choice="auto", parallel_tool_calls=False, max_iterations=10, temperature=0.5
)


def echo(x: int) -> int:
    return x


TOOL = {
    "spec": {
        "name": "echo",
        "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}},
    },
    "execute": echo,
}


class Provider:
    """Calls 1..ROUNDS-1 pick ``echo``, the last one answers; ``look(options)`` is called
    with each call's options as the call starts (it may keep them, or write into them)."""

    def __init__(self, look: Callable[[StreamOptions], None]) -> None:
        self.look = look
        self.calls = 0
        self.ids: list[int] = []
        self.seen: list[tuple[Any, ...]] = []

    async def stream(self, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
        self.calls += 1
        self.ids.append(id(options))
        self.seen.append(snapshot(options))
        self.look(options)
        for event in reply(self.calls):
            yield event


def snapshot(options: StreamOptions) -> tuple[Any, ...]:
    """The options' fields (``extra`` copied: holding it would keep the options new)."""
    return tuple(
        dict(value) if f.name == "extra" else value
        for f in fields(options)
        for value in (getattr(options, f.name),)
    )


def reply(call: int) -> list[ProviderEvent]:
    b = MessageBuilder(api="own", model="own")
    events: list[ProviderEvent] = [b.start()]
    if call < ROUNDS:
        events += [b.toolcall_start(f"c{call}", "echo"), b.toolcall_delta('{"x": 1}')]
        events.append(b.toolcall_end())
    else:
        events += [b.text_start(), b.text_delta("done"), b.text_end()]
    return [*events, b.done()]


def expected(signal: Any, depth: int = 0) -> list[tuple[Any, ...]]:
    """What ``StreamOptions.of`` gives for each call of a run."""
    rows = []
    for round in range(1, ROUNDS + 1):
        made = StreamOptions.of(RUN_OPTIONS, cancel=signal, depth=depth, round=round)
        rows.append(snapshot(made))
    return rows


def run(provider: Provider) -> Any:
    agent = Agent(provider, tools=[TOOL], options=RUN_OPTIONS)
    result = asyncio.run(agent.prompt("go"))
    assert result.reason == "stop" and result.rounds == ROUNDS
    return result


def signal_of(provider: Provider) -> Any:
    return provider.seen[0][[f.name for f in fields(StreamOptions)].index("cancel")]


def test_options_nobody_keeps_are_renewed_and_read_as_new_ones() -> None:
    provider = Provider(lambda options: None)
    run(provider)
    assert provider.seen == expected(signal_of(provider))
    assert len(set(provider.ids)) == 1  # one object, its round moved on each call


def test_options_a_provider_keeps_are_never_changed() -> None:
    kept: list[StreamOptions] = []
    provider = Provider(kept.append)
    run(provider)
    assert [k.round for k in kept] == [1, 2, 3, 4]  # each as it was at its call
    assert [snapshot(k) for k in kept] == expected(signal_of(provider))
    assert len({id(k) for k in kept}) == ROUNDS


def test_a_kept_extra_is_not_handed_out_again() -> None:
    extras: list[dict[str, Any]] = []
    provider = Provider(lambda options: extras.append(options.extra))
    run(provider)
    assert extras == [{}] * ROUNDS
    assert len({id(e) for e in extras}) == ROUNDS  # a fresh dict each call
    assert provider.seen == expected(signal_of(provider))


def test_an_extra_written_into_does_not_reach_the_next_call() -> None:
    def write(options: StreamOptions) -> None:
        assert options.extra == {}, options.extra
        options.extra["seen"] = options.round

    provider = Provider(write)
    run(provider)  # write() asserts each call's extra is empty: a failure ends the run
    assert [row[:-1] for row in provider.seen] == [
        row[:-1] for row in expected(signal_of(provider))
    ]
    assert len(set(provider.ids)) == ROUNDS  # written into: never renewed


def test_nested_runs_get_their_own_depth_and_rounds() -> None:
    rounds: list[tuple[int, int]] = []

    class Nested:
        """Outer call 1 picks ``inner``, which runs a nested exec of ROUNDS calls."""

        def __init__(self) -> None:
            self.outer = 0
            self.inner = 0

        async def stream(self, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
            rounds.append((options.depth, options.round))
            if options.depth == 0:
                self.outer += 1
                b = MessageBuilder(api="own", model="own")
                events = [b.start()]
                if self.outer == 1:
                    events += [b.toolcall_start("o1", "inner"), b.toolcall_delta("{}")]
                    events.append(b.toolcall_end())
                else:
                    events += [b.text_start(), b.text_delta("outer done"), b.text_end()]
                events.append(b.done())
            else:
                self.inner += 1
                events = reply(self.inner)
            for event in events:
                yield event

    runtime = Runtime(provider=Nested(), registry=ToolRegistry())

    async def inner(runtime: Runtime) -> str:
        return await runtime.aexec("inner work", tools=[TOOL])

    tool = {"spec": {"name": "inner"}, "execute": inner}
    assert asyncio.run(runtime.aexec("go", tools=[tool])) == "outer done"
    assert rounds == [(0, 1), (1, 1), (1, 2), (1, 3), (1, 4), (0, 2)]


def traced(keep: bool) -> list[dict[str, Any]]:
    kept: list[StreamOptions] = []
    provider = Provider(kept.append if keep else (lambda options: None))
    recorder = TraceRecorder()
    agent = Agent(provider, tools=[TOOL], options=RUN_OPTIONS)
    agent.subscribe(recorder)
    asyncio.run(agent.prompt("go"))
    assert len({id(k) for k in kept}) == (ROUNDS if keep else 0)
    return recorder.trace


def test_the_trace_is_the_same_whether_options_are_kept_or_not() -> None:
    renewed, kept = traced(False), traced(True)
    volatile = ("timestamp", "run_id", "duration_ms", "time")
    strip = [[(k, v) for k, v in e.items() if k not in volatile] for e in renewed]
    assert strip == [[(k, v) for k, v in e.items() if k not in volatile] for e in kept]
    tool_round = [
        "turn_start", "message_start:assistant", "message_end:assistant[echo]/toolUse",
        "tool_start:echo", "tool_end:echo:ok", "message_start:toolResult",
        "message_end:toolResult", "turn_end",
    ]  # fmt: skip
    assert compact(renewed) == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        *tool_round[1:],
        *tool_round * (ROUNDS - 2),
        "turn_start",
        "message_start:assistant",
        "message_end:assistant[]/stop",
        "turn_end",
        "agent_end:stop",
    ]
