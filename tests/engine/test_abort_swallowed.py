"""A tool that catches the run's ``CancelledError`` and carries on does not use up the abort
(issue 23, item 12): when it returns, the loop sees that the run was aborted (or its task
cancelled) and ends it ``aborted``; while it goes on awaiting, a second ``abort()`` cancels
it again. Nothing is left counted against the caller's task afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from _support import OPENING, compact, make_runtime, tool

from openprogram import Agent, RunAbortedError, Runtime
from openprogram.agent import ABORTED_TEXT
from openprogram.types import ToolResultMessage
from openprogram_sim.models import ScriptedModel
from openprogram_sim.trace import TraceRecorder

STUBBORN_TWICE = [
    {"tool_calls": [{"stubborn": {}}, {"noop": {}}]},
    {"tool_calls": [{"stubborn": {}}]},
    "never sent",
]
"""The model calls the swallowing tool (and one more); a run that went on would call it
again and then finish."""

# The swallowing tool returned its value; the call after it never runs and the run ends.
SWALLOWED_THEN_ABORTED = [
    *OPENING,
    "message_end:assistant[stubborn,noop]/toolUse",
    "tool_start:stubborn",
    "tool_end:stubborn:ok",
    "message_start:toolResult",
    "message_end:toolResult",
    "tool_start:noop",
    "tool_end:noop:error",
    "message_start:toolResult",
    "message_end:toolResult",
    "turn_end",
    "agent_end:aborted",
]


def noop() -> str:
    return "ok"


NOOP = tool("noop", noop)


class Stubborn:
    """An async tool that catches the first ``CancelledError`` and carries on: it returns
    ``"carried on"`` (``then_wait=False``), or awaits again until cancelled once more."""

    def __init__(self, *, then_wait: bool = False) -> None:
        self.started = asyncio.Event()
        self.swallowed = asyncio.Event()
        self.then_wait = then_wait
        self.cancels = 0

    async def __call__(self) -> str:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancels += 1
            self.swallowed.set()
        if self.then_wait:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancels += 1
                raise
        return "carried on"

    def entry(self) -> dict[str, Any]:
        return tool("stubborn", self)


def results(messages: list[Any]) -> list[tuple[str, str, bool]]:
    return [(m.tool_name, m.text, m.is_error) for m in messages if isinstance(m, ToolResultMessage)]


def within(seconds: float, main: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """``asyncio.run(main())`` on a thread of its own, failing (not hanging the suite) when it
    does not finish in time."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(main())
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"the run did not end within {seconds}s of the abort")
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_agent_abort_swallowed_by_an_async_tool_ends_the_run_when_it_returns() -> None:
    stubborn = Stubborn()
    model = ScriptedModel(STUBBORN_TWICE)
    agent = Agent(model, tools=[stubborn.entry(), NOOP])
    rec = TraceRecorder()
    agent.subscribe(rec)

    async def main() -> tuple[str, int]:
        task = asyncio.create_task(agent.prompt("go"))
        await stubborn.started.wait()
        agent.abort()
        result = await task
        current = asyncio.current_task()
        assert current is not None
        return result.reason, task.cancelling()

    assert within(5, main) == ("aborted", 0)  # no cancellation left counted on the task
    assert compact(rec.trace) == SWALLOWED_THEN_ABORTED
    assert model.calls == 1
    assert results(agent.state.messages) == [
        ("stubborn", "carried on", False),
        ("noop", ABORTED_TEXT, True),
    ]


def test_after_a_swallowed_abort_the_next_exec_on_the_same_task_runs_normally() -> None:
    """The abort's cancellation, swallowed by the tool, is not left on the caller's task: a
    tool of the next exec that raises ``CancelledError`` on its own is still its own error,
    and that exec finishes."""
    stubborn = Stubborn()

    async def own_cancel() -> str:
        raise asyncio.CancelledError("the tool's own")

    runtime, _, rec = make_runtime(
        [{"tool_calls": [{"stubborn": {}}]}, {"tool_calls": [{"own": {}}]}, "finished"]
    )

    async def abort_when_started() -> None:
        await stubborn.started.wait()
        runtime.abort()

    async def main() -> str:
        aborter = asyncio.ensure_future(abort_when_started())
        with pytest.raises(RunAbortedError):
            await runtime.aexec("first", tools=[stubborn.entry()])
        await aborter
        return str(await runtime.aexec("second", tools=[tool("own", own_cancel)]))

    assert within(5, main) == "finished"
    ends = [
        (e["tool_name"], e["error_kind"]) for e in rec.trace if e["type"] == "tool_execution_end"
    ]
    assert ends == [("stubborn", None), ("own", "raised")]
    assert [e["reason"] for e in rec.trace if e["type"] == "agent_end"] == ["aborted", "stop"]


