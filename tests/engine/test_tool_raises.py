"""What a tool raises beyond ``Exception`` (issue 22, items 6 and 7).

A ``CancelledError`` the tool raises on its own, with the run neither aborted nor cancelled
from outside, is an error like any other: an ``is_error`` result (``error_kind: raised``)
and the loop goes on. Any other ``BaseException`` that is not an ``Exception``
(``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``, a subclass of the user's) is not
the tool's error to show the model: the call gets its result, the calls after it are
answered as not run, the turn closes, exactly one ``agent_end`` says ``error``, and then the
exception leaves ``exec`` (or ``Agent.prompt``) as it is."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from _support import LAST_TURN_STOPS, OPENING, compact, ended_by_first_reply, make_runtime, tool

from openprogram import Agent, ModelError, RunAbortedError
from openprogram.providers import Context, StreamOptions
from openprogram.types import ToolResultMessage
from openprogram_sim.models import ScriptedModel
from openprogram_sim.trace import TraceRecorder

NOOP = tool("noop", lambda: "ok")


class Boom(BaseException):
    """A BaseException of the user's (as pytest's ``Failed`` or trio's ``Cancelled``)."""


def ends(trace: list[dict[str, Any]]) -> list[tuple[str, bool, str | None, str]]:
    """``(tool, is_error, error_kind, result)`` of each ``tool_execution_end``."""
    return [
        (e["tool_name"], e["is_error"], e["error_kind"], e["result"])
        for e in trace
        if e["type"] == "tool_execution_end"
    ]


ONE_ROUND_OF_TWO_CALLS = [
    *OPENING,
    "message_end:assistant[t,noop]/toolUse",
    "tool_start:t",
    "tool_end:t:error",
    "message_start:toolResult",
    "message_end:toolResult",
    "tool_start:noop",
]


# -- CancelledError raised by the tool itself (item 6) ----------------------------------


async def async_raises_cancelled() -> str:
    raise asyncio.CancelledError


def sync_raises_cancelled() -> str:
    raise asyncio.CancelledError


async def awaits_a_cancelled_task() -> str:
    # the common way it happens: awaiting work that someone else cancelled
    inner = asyncio.ensure_future(asyncio.sleep(3600))
    inner.cancel()
    await inner
    return "unreachable"


@pytest.mark.parametrize(
    "fn", [async_raises_cancelled, sync_raises_cancelled, awaits_a_cancelled_task]
)
def test_a_tool_raising_cancelled_error_itself_is_an_error_result_and_the_loop_goes_on(
    fn: Callable[[], Any],
) -> None:
    runtime, model, rec = make_runtime([{"tool_calls": [{"t": {}}, {"noop": {}}]}, "recovered"])
    assert runtime.exec("go", tools=[tool("t", fn), NOOP]) == "recovered"
    assert compact(rec.trace) == [
        *ONE_ROUND_OF_TWO_CALLS,
        "tool_end:noop:ok",  # the next call of the batch still runs
        "message_start:toolResult",
        "message_end:toolResult",
        *LAST_TURN_STOPS,
    ]
    assert ends(rec.trace) == [
        ("t", True, "raised", "CancelledError raised by the tool"),
        ("noop", False, None, "ok"),
    ]
    sent = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert [(m.text, m.is_error) for m in sent] == [
        ("CancelledError raised by the tool", True),
        ("ok", False),
    ]


def test_the_message_of_a_tool_s_own_cancelled_error_is_kept() -> None:
    def closed() -> str:
        raise asyncio.CancelledError("rate feed closed")

    runtime, _, rec = make_runtime([{"tool_calls": [{"t": {}}]}, "done"])
    assert runtime.exec("go", tools=[tool("t", closed)]) == "done"
    assert ends(rec.trace) == [
        ("t", True, "raised", "CancelledError raised by the tool: rate feed closed")
    ]
    assert rec.trace[-1]["reason"] == "stop"


def test_a_tool_that_raises_cancelled_error_after_the_abort_is_cancelled() -> None:
    """With the abort signal set, a CancelledError is the abort, whoever raised it."""
    box: dict[str, Any] = {}

    def aborts_then_raises() -> str:
        box["runtime"].abort()
        raise asyncio.CancelledError

    runtime, model, rec = make_runtime([{"tool_calls": [{"t": {}}, {"noop": {}}]}, "never"])
    box["runtime"] = runtime
    with pytest.raises(RunAbortedError):
        runtime.exec("go", tools=[tool("t", aborts_then_raises), NOOP])
    assert model.calls == 1
    assert ends(rec.trace) == [
        ("t", True, "cancelled", "Cancelled"),
        ("noop", True, "skipped", "Not run: the run was aborted."),
    ]
    assert [e["type"] for e in rec.trace].count("agent_end") == 1
    assert rec.trace[-1]["reason"] == "aborted"


def test_a_timeout_around_the_run_still_cancels_a_tool_that_awaits() -> None:
    """A cancellation from outside (``asyncio.wait_for``) is not the tool's own: the call is
    ``cancelled``, the run ends ``aborted`` and the cancellation reaches the caller."""

    async def waits() -> str:
        await asyncio.Event().wait()
        return "never"

    model = ScriptedModel([{"tool_calls": [{"t": {}}, {"noop": {}}]}, "never"])
    agent = Agent(model, tools=[tool("t", waits), NOOP])
    rec = TraceRecorder()
    agent.subscribe(rec)

    async def main() -> None:
        await asyncio.wait_for(agent.prompt("go"), timeout=0.05)

    with pytest.raises(TimeoutError):
        asyncio.run(main())
    assert ends(rec.trace) == [
        ("t", True, "cancelled", "Cancelled"),
        ("noop", True, "skipped", "Not run: the run was aborted."),
    ]
    assert compact(rec.trace)[-2:] == ["turn_end", "agent_end:aborted"]
    assert agent.state.error is None and not agent.state.is_streaming


