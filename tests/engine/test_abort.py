"""Aborts: from any thread, before a run has started, and in the middle of a batch of tool
calls. Whatever the timing, the run ends ``aborted`` with one ``agent_end``, no tool runs
after the abort, and every tool call of the history has exactly one result."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest
from _support import OPENING, aborting_tools, compact, ended_by_first_reply, make_runtime, tool

from openprogram import Agent, RunAbortedError, Runtime, ToolRegistry
from openprogram.agent import ABORTED_TEXT, SKIPPED_TEXT, AbortSignal
from openprogram.events import AgentEvent, ProviderEvent, ToolExecutionEnd
from openprogram.providers import Context, MessageBuilder, StreamOptions
from openprogram.types import AssistantMessage, ToolResultMessage
from openprogram_sim.models import ScriptedModel
from openprogram_sim.trace import TraceRecorder

NOOP = tool("noop", lambda: "ok")

ABORTED_RUN = ended_by_first_reply("aborted")

# The batch's last call, ``noop``, never runs: it is answered as aborted and the run ends.
NOOP_UNRUN_THEN_END = [
    "tool_start:noop",
    "tool_end:noop:error",
    "message_start:toolResult",
    "message_end:toolResult",
    "turn_end",
    "agent_end:aborted",
]


def in_another_thread(fn: Callable[[], None]) -> None:
    """Call ``fn`` in a new thread and wait; what it raises is raised here."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def run_in_debug_mode(main: Callable[[], Coroutine[Any, Any, Any]], seconds: float = 10) -> Any:
    """``asyncio.run(main(), debug=True)`` on a thread of its own, failing (not hanging the
    suite) when the run does not finish in time."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(main(), debug=True)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"the run hung: no agent_end after {seconds}s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def results_of(messages: list[Any]) -> list[tuple[str, str, bool, bool]]:
    return [
        (m.tool_name, m.text, m.is_error, m.skipped)
        for m in messages
        if isinstance(m, ToolResultMessage)
    ]


# -- item 11: abort from another thread --------------------------------------------------


def test_agent_abort_from_another_thread_under_asyncio_debug() -> None:
    """The model waits on the abort signal; ``abort()`` comes from a plain thread. In debug
    mode asyncio refuses a waiter woken off its loop's thread: the abort must still end the
    run (before, it raised in the aborting thread and the run hung with no ``agent_end``)."""
    model = ScriptedModel([{"text": "thinking hard", "fault": "hang"}])
    agent = Agent(model)
    rec = TraceRecorder()
    agent.subscribe(rec)

    async def main() -> Any:
        task = asyncio.create_task(agent.prompt("go"))
        while agent.state.stream_message is None:  # the model now waits for the abort
            await asyncio.sleep(0)
        in_another_thread(agent.abort)
        return await task

    result = run_in_debug_mode(main)
    assert result.reason == "aborted"
    assert compact(rec.trace) == ABORTED_RUN
    assert not agent.state.is_streaming


def test_runtime_abort_from_another_thread_under_asyncio_debug() -> None:
    runtime, model, rec = make_runtime([{"text": "thinking hard", "fault": "hang"}])

    async def main() -> None:
        task = asyncio.ensure_future(runtime.aexec("go", tools=[]))
        while model.calls == 0:  # then the model waits on the abort signal
            await asyncio.sleep(0)
        in_another_thread(runtime.abort)
        await task

    with pytest.raises(RunAbortedError):
        run_in_debug_mode(main)
    assert compact(rec.trace) == ABORTED_RUN
    assert model.calls == 1


def test_a_sync_tool_sees_an_abort_from_another_thread_at_once() -> None:
    """A sync tool blocks its loop, so the abort cannot wait for the loop to run: the signal
    reads as set in every thread as soon as ``abort()`` returns."""
    seen: dict[str, bool] = {}
    box: dict[str, Agent] = {}

    def watch(cancel: Any) -> str:
        in_another_thread(box["agent"].abort)
        seen["set"] = cancel.is_set()
        return "watched"

    agent = Agent(ScriptedModel([{"tool_calls": [{"watch": {}}]}]), tools=[tool("watch", watch)])
    box["agent"] = agent
    result = asyncio.run(agent.prompt("go"), debug=True)
    assert seen == {"set": True}
    assert result.reason == "aborted"


def test_nested_exec_in_a_worker_thread_aborts_the_whole_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sync tool's nested exec runs on its own loop in a worker thread; its tool aborts
    the runtime, so the outer run is aborted from that thread. Debug mode is on for both
    loops. No tool runs after the abort, at either depth."""
    monkeypatch.setenv("PYTHONASYNCIODEBUG", "1")
    ran: list[str] = []
    box: dict[str, Runtime] = {}

    def research() -> str:
        ran.append("research")
        return str(box["rt"].exec("dig", tools=[STOP, LATE]))

    STOP, LATE = aborting_tools(ran, lambda: box["rt"].abort(), ("stop", "late"))
    runtime, model, rec = make_runtime(
        [
            {"tool_calls": [{"research": {}}, {"late": {}}]},
            {"tool_calls": [{"stop": {}}, {"late": {}}]},
            "never",
        ]
    )
    box["rt"] = runtime
    with pytest.raises(RunAbortedError):
        runtime.exec("go", tools=[tool("research", research), LATE])
    assert ran == ["research", "stop"]
    assert model.calls == 2
    assert [(e["depth"], e["reason"]) for e in rec.trace if e["type"] == "agent_end"] == [
        (1, "aborted"),
        (0, "aborted"),
    ]
    ends = [
        (e["depth"], e["tool_name"], e["is_error"], e["skipped"])
        for e in rec.trace
        if e["type"] == "tool_execution_end"
    ]
    assert ends == [
        (1, "stop", False, False),
        (1, "late", True, True),
        (0, "research", True, False),  # the nested exec raised RunAbortedError
        (0, "late", True, True),
    ]