def test_a_cancelled_task_whose_tool_swallows_it_ends_the_run_and_raises() -> None:
    """``Task.cancel()`` (as ``asyncio.wait_for`` does at its timeout) while a tool awaits: the
    tool swallows it, and when it returns the run ends ``aborted`` and the cancellation goes
    on to the caller. Before, the run went on for two more rounds and returned normally."""
    stubborn = Stubborn()
    model = ScriptedModel(STUBBORN_TWICE)
    agent = Agent(model, tools=[stubborn.entry(), NOOP])
    rec = TraceRecorder()
    agent.subscribe(rec)

    async def main() -> str:
        task = asyncio.create_task(agent.prompt("go"))
        await stubborn.started.wait()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"
        return "returned"

    assert within(5, main) == "cancelled"
    assert compact(rec.trace) == SWALLOWED_THEN_ABORTED
    assert model.calls == 1
    assert not agent.state.is_streaming


def test_wait_for_times_out_a_run_whose_tool_swallows_the_cancellation() -> None:
    stubborn = Stubborn()
    runtime, model, rec = make_runtime(STUBBORN_TWICE)

    async def main() -> None:
        await asyncio.wait_for(runtime.aexec("go", tools=[stubborn.entry(), NOOP]), 0.1)

    with pytest.raises(TimeoutError):
        within(5, main)
    assert stubborn.cancels == 1
    assert compact(rec.trace) == SWALLOWED_THEN_ABORTED
    assert model.calls == 1


def test_a_second_abort_cancels_a_tool_that_swallowed_the_first() -> None:
    """The tool catches the first cancellation and awaits again: the run cannot end yet. A
    second ``abort()`` (here from another thread) cancels it again, and the run ends with the
    call's result ``Cancelled``. Before, the second abort did nothing and the run hung."""
    stubborn = Stubborn(then_wait=True)
    model = ScriptedModel(STUBBORN_TWICE)
    agent = Agent(model, tools=[stubborn.entry(), NOOP])
    rec = TraceRecorder()
    agent.subscribe(rec)

    async def main() -> tuple[str, int]:
        task = asyncio.create_task(agent.prompt("go"))
        await stubborn.started.wait()
        agent.abort()
        await stubborn.swallowed.wait()
        await asyncio.sleep(0.05)
        assert not task.done()  # the tool is awaiting again
        second = threading.Thread(target=agent.abort)
        second.start()
        second.join()
        result = await task
        return result.reason, task.cancelling()

    assert within(5, main) == ("aborted", 0)
    assert stubborn.cancels == 2
    assert compact(rec.trace) == [
        *SWALLOWED_THEN_ABORTED[:6],
        "tool_start:stubborn",
        "tool_end:stubborn:error",
        *SWALLOWED_THEN_ABORTED[8:],
    ]
    assert results(agent.state.messages) == [
        ("stubborn", "Cancelled", True),
        ("noop", ABORTED_TEXT, True),
    ]
    ends = [e["error_kind"] for e in rec.trace if e["type"] == "tool_execution_end"]
    assert ends == ["cancelled", "skipped"]


def test_a_swallowed_abort_inside_a_nested_aexec_of_another_runtime() -> None:
    """The outer runtime's tool awaits an exec on a second runtime (same task). Aborting the
    outer runtime aborts the runs nested under it too, whatever their runtime; the inner tool
    swallows the cancellation. When it returns, the inner run ends ``aborted``, its exec
    raises ``RunAbortedError`` in the outer tool, and the outer run ends ``aborted``. Before,
    the inner run went on for more rounds."""
    stubborn = Stubborn()
    outer, outer_model, rec = make_runtime([{"tool_calls": [{"delegate": {}}]}, "never sent"])
    inner, inner_model, _ = make_runtime(STUBBORN_TWICE)
    inner.subscribe(rec)

    async def delegate() -> str:
        return str(await inner.aexec("dig", tools=[stubborn.entry(), NOOP]))

    async def main() -> int:
        task = asyncio.ensure_future(outer.aexec("go", tools=[tool("delegate", delegate)]))
        await stubborn.started.wait()
        outer.abort()
        with pytest.raises(RunAbortedError):
            await task
        return task.cancelling()

    assert within(5, main) == 0
    assert inner_model.calls == 1 and outer_model.calls == 1
    assert compact(rec.trace, depth=True) == [
        *OPENING,
        "message_end:assistant[delegate]/toolUse",
        "tool_start:delegate",
        *("  " + e for e in SWALLOWED_THEN_ABORTED),
        "tool_end:delegate:error",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "agent_end:aborted",
    ]
    ends = [(e["depth"], e["error_kind"]) for e in rec.trace if e["type"] == "tool_execution_end"]
    assert ends == [(1, None), (1, "skipped"), (0, "raised")]


