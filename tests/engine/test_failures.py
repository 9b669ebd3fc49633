"""Failures around the loop: providers and callbacks that raise, aborts, bad input.
Whatever happens, exactly one agent_end closes the run and events stay balanced."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from _support import aborting_tools, compact, make_runtime, tool

from openprogram import Agent, ModelError, RunAbortedError, Runtime, ToolRegistry
from openprogram.agent import (
    AgentContext,
    LoopConfig,
    run_agent_loop,
    stream_agent_loop,
)
from openprogram.types import UserMessage
from openprogram_sim.models import ScriptedFault, ScriptedModel, ScriptExhaustedError
from openprogram_sim.trace import TraceRecorder, to_trace

NOOP = tool("noop", lambda: "ok")


def assert_balanced(trace: list[dict[str, Any]]) -> None:
    types = [e["type"] for e in trace]
    assert types.count("agent_end") == 1 and types[-1] == "agent_end"
    assert types.count("turn_start") == types.count("turn_end")
    assert types.count("message_start") == types.count("message_end")
    assert types.count("tool_execution_start") == types.count("tool_execution_end")


def test_provider_that_raises_ends_the_run_with_one_agent_end() -> None:
    runtime, _, rec = make_runtime([{"text": "half", "fault": "raise", "error": "socket closed"}])
    with pytest.raises(ModelError, match="Provider raised ScriptedFault: socket closed") as info:
        runtime.exec("go", tools=[NOOP])
    assert isinstance(info.value.__cause__, ScriptedFault)
    assert compact(rec.trace)[-4:] == [
        "message_start:assistant",
        "message_end:assistant[]/error",
        "turn_end",
        "agent_end:error",
    ]
    assert rec.trace[-3]["text"] == "half"  # the partial is kept, marked as an error
    assert_balanced(rec.trace)


def test_stream_that_ends_without_a_final_event_is_an_error_stop() -> None:
    runtime, _, rec = make_runtime([{"text": "cut", "fault": "truncate"}])
    with pytest.raises(ModelError, match="Provider stream ended without a final event"):
        runtime.exec("go", tools=[NOOP])
    assert rec.trace[-1]["reason"] == "error"
    assert_balanced(rec.trace)


def test_calling_beyond_the_script_fails_loudly_naming_the_request() -> None:
    runtime, _, rec = make_runtime([{"tool_calls": [{"noop": {}}]}])
    with pytest.raises(ModelError) as info:
        runtime.exec("go", tools=[NOOP])
    cause = info.value.__cause__
    assert isinstance(cause, ScriptExhaustedError)
    assert str(cause).startswith(
        "ScriptedModel: model call #2 (depth 0, round 2) has no scripted turn; the script has 1."
    )
    assert "Last message sent: toolResult 'ok'" in str(cause)
    assert_balanced(rec.trace)


def test_a_steering_callback_that_raises_ends_the_run_with_error() -> None:
    def broken() -> list[UserMessage]:
        raise RuntimeError("queue backend down")

    model = ScriptedModel([{"tool_calls": [{"noop": {}}]}, "never"])
    context = AgentContext(tools=[])
    from openprogram.tools import as_tool

    context.tools.append(as_tool(NOOP))
    rec = TraceRecorder()
    calls = {"n": 0}

    def steering() -> list[UserMessage]:
        calls["n"] += 1
        if calls["n"] > 1:  # the initial poll succeeds; the one after the tool call fails
            return broken()
        return []

    config = LoopConfig(provider=model, get_steering_messages=steering)
    result = asyncio.run(run_agent_loop([UserMessage.of("go")], context, config, [rec]))
    assert result.reason == "error"
    assert isinstance(result.error, RuntimeError)
    assert (
        result.final is not None
        and result.final.error_message == "RuntimeError: queue backend down"
    )
    assert compact(rec.trace)[-5:] == [
        "tool_end:noop:ok",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "agent_end:error",
    ]
    assert_balanced(rec.trace)


def test_a_listener_that_raises_does_not_break_the_run(caplog: pytest.LogCaptureFixture) -> None:
    runtime, _, rec = make_runtime([{"tool_calls": [{"noop": {}}]}, "fine"])

    def bad(event: Any) -> None:
        if event.type == "tool_execution_start":
            raise ValueError("listener bug")

    runtime.subscribe(bad)
    with caplog.at_level(logging.ERROR, logger="openprogram"):
        assert runtime.exec("go", tools=[NOOP]) == "fine"
    assert "listener" in caplog.text and "tool_execution_start" in caplog.text
    assert rec.trace[-1]["reason"] == "stop"


def test_abort_from_a_tool_stops_the_run_and_no_tool_starts_after_it() -> None:
    started: list[str] = []
    box: dict[str, Runtime] = {}

    first, second = aborting_tools(started, lambda: box["rt"].abort())
    runtime, model, rec = make_runtime([{"tool_calls": [{"first": {}}, {"second": {}}]}, "never"])
    box["rt"] = runtime
    with pytest.raises(RunAbortedError):
        runtime.exec("go", tools=[first, second])
    assert started == ["first"]
    assert model.calls == 1
    assert compact(rec.trace)[-10:] == [
        "tool_start:first",
        "tool_end:first:ok",
        "message_start:toolResult",
        "message_end:toolResult",
        "tool_start:second",  # not run: answered as aborted (see test_abort.py)
        "tool_end:second:error",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "agent_end:aborted",
    ]
    assert [e["skipped"] for e in rec.trace if e["type"] == "tool_execution_end"] == [
        False,
        True,
    ]
    assert_balanced(rec.trace)


def hanging_agent(text: str) -> tuple[Agent, TraceRecorder]:
    """An agent whose model streams ``text`` and then hangs, and the recorder of its trace."""
    agent = Agent(ScriptedModel([{"text": text, "fault": "hang"}]))
    rec = TraceRecorder()
    agent.subscribe(rec)
    return agent, rec


async def prompt_until_streaming(agent: Agent) -> asyncio.Task[Any]:
    """Start ``agent.prompt("go")`` and return its task once the reply has begun."""
    task = asyncio.create_task(agent.prompt("go"))
    while agent.state.stream_message is None:
        await asyncio.sleep(0)
    return task


def test_abort_from_another_task_while_the_model_streams() -> None:
    agent, rec = hanging_agent("thinking hard")

    async def main() -> Any:
        task = await prompt_until_streaming(agent)
        assert agent.state.is_streaming
        agent.abort()
        return await task

    result = asyncio.run(main())
    assert result.reason == "aborted"
    assert not agent.state.is_streaming
    assert compact(rec.trace)[-4:] == [
        "message_start:assistant",
        "message_end:assistant[]/aborted",
        "turn_end",
        "agent_end:aborted",
    ]
    assert_balanced(rec.trace)


def test_outside_cancellation_propagates_after_agent_end() -> None:
    agent, rec = hanging_agent("slow")

    async def main() -> None:
        task = await prompt_until_streaming(agent)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    assert rec.trace[-1]["reason"] == "aborted"
    assert_balanced(rec.trace)


def test_abort_before_the_model_call_never_calls_the_provider() -> None:
    model = ScriptedModel(["unused"])
    agent = Agent(model)

    async def main() -> Any:
        agent.subscribe(lambda e: agent.abort() if e.type == "turn_start" else None)
        return await agent.prompt("go")

    result = asyncio.run(main())
    assert result.reason == "aborted"
    assert model.calls == 0


def test_prompt_while_streaming_is_refused() -> None:
    model = ScriptedModel([{"text": "x", "fault": "hang"}])
    agent = Agent(model)

    async def main() -> None:
        task = asyncio.create_task(agent.prompt("one"))
        while not agent.state.is_streaming:
            await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match=r"use steer\(\) or follow_up\(\)"):
            await agent.prompt("two")
        agent.abort()
        await task

    asyncio.run(main())


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("search", "tool entry 'search' is not a tool (tool names are not accepted here"),
        (42, "tool entry 42 is not a tool; a tool entry must be an @function or"),
        ({"spec": {"name": "x"}}, "is a dict without both 'spec' and a callable 'execute'"),
        ({"spec": {"description": "no name"}, "execute": print}, "has a spec without a name"),
    ],
)
def test_tools_entries_that_are_not_tools_raise_type_error(entry: Any, message: str) -> None:
    runtime = Runtime(provider=ScriptedModel([]), registry=ToolRegistry())
    with pytest.raises(TypeError) as info:
        runtime.exec("go", tools=[entry])
    assert message in str(info.value)


def test_tools_given_as_a_string_raises() -> None:
    runtime = Runtime(provider=ScriptedModel([]), registry=ToolRegistry())
    with pytest.raises(TypeError, match="must be a list of tools, not a string"):
        runtime.exec("go", tools="search")


def test_stream_agent_loop_yields_events_then_the_result() -> None:
    model = ScriptedModel([{"tool_calls": [{"noop": {}}]}, "done"])
    from openprogram.tools import as_tool

    async def main() -> tuple[list[Any], Any]:
        stream = stream_agent_loop(
            [UserMessage.of("go")], AgentContext(tools=[as_tool(NOOP)]), LoopConfig(provider=model)
        )
        events = [e async for e in stream]
        return events, await stream.result()

    events, result = asyncio.run(main())
    assert [e["type"] for e in to_trace(events)][-3:] == ["message_end", "turn_end", "agent_end"]
    assert result.reason == "stop" and result.final.text == "done"
    assert result.rounds == 2
