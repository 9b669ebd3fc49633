"""What a provider's stream raises beyond ``Exception`` (issue 23, item 10).

Whatever the provider raises, and wherever in its stream, the run ends with exactly one
``agent_end``, last, with every message and turn it opened closed. A ``CancelledError`` the
provider raises on its own, with the run neither aborted nor cancelled from outside, is an
``error`` stop (``exec`` raises :class:`ModelError`); one raised after the abort is the
abort. Any other ``BaseException`` that is not an ``Exception`` (``GeneratorExit``,
``KeyboardInterrupt``, ``SystemExit``, a subclass of the user's) ends the run as on an error
and then leaves ``exec``, ``aexec`` and ``Agent.prompt`` unchanged, as a tool's does
(docs/loop.md, deliberate choices)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from _support import OPENING, compact, ended_by_first_reply, one_call, tool

from openprogram import Agent, ModelError, RunAbortedError, Runtime, ToolRegistry
from openprogram.providers import Context, StreamOptions
from openprogram_sim.models import ScriptedModel
from openprogram_sim.trace import TraceRecorder


class Boom(BaseException):
    """A BaseException of the user's (as trio's ``Cancelled``)."""


class RaisesInStream:
    """Streams the scripted turns; on call ``call`` (1-based) it raises ``exc`` after
    ``after`` of its events (0: before the first)."""

    def __init__(
        self, turns: list[Any], exc: BaseException, *, call: int = 1, after: int = 0
    ) -> None:
        self.model = ScriptedModel(turns)
        self.exc, self.call, self.after = exc, call, after
        self.calls = 0
        self.before_raising: Callable[[], None] = lambda: None

    async def stream(self, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
        self.calls += 1
        raising = self.calls == self.call
        sent = 0
        async for event in self.model.stream(context, options):
            if raising and sent == self.after:
                self.before_raising()
                raise self.exc
            sent += 1
            yield event


def runtime_over(provider: Any) -> tuple[Runtime, TraceRecorder]:
    runtime = Runtime(provider=provider, registry=ToolRegistry())
    rec = TraceRecorder()
    runtime.subscribe(rec)
    return runtime, rec


BASE_EXCEPTIONS = [
    pytest.param(GeneratorExit, id="GeneratorExit"),
    pytest.param(KeyboardInterrupt, id="KeyboardInterrupt"),
    pytest.param(SystemExit, id="SystemExit"),
    pytest.param(Boom, id="own"),
]

WHERE = [pytest.param(0, id="before-the-first-event"), pytest.param(2, id="mid-stream")]


def agent_ends(trace: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(e["depth"], e["reason"]) for e in trace if e["type"] == "agent_end"]


@pytest.mark.parametrize("after", WHERE)
@pytest.mark.parametrize("kind", BASE_EXCEPTIONS)
def test_a_base_exception_from_the_provider_ends_the_run_once_and_leaves_exec(
    kind: type[BaseException], after: int
) -> None:
    exc = kind()
    runtime, rec = runtime_over(RaisesInStream(["hello there, world"], exc, after=after))
    with pytest.raises(kind) as info:
        runtime.exec("go", tools=[])
    assert info.value is exc
    assert compact(rec.trace) == ended_by_first_reply("error")
    assert rec.trace[-2]["type"] == "turn_end"


@pytest.mark.parametrize("kind", BASE_EXCEPTIONS)
def test_a_base_exception_from_the_provider_leaves_aexec_after_one_agent_end(
    kind: type[BaseException],
) -> None:
    exc = kind()
    runtime, rec = runtime_over(RaisesInStream(["hello there, world"], exc, after=1))
    with pytest.raises(kind) as info:
        asyncio.run(runtime.aexec("go", tools=[]))
    assert info.value is exc
    assert compact(rec.trace) == ended_by_first_reply("error")


def test_generator_exit_from_the_provider_in_round_two_closes_that_round() -> None:
    runtime, rec = runtime_over(
        RaisesInStream([{"tool_calls": [{"noop": {}}]}, "done"], GeneratorExit(), call=2, after=1)
    )
    with pytest.raises(GeneratorExit):
        runtime.exec("go", tools=[tool("noop", lambda: "ok")])
    assert compact(rec.trace) == [
        *OPENING,
        *one_call("noop"),
        "turn_end",
        "turn_start",
        "message_start:assistant",
        "message_end:assistant[]/error",
        "turn_end",
        "agent_end:error",
    ]


@pytest.mark.parametrize("nested", ["exec", "aexec"])
def test_generator_exit_from_the_provider_of_a_nested_exec_ends_both_runs(nested: str) -> None:
    box: dict[str, Runtime] = {}

    def outer() -> str:
        return str(box["runtime"].exec("nested", tools=[]))

    async def aouter() -> str:
        return str(await box["runtime"].aexec("nested", tools=[]))

    provider = RaisesInStream(
        [{"tool_calls": [{"outer": {}}]}, "inner", "never"], GeneratorExit(), call=2, after=1
    )
    runtime, rec = runtime_over(provider)
    box["runtime"] = runtime
    with pytest.raises(GeneratorExit):
        runtime.exec("go", tools=[tool("outer", outer if nested == "exec" else aouter)])
    assert provider.calls == 2
    assert compact(rec.trace, depth=True) == [
        *OPENING,
        "message_end:assistant[outer]/toolUse",
        "tool_start:outer",
        *(f"  {e}" for e in ended_by_first_reply("error")),
        "tool_end:outer:error",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "agent_end:error",
    ]
    assert agent_ends(rec.trace) == [(1, "error"), (0, "error")]


@pytest.mark.parametrize("kind", BASE_EXCEPTIONS)
def test_the_agent_after_a_base_exception_from_the_provider_can_prompt_again(
    kind: type[BaseException],
) -> None:
    agent = Agent(RaisesInStream(["hello there, world", "back again"], kind(), after=1))
    rec = TraceRecorder()
    agent.subscribe(rec)
    with pytest.raises(kind):
        asyncio.run(agent.prompt("go"))
    assert compact(rec.trace) == ended_by_first_reply("error")
    assert not agent.state.is_streaming
    assert agent.state.error == kind.__name__
    result = asyncio.run(agent.prompt("again"))
    assert result.reason == "stop"


@pytest.mark.parametrize("after", WHERE)
def test_a_provider_s_own_cancelled_error_is_a_model_error_from_exec(after: int) -> None:
    runtime, rec = runtime_over(
        RaisesInStream(["hello there, world"], asyncio.CancelledError("pool closed"), after=after)
    )
    with pytest.raises(ModelError) as info:
        runtime.exec("go", tools=[])
    assert str(info.value) == (
        "Provider raised CancelledError: pool closed on its own (the run was not cancelled)"
    )
    assert compact(rec.trace) == ended_by_first_reply("error")


def test_a_provider_s_own_cancelled_error_is_a_model_error_from_aexec() -> None:
    runtime, rec = runtime_over(
        RaisesInStream(["hello there, world"], asyncio.CancelledError(), after=1)
    )
    with pytest.raises(ModelError, match="Provider raised CancelledError on its own"):
        asyncio.run(runtime.aexec("go", tools=[]))
    assert compact(rec.trace) == ended_by_first_reply("error")


def test_a_provider_s_cancelled_error_after_the_abort_is_the_abort() -> None:
    provider = RaisesInStream(["hello there, world"], asyncio.CancelledError(), after=1)
    runtime, rec = runtime_over(provider)
    provider.before_raising = runtime.abort
    with pytest.raises(RunAbortedError):
        runtime.exec("go", tools=[])
    assert compact(rec.trace) == ended_by_first_reply("aborted")