def test_runtime_abort_reaches_a_nested_exec_awaited_on_the_same_task() -> None:
    """An async tool awaits a nested aexec: both runs share one task. ``Runtime.abort()``
    from another thread sets both signals; the task is cancelled once, each run ends
    ``aborted``, and no cancellation is left pending for the caller."""
    box: dict[str, Runtime] = {}

    async def research() -> str:
        return str(await box["rt"].aexec("dig", tools=[]))

    runtime, model, rec = make_runtime(
        [{"tool_calls": [{"research": {}}, {"noop": {}}]}, {"text": "digging", "fault": "hang"}]
    )
    box["rt"] = runtime

    async def main() -> None:
        task = asyncio.ensure_future(runtime.aexec("go", tools=[tool("research", research), NOOP]))
        while model.calls < 2:
            await asyncio.sleep(0)
        in_another_thread(runtime.abort)
        with pytest.raises(RunAbortedError):
            await task
        await asyncio.sleep(0)  # nothing pending: this is not cancelled
        current = asyncio.current_task()
        assert current is not None and current.cancelling() == 0

    run_in_debug_mode(main)
    assert [(e["depth"], e["reason"]) for e in rec.trace if e["type"] == "agent_end"] == [
        (1, "aborted"),
        (0, "aborted"),
    ]
    ends = [
        (e["tool_name"], e["is_error"], e["skipped"])
        for e in rec.trace
        if e["type"] == "tool_execution_end"
    ]
    assert ends == [("research", True, False), ("noop", True, True)]


def test_the_abort_signal_on_its_own() -> None:
    """Set before anyone waits, it is simply set; set from another thread, it wakes a waiter
    on the waiter's loop (debug mode); set after that loop closed, it raises nothing."""
    early = AbortSignal()
    early.set()
    assert early.is_set() and repr(early) == "<AbortSignal [set]>"
    signal = AbortSignal()

    async def main() -> bool:
        waiter = asyncio.ensure_future(signal.wait())
        await asyncio.sleep(0)
        in_another_thread(signal.set)
        assert signal.is_set()  # at once, before the loop has run the wake-up
        return await asyncio.wait_for(waiter, 5)

    assert run_in_debug_mode(main) is True
    assert asyncio.run(early.wait()) is True
    closed = AbortSignal()

    async def bind() -> None:
        waiter = asyncio.ensure_future(closed.wait())
        await asyncio.sleep(0)
        waiter.cancel()

    asyncio.run(bind())
    closed.set()  # its loop is closed: nothing to wake, nothing raised
    assert closed.is_set()