def test_a_sync_tool_whose_nested_exec_swallows_the_abort() -> None:
    """A sync tool's nested exec runs in a worker thread; its async tool swallows the abort
    and returns. The nested run ends ``aborted`` when it returns, the sync tool gets
    ``RunAbortedError`` and, catching it, returns a value: the outer run ends ``aborted``
    too, with no further model call at either depth."""
    stubborn = Stubborn()
    box: dict[str, Runtime] = {}

    def research() -> str:
        try:
            return str(box["rt"].exec("dig", tools=[stubborn.entry(), NOOP]))
        except RunAbortedError:
            return "research stopped"

    runtime, model, rec = make_runtime(
        [{"tool_calls": [{"research": {}}, {"noop": {}}]}, *STUBBORN_TWICE]
    )
    box["rt"] = runtime

    def abort_when_started() -> None:
        while not stubborn.started.is_set():
            threading.Event().wait(0.005)
        runtime.abort()

    aborter = threading.Thread(target=abort_when_started, daemon=True)
    aborter.start()
    with pytest.raises(RunAbortedError):
        runtime.exec("go", tools=[tool("research", research), NOOP])
    aborter.join(5)
    assert model.calls == 2
    assert compact(rec.trace, depth=True) == [
        *OPENING,
        "message_end:assistant[research,noop]/toolUse",
        "tool_start:research",
        *("  " + e for e in SWALLOWED_THEN_ABORTED),
        "tool_end:research:ok",
        "message_start:toolResult",
        "message_end:toolResult",
        "tool_start:noop",
        "tool_end:noop:error",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "agent_end:aborted",
    ]
    assert [e["result"] for e in rec.trace if e["type"] == "tool_execution_end"][2:] == [
        "research stopped",
        ABORTED_TEXT,
    ]


def test_an_abort_reaches_a_nested_exec_of_another_runtime_in_a_worker_thread() -> None:
    """A sync tool runs an exec on a second runtime: it runs on its own loop in a worker
    thread, and its tool awaits forever. Aborting the outer runtime aborts that nested run
    too (its signal is the outer run's child), so the sync tool returns and the outer run
    ends. Before, the abort never reached the nested run and the outer run hung with it."""
    started = threading.Event()

    async def wait_forever() -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    outer, outer_model, rec = make_runtime([{"tool_calls": [{"delegate": {}}]}, "never sent"])
    inner, inner_model, _ = make_runtime([{"tool_calls": [{"wait": {}}]}, "never sent"])
    inner.subscribe(rec)

    def delegate() -> str:
        return str(inner.exec("dig", tools=[tool("wait", wait_forever)]))

    def abort_when_started() -> None:
        started.wait(5)
        outer.abort()

    async def main() -> None:
        threading.Thread(target=abort_when_started, daemon=True).start()
        await outer.aexec("go", tools=[tool("delegate", delegate)])

    with pytest.raises(RunAbortedError):
        within(5, main)
    assert inner_model.calls == 1 and outer_model.calls == 1
    assert compact(rec.trace, depth=True) == [
        *OPENING,
        "message_end:assistant[delegate]/toolUse",
        "tool_start:delegate",
        *(
            "  " + e
            for e in [
                *OPENING,
                "message_end:assistant[wait]/toolUse",
                "tool_start:wait",
                "tool_end:wait:error",
                "message_start:toolResult",
                "message_end:toolResult",
                "turn_end",
                "agent_end:aborted",
            ]
        ),
        "tool_end:delegate:error",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "agent_end:aborted",
    ]
    ends = [(e["depth"], e["result"]) for e in rec.trace if e["type"] == "tool_execution_end"]
    assert ends == [(1, "Cancelled"), (0, "Run cancelled")]


def test_a_nested_exec_started_after_the_abort_never_calls_its_model() -> None:
    """The tool swallows the abort, then starts a nested exec: that exec belongs to an
    aborted run, so it is aborted before its model call; the tool catches its
    ``RunAbortedError`` and returns, and the outer run ends ``aborted``. Before, the nested
    exec ran its rounds as if nothing had happened."""
    box: dict[str, Runtime] = {}
    started = asyncio.Event()

    async def stubborn() -> str:
        started.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        try:
            return str(await box["rt"].aexec("one more look", tools=[]))
        except RunAbortedError as exc:
            return f"gave up: {exc}"

    runtime, model, rec = make_runtime([{"tool_calls": [{"stubborn": {}}]}, "nested", "never"])
    box["rt"] = runtime

    async def main() -> None:
        task = asyncio.ensure_future(runtime.aexec("go", tools=[tool("stubborn", stubborn)]))
        await started.wait()
        runtime.abort()
        with pytest.raises(RunAbortedError):
            await task

    within(5, main)
    assert model.calls == 1
    assert compact(rec.trace, depth=True) == [
        *OPENING,
        "message_end:assistant[stubborn]/toolUse",
        "tool_start:stubborn",
        *("  " + e for e in [*OPENING, "message_end:assistant[]/aborted", "turn_end"]),
        "  agent_end:aborted",
        "tool_end:stubborn:ok",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "agent_end:aborted",
    ]
    ends = [e["result"] for e in rec.trace if e["type"] == "tool_execution_end"]
    assert ends == ["gave up: Run aborted before the model call"]