class CancelsItself:
    """A provider that raises CancelledError on its own (no abort, no cancellation)."""

    async def stream(self, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
        raise asyncio.CancelledError("pool closed")
        yield  # an async generator, as providers are


def test_a_provider_raising_cancelled_error_itself_is_a_model_error() -> None:
    agent = Agent(CancelsItself())
    rec = TraceRecorder()
    agent.subscribe(rec)
    result = asyncio.run(agent.prompt("go"))
    assert result.reason == "error"
    assert isinstance(result.error, asyncio.CancelledError)
    assert result.final is not None and result.final.error_message == (
        "Provider raised CancelledError: pool closed on its own (the run was not cancelled)"
    )
    assert compact(rec.trace) == ended_by_first_reply("error")


def test_exec_over_a_provider_raising_cancelled_error_raises_model_error() -> None:
    from openprogram import Runtime, ToolRegistry

    runtime = Runtime(provider=CancelsItself(), registry=ToolRegistry())
    with pytest.raises(ModelError, match="Provider raised CancelledError"):
        runtime.exec("go", tools=[])


# -- other BaseExceptions (item 7) -------------------------------------------------------


def raising(exc: BaseException, *, is_async: bool) -> Callable[[], Any]:
    if is_async:

        async def async_tool() -> str:
            raise exc

        return async_tool

    def sync_tool() -> str:
        raise exc

    return sync_tool


BASE_EXCEPTIONS = [
    pytest.param(lambda: KeyboardInterrupt(), "KeyboardInterrupt", id="KeyboardInterrupt"),
    pytest.param(lambda: SystemExit(3), "SystemExit: 3", id="SystemExit"),
    pytest.param(lambda: GeneratorExit(), "GeneratorExit", id="GeneratorExit"),
    pytest.param(lambda: Boom("past except Exception"), "Boom: past except Exception", id="own"),
]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(("make", "text"), BASE_EXCEPTIONS)
def test_a_base_exception_from_a_tool_ends_the_run_once_and_leaves_exec(
    make: Callable[[], BaseException], text: str, is_async: bool
) -> None:
    exc = make()
    runtime, model, rec = make_runtime([{"tool_calls": [{"t": {}}, {"noop": {}}]}, "never"])
    with pytest.raises(type(exc)) as info:
        runtime.exec("go", tools=[tool("t", raising(exc, is_async=is_async)), NOOP])
    assert info.value is exc
    assert model.calls == 1
    assert compact(rec.trace) == [
        *ONE_ROUND_OF_TWO_CALLS,
        "tool_end:noop:error",  # answered, never run
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "agent_end:error",
    ]
    assert ends(rec.trace) == [
        ("t", True, "raised", text),
        ("noop", True, "skipped", "Not run: the run ended on an error."),
    ]
    assert rec.trace[-2]["tool_results"] == 2


def test_a_base_exception_from_a_tool_of_a_nested_exec_ends_both_runs() -> None:
    """The nested exec runs in a worker thread: the exception crosses it, and each run ends
    with its own agent_end (error)."""
    box: dict[str, Any] = {}

    def inner() -> str:
        raise Boom("deep")

    def outer() -> str:
        return str(box["runtime"].exec("nested", tools=[tool("inner", inner)]))

    runtime, model, rec = make_runtime(
        [{"tool_calls": [{"outer": {}}]}, {"tool_calls": [{"inner": {}}]}, "never"]
    )
    box["runtime"] = runtime
    with pytest.raises(Boom, match="deep"):
        runtime.exec("go", tools=[tool("outer", outer)])
    assert model.calls == 2
    agent_ends = [(e["depth"], e["reason"]) for e in rec.trace if e["type"] == "agent_end"]
    assert agent_ends == [(1, "error"), (0, "error")]
    assert ends(rec.trace) == [
        ("inner", True, "raised", "Boom: deep"),
        ("outer", True, "raised", "Boom: deep"),
    ]
    assert rec.trace[-1]["type"] == "agent_end"


def test_the_agent_after_a_base_exception_from_a_tool_can_prompt_again() -> None:
    def bail() -> str:
        raise SystemExit("user quit")

    model = ScriptedModel([{"tool_calls": [{"t": {}}, {"noop": {}}]}, "back again"])
    agent = Agent(model, tools=[tool("t", bail), NOOP])
    rec = TraceRecorder()
    agent.subscribe(rec)
    with pytest.raises(SystemExit, match="user quit"):
        asyncio.run(agent.prompt("go"))
    assert not agent.state.is_streaming and not agent.state.pending_tool_calls
    assert agent.state.error == "SystemExit: user quit"
    assert [e["type"] for e in rec.trace].count("agent_end") == 1
    assert rec.trace[-1]["reason"] == "error"
    # the history answers every call, so the next prompt sends a valid conversation
    result = asyncio.run(agent.prompt("again"))
    assert result.reason == "stop" and agent.state.error is None
    sent = model.requests[1].messages
    assert [(m.tool_name, m.text) for m in sent if isinstance(m, ToolResultMessage)] == [
        ("t", "SystemExit: user quit"),
        ("noop", "Not run: the run ended on an error."),
    ]