# -- item 12: an abort before the run has started ----------------------------------------


def test_agent_abort_right_after_create_task_aborts_that_run() -> None:
    model = ScriptedModel(["never sent"])
    agent = Agent(model)
    rec = TraceRecorder()
    agent.subscribe(rec)

    async def main() -> Any:
        task = asyncio.create_task(agent.prompt("go"))
        agent.abort()  # the task has not started yet
        return await task

    result = asyncio.run(main())
    assert result.reason == "aborted"
    assert model.calls == 0
    assert compact(rec.trace) == ABORTED_RUN
    assert rec.trace[-3]["error"] == "Run aborted before the model call"


def test_runtime_abort_right_after_create_task_aborts_that_exec() -> None:
    runtime, model, rec = make_runtime(["never sent"])

    async def main() -> None:
        task = asyncio.ensure_future(runtime.aexec("go", tools=[]))
        runtime.abort()
        await task

    with pytest.raises(RunAbortedError, match="Run aborted before the model call"):
        asyncio.run(main())
    assert model.calls == 0
    assert compact(rec.trace) == ABORTED_RUN


def test_an_abort_with_nothing_requested_is_not_remembered() -> None:
    """``abort()`` applies to the runs already asked for (running or not yet started); an
    abort while idle does not wait to kill the next prompt."""
    model = ScriptedModel(["first", "second"])
    agent = Agent(model)
    runtime = Runtime(provider=model, registry=ToolRegistry())
    agent.abort()
    runtime.abort()
    assert asyncio.run(agent.prompt("go")).reason == "stop"
    assert runtime.exec("go", tools=[]) == "second"


def test_an_abort_reaches_the_prompts_asked_before_it_and_none_asked_after() -> None:
    """Each ``abort()`` is a wave: every prompt asked for before it (its coroutine made,
    not started) ends aborted when it runs, however late; one asked for after it runs."""
    model = ScriptedModel(["third runs"])
    agent = Agent(model)

    async def main() -> list[str]:
        first, second = agent.prompt("a"), agent.prompt("b")
        agent.abort()
        third = agent.prompt("c")
        await asyncio.sleep(0)
        return [(await c).reason for c in (first, second, third)]

    assert asyncio.run(main()) == ["aborted", "aborted", "stop"]
    assert model.calls == 1
    assert agent.state.messages[-1].text == "third runs"


def test_a_runtime_abort_reaches_the_execs_asked_before_it_and_none_asked_after() -> None:
    runtime, model, _ = make_runtime(["third runs"])

    async def main() -> list[str]:
        first, second = runtime.aexec("a", tools=[]), runtime.aexec("b", tools=[])
        runtime.abort()
        third = runtime.aexec("c", tools=[])
        out = []
        for c in (first, second, third):
            try:
                out.append(await c)
            except RunAbortedError:
                out.append("aborted")
        return out

    assert asyncio.run(main()) == ["aborted", "aborted", "third runs"]
    assert model.calls == 1


def test_a_prompt_never_awaited_leaves_nothing_behind() -> None:
    """A run not started is held nowhere: its coroutine, dropped, is freed at once (no
    reference cycle, no registry of signals), and a later abort and prompt behave as if
    it had never been asked for."""
    import gc
    import weakref

    model = ScriptedModel(["runs"])
    agent = Agent(model)
    runtime = Runtime(provider=model, registry=ToolRegistry())
    asked = [agent.prompt("never"), runtime.aexec("never", tools=[])]
    refs = [weakref.ref(c) for c in asked]
    for c in asked:
        c.close()
    del asked, c
    gc.disable()
    try:
        assert [r() for r in refs] == [None, None]
    finally:
        gc.enable()
    assert asyncio.run(agent.prompt("go")).reason == "stop"


def test_an_abort_after_the_run_ended_does_not_reach_the_caller() -> None:
    """A late abort from another thread, landing after the run ended, must not cancel
    whatever the caller's task awaits next."""
    model = ScriptedModel(["done"])
    agent = Agent(model)

    async def main() -> str:
        result = await agent.prompt("go")
        in_another_thread(agent.abort)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return result.reason

    assert asyncio.run(main(), debug=True) == "stop"


