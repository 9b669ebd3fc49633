"""A sync tool's nested exec runs on the tool's own thread, on an event loop of its own,
while the outer loop (which the tool blocks) waits: no thread per level (issue 28 item 4).
What ``asyncio.run`` did for it in a worker thread still happens: tasks the nested run left
running are cancelled, its unfinished async generators are closed, and the outer loop is
running again when ``exec`` returns. From plain sync code and from a worker thread,
``exec`` runs its own loop as before."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest
from _support import compact, tool

from openprogram import Runtime, ToolRegistry, current_depth
from openprogram_sim.models import ScriptedModel
from openprogram_sim.trace import TraceRecorder


def nested_runtime(turns: list[Any]) -> tuple[Runtime, TraceRecorder]:
    runtime = Runtime(provider=ScriptedModel(turns), registry=ToolRegistry())
    rec = TraceRecorder()
    runtime.subscribe(rec)
    return runtime, rec


DIVE_THEN_UP = [
    {"tool_calls": [{"outer": {}}]},
    {"tool_calls": [{"inner": {}}]},
    "inner done",
    "outer done",
]


def test_the_nested_run_shares_the_tools_thread_and_the_outer_loop_runs_again_after() -> None:
    seen: dict[str, Any] = {}
    runtime, rec = nested_runtime(DIVE_THEN_UP)

    async def inner() -> str:
        seen["inner_thread"] = threading.get_ident()
        seen["inner_loop"] = asyncio.get_running_loop()
        seen["inner_depth"] = current_depth()
        await asyncio.sleep(0)  # a real await on the nested loop
        return "deep"

    def outer() -> str:
        seen["outer_thread"] = threading.get_ident()
        seen["outer_loop"] = asyncio.get_running_loop()
        seen["threads"] = threading.active_count()
        reply = runtime.exec("go deeper", tools=[tool("inner", inner)])
        seen["loop_after"] = asyncio.get_running_loop()
        seen["threads_after"] = threading.active_count()
        return str(reply)

    assert runtime.exec("go", tools=[tool("outer", outer)]) == "outer done"
    assert seen["inner_thread"] == seen["outer_thread"]
    assert seen["inner_loop"] is not seen["outer_loop"]
    assert seen["loop_after"] is seen["outer_loop"]
    assert seen["threads_after"] == seen["threads"]
    assert seen["inner_depth"] == 1
    assert not [t for t in threading.enumerate() if t.name == "openprogram-nested-exec"]
    ends = [
        (e["depth"], e["tool_name"], e["result"])
        for e in rec.trace
        if e["type"] == "tool_execution_end"
    ]
    assert ends == [(1, "inner", "deep"), (0, "outer", "inner done")]
    assert [e["depth"] for e in rec.trace if e["type"] == "agent_end"] == [1, 0]


def test_a_task_the_nested_run_leaves_running_is_cancelled_when_it_ends() -> None:
    """As ``asyncio.run`` does: the nested exec does not return with its tasks still
    pending on a loop nobody runs."""
    events: list[str] = []
    runtime, _ = nested_runtime(DIVE_THEN_UP)

    async def background() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            events.append("background cancelled")
            raise

    async def inner() -> str:
        asyncio.get_running_loop().create_task(background())
        await asyncio.sleep(0)  # let it start
        return "spawned"

    def outer() -> str:
        reply = runtime.exec("go deeper", tools=[tool("inner", inner)])
        events.append(f"exec returned {reply}")
        return str(reply)

    assert runtime.exec("go", tools=[tool("outer", outer)]) == "outer done"
    assert events == ["background cancelled", "exec returned inner done"]


def test_an_async_generator_the_nested_run_left_open_is_closed_when_it_ends() -> None:
    events: list[str] = []
    runtime, _ = nested_runtime(DIVE_THEN_UP)
    kept: list[Any] = []

    async def numbers() -> Any:
        try:
            yield 1
            yield 2
        finally:
            events.append("generator closed")

    async def inner() -> str:
        gen = numbers()
        kept.append(gen)  # still referenced: only the loop's shutdown closes it
        return str(await gen.__anext__())

    def outer() -> str:
        reply = runtime.exec("go deeper", tools=[tool("inner", inner)])
        events.append("exec returned")
        return str(reply)

    assert runtime.exec("go", tools=[tool("outer", outer)]) == "outer done"
    assert events == ["generator closed", "exec returned"]


def test_sync_nested_execs_one_after_another_reuse_the_nested_loop() -> None:
    """Two nested execs at the same depth, one after the other, run on one loop: a loop is
    not made (and its selector opened) per nested exec."""
    loops: list[asyncio.AbstractEventLoop] = []
    probe_call = {"tool_calls": [{"probe": {}}]}
    turns = [{"tool_calls": [{"outer": {}}]}, probe_call, "a", probe_call, "b", "outer done"]
    runtime, rec = nested_runtime(turns)

    async def probe() -> str:
        loops.append(asyncio.get_running_loop())
        return "ok"

    def outer() -> str:
        loops.append(asyncio.get_running_loop())
        probes = [tool("probe", probe)]
        return f"{runtime.exec('one', tools=probes)}{runtime.exec('two', tools=probes)}"

    assert runtime.exec("go", tools=[tool("outer", outer)]) == "outer done"
    outer_loop, first, second = loops
    assert first is second
    assert first is not outer_loop
    ends = [(e["depth"], e["result"]) for e in rec.trace if e["type"] == "tool_execution_end"]
    assert ends == [(1, "ok"), (1, "ok"), (0, "ab")]


def test_exec_from_a_worker_thread_and_from_plain_code_runs_its_own_loop() -> None:
    runtime, rec = nested_runtime(["from a thread", "from plain code"])

    async def main() -> str:
        return str(await asyncio.to_thread(runtime.exec, "hi", toolset="none"))

    assert asyncio.run(main()) == "from a thread"
    assert runtime.exec("hi", toolset="none") == "from plain code"
    assert compact(rec.trace).count("agent_end:stop") == 2


def test_an_exception_in_the_nested_run_comes_out_of_exec_and_the_outer_run_goes_on() -> None:
    runtime, rec = nested_runtime(
        [
            {"tool_calls": [{"outer": {}}]},
            {"tool_calls": [{"inner": {}}]},
            {"stop_reason": "error", "error": "model down"},
            "outer done",
        ]
    )

    async def inner() -> str:
        return "unused"

    def outer() -> str:
        try:
            runtime.exec("go deeper", tools=[tool("inner", inner)])
        except Exception as exc:  # ModelError from the nested run
            return f"{type(exc).__name__}: {exc}"
        return "no error"

    assert runtime.exec("go", tools=[tool("outer", outer)]) == "outer done"
    ends = [(e["depth"], e["result"]) for e in rec.trace if e["type"] == "tool_execution_end"]
    assert ends == [(1, "unused"), (0, "ModelError: model down")]
    assert [(e["depth"], e["reason"]) for e in rec.trace if e["type"] == "agent_end"] == [
        (1, "error"),
        (0, "stop"),
    ]


def test_a_task_left_running_that_fails_on_its_cancellation_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As ``asyncio.run`` reports it: through the loop's exception handler (logged), and the
    nested exec still returns."""
    runtime, _ = nested_runtime(DIVE_THEN_UP)

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise ValueError("could not stop cleanly") from None

    async def inner() -> str:
        asyncio.get_running_loop().create_task(stubborn())
        await asyncio.sleep(0)
        return "spawned"

    def outer() -> str:
        return str(runtime.exec("go deeper", tools=[tool("inner", inner)]))

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        assert runtime.exec("go", tools=[tool("outer", outer)]) == "outer done"
    logged = [r for r in caplog.records if r.name == "asyncio"]
    assert [r.getMessage().splitlines()[0] for r in logged] == [
        "unhandled exception in a task a nested exec left running"
    ]
    assert str(logged[0].exc_info[1]) == "could not stop cleanly"  # type: ignore[index]