# -- item 16: one result per call, even when the run is aborted mid-batch -----------------


def test_abort_mid_batch_answers_every_unrun_call() -> None:
    """The calls after the abort never run; each gets an error result saying the run was
    aborted, marked ``skipped`` like a steering skip, with its tool events, in call order."""
    ran: list[str] = []
    box: dict[str, Agent] = {}

    first, second = aborting_tools(ran, lambda: box["agent"].abort())
    model = ScriptedModel(
        [{"tool_calls": [{"first": {}}, {"second": {}}, {"noop": {}}]}, "picked up"]
    )
    agent = Agent(model, tools=[first, second, NOOP])
    box["agent"] = agent
    rec = TraceRecorder()
    agent.subscribe(rec)
    ends: list[ToolExecutionEnd] = []
    agent.subscribe(lambda e: ends.append(e) if isinstance(e, ToolExecutionEnd) else None)
    result = asyncio.run(agent.prompt("go"))
    assert result.reason == "aborted"
    assert ran == ["first"]
    assert compact(rec.trace) == [
        *OPENING,
        "message_end:assistant[first,second,noop]/toolUse",
        "tool_start:first",
        "tool_end:first:ok",
        "message_start:toolResult",
        "message_end:toolResult",
        "tool_start:second",
        "tool_end:second:error",
        "message_start:toolResult",
        "message_end:toolResult",
        *NOOP_UNRUN_THEN_END,
    ]
    assert [(e.tool_name, e.skipped, e.result.skipped) for e in ends] == [
        ("first", False, False),
        ("second", True, True),
        ("noop", True, True),
    ]
    assert results_of(result.messages) == [
        ("first", "aborting", False, False),
        ("second", "Not run: the run was aborted.", True, True),
        ("noop", "Not run: the run was aborted.", True, True),
    ]
    assert ABORTED_TEXT == "Not run: the run was aborted." and ABORTED_TEXT != SKIPPED_TEXT
    assert rec.trace[-2]["tool_results"] == 3
    # the next prompt sends every call with its result: no adapter has to drop any
    asyncio.run(agent.prompt("carry on"))
    sent = model.requests[1].messages
    calls = [c.id for m in sent if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answered = [m.tool_call_id for m in sent if isinstance(m, ToolResultMessage)]
    assert calls == answered and len(calls) == 3


def test_abort_while_a_tool_awaits_answers_it_and_the_rest() -> None:
    gate: dict[str, Any] = {}

    async def wait_forever() -> str:
        gate["started"] = True
        await asyncio.Event().wait()
        return "never"

    model = ScriptedModel([{"tool_calls": [{"wait": {}}, {"noop": {}}]}])
    agent = Agent(model, tools=[tool("wait", wait_forever), NOOP])
    rec = TraceRecorder()
    agent.subscribe(rec)

    async def main() -> Any:
        task = asyncio.create_task(agent.prompt("go"))
        while "started" not in gate:
            await asyncio.sleep(0)
        agent.abort()
        return await task

    result = asyncio.run(main())
    assert result.reason == "aborted"
    assert compact(rec.trace)[5:] == [
        "message_end:assistant[wait,noop]/toolUse",
        "tool_start:wait",
        "tool_end:wait:error",
        "message_start:toolResult",
        "message_end:toolResult",
        *NOOP_UNRUN_THEN_END,
    ]
    assert results_of(agent.state.messages) == [
        ("wait", "Cancelled", True, False),  # it ran: not a skip
        ("noop", ABORTED_TEXT, True, True),
    ]
    ends = [e["error_kind"] for e in rec.trace if e["type"] == "tool_execution_end"]
    assert ends == ["cancelled", "skipped"]
    assert not agent.state.pending_tool_calls


def test_steering_taken_by_a_round_that_is_then_aborted_stays_queued() -> None:
    """Steering that arrived mid-batch (the rest of it skipped) and was not delivered yet
    when an abort closed the round is not lost: it goes back to the queue, as messages left
    at the cap do."""
    model = ScriptedModel([{"tool_calls": [{"noop": {}}, {"noop": {}}]}, "never"])
    agent = Agent(model, tools=[NOOP])

    def listener(event: AgentEvent) -> None:
        if event.type == "tool_execution_end" and not event.skipped:
            agent.steer("change of plan")
        elif event.type == "turn_end":
            agent.abort()

    agent.subscribe(listener)
    result = asyncio.run(agent.prompt("go"))
    assert result.reason == "aborted" and model.calls == 1
    assert [(name, skip) for name, _, _, skip in results_of(result.messages)] == [
        ("noop", False),
        ("noop", True),
    ]
    assert [m.text for m in agent.queued_steering] == ["change of plan"]


def test_an_error_mid_batch_also_answers_every_unrun_call() -> None:
    """A steering source that raises ends the run on an error between two calls: the calls
    left still get one result each."""
    from openprogram.agent import AgentContext, LoopConfig, run_agent_loop
    from openprogram.tools import as_tool
    from openprogram.types import UserMessage

    polls = {"n": 0}

    def steering() -> list[UserMessage]:
        polls["n"] += 1
        if polls["n"] > 1:
            raise RuntimeError("queue backend down")
        return []

    model = ScriptedModel([{"tool_calls": [{"noop": {}}, {"noop": {}}]}])
    context = AgentContext(tools=[as_tool(NOOP)])
    config = LoopConfig(provider=model, get_steering_messages=steering)
    result = asyncio.run(run_agent_loop([UserMessage.of("go")], context, config))
    assert result.reason == "error"
    assert [(name, err, skip) for name, _, err, skip in results_of(context.messages)] == [
        ("noop", False, False),
        ("noop", True, True),
    ]


# -- item 16: tool-call ids made unique where the reply is finalized ----------------------


class IdModel:
    """Replies with ``noop`` calls carrying the given ids (one list per call), then text."""

    def __init__(self, batches: list[list[str]]) -> None:
        self.batches = batches
        self.requests: list[list[Any]] = []

    async def stream(self, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
        self.requests.append(list(context.messages))
        b = MessageBuilder(api="ids", model="ids")
        events: list[ProviderEvent] = [b.start()]
        n = len(self.requests) - 1
        for call_id in self.batches[n] if n < len(self.batches) else []:
            events += [b.toolcall_start(call_id, "noop"), b.toolcall_delta("{}"), b.toolcall_end()]
        if n >= len(self.batches):
            events += [b.text_start(), b.text_delta("done"), b.text_end()]
        events.append(b.done())
        for event in events:
            yield event


def test_empty_and_repeated_tool_call_ids_are_made_unique() -> None:
    """The loop renames empty and repeated ids (within a reply and across the history) as a
    streamed call starts (or when the reply is finalized), before ``message_end``: the
    history, the events (``message_update`` included) and the results all quote the same,
    unique ids."""
    model = IdModel([["", "a", "a", ""], ["a", "call_1", "b"]])
    agent = Agent(model, tools=[NOOP])
    seen: list[AgentEvent] = []
    agent.subscribe(seen.append)
    streamed: dict[str, list[str]] = {"toolcall_start": [], "toolcall_end": []}

    def as_streamed(event: AgentEvent) -> None:  # the ids a listener sees at the time
        if event.type == "message_update" and event.event.type in streamed:
            block = event.message.content[event.event.content_index]
            streamed[event.event.type].append(block.id)

    agent.subscribe(as_streamed)
    asyncio.run(agent.prompt("go"))
    calls = [
        c.id for m in agent.state.messages if isinstance(m, AssistantMessage) for c in m.tool_calls
    ]
    assert calls == ["call_1", "a", "a_2", "call_2", "a_3", "call_1_2", "b"]
    answered = [m.tool_call_id for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert answered == calls
    ended = [
        c.id
        for e in seen
        if e.type == "message_end" and isinstance(e.message, AssistantMessage)
        for c in e.message.tool_calls
    ]
    assert ended == calls
    assert [e.tool_call_id for e in seen if e.type == "tool_execution_start"] == calls
    # message_update listeners see each call under the id it keeps, from its start on
    assert streamed == {"toolcall_start": calls, "toolcall_end": calls}
    # the model is sent the renamed ids
    sent = [
        c.id for m in model.requests[1] if isinstance(m, AssistantMessage) for c in m.tool_calls
    ]
    assert sent == calls[:4]
