"""The stateful Agent and the Runtime's face: state, subscribers, queues, sync and async."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _support import compact, ended_by_first_reply, make_runtime, tool

from openprogram import Agent, Runtime
from openprogram.agent import AgentContext, LoopConfig, run_agent_loop
from openprogram.types import ImageContent, TextContent, UserMessage
from openprogram_sim.models import ScriptedModel
from openprogram_sim.trace import TraceRecorder


def test_agent_state_tracks_history_streaming_and_pending_calls() -> None:
    seen: dict[str, Any] = {}
    box: dict[str, Agent] = {}

    def probe() -> str:
        state = box["agent"].state
        seen["streaming"] = state.is_streaming
        seen["pending"] = set(state.pending_tool_calls)
        return "probed"

    model = ScriptedModel(
        [{"thinking": "let me see", "tool_calls": [{"id": "c-9", "name": "probe"}]}, "done"]
    )
    agent = Agent(model, tools=[tool("probe", probe)], system_prompt="be brief")
    box["agent"] = agent
    events: list[str] = []
    unsubscribe = agent.subscribe(lambda e: events.append(e.type))
    result = asyncio.run(agent.prompt("go"))
    assert seen == {"streaming": True, "pending": {"c-9"}}
    assert not agent.state.is_streaming and agent.state.stream_message is None
    assert [m.role for m in agent.state.messages] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
    ]
    assert [t.name for t in agent.state.tools] == ["probe"]
    assert model.requests[0].system_prompt == "be brief"
    assert result.reason == "stop" and result.rounds == 2
    thinking = agent.state.messages[1].content[0]
    assert getattr(thinking, "thinking", None) == "let me see"
    # a second prompt continues the same history
    unsubscribe()
    model.turns.append(model.turns[-1])
    asyncio.run(agent.prompt(["and", UserMessage.of("more")]))
    assert [m.role for m in model.requests[2].messages][-2:] == ["user", "user"]
    assert events.count("agent_end") == 1  # unsubscribed before the second run


def test_agent_records_the_error_of_a_failed_run() -> None:
    agent = Agent(ScriptedModel([{"stop_reason": "error", "error": "quota"}]))
    result = asyncio.run(agent.prompt("go"))
    assert result.reason == "error" and agent.state.error == "quota"
    assert agent.state.last_result is result


def test_agent_rejects_what_is_not_a_message() -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(TypeError, match="expected a str or UserMessage, got int"):
        agent.steer(3)  # type: ignore[arg-type]


def test_async_message_sources_and_a_failing_initial_poll() -> None:
    async def steering() -> list[UserMessage]:
        raise ConnectionError("broker gone")

    rec = TraceRecorder()
    config = LoopConfig(provider=ScriptedModel(["x"]), get_steering_messages=steering)
    result = asyncio.run(run_agent_loop([UserMessage.of("go")], AgentContext(), config, [rec]))
    assert result.reason == "error"
    assert compact(rec.trace) == ended_by_first_reply("error")
    assert rec.trace[-3]["error"] == "ConnectionError: broker gone"


def test_runtime_steer_and_follow_up_reach_the_running_outer_exec() -> None:
    runtime, model, _ = make_runtime([{"tool_calls": [{"note": {}}]}, "a", "b"])

    def note() -> str:
        runtime.steer("steered")
        runtime.follow_up("followed")
        return "noted"

    runtime.exec("go", tools=[tool("note", note)])
    assert [m.text for m in model.requests[1].messages][-1] == "steered"
    assert [m.text for m in model.requests[2].messages][-1] == "followed"


def test_exec_accepts_content_blocks_and_user_messages() -> None:
    runtime, model, _ = make_runtime(["one", "two"])
    runtime.exec([TextContent("look"), ImageContent("aGk=", "image/png")], tools=[])
    runtime.exec(UserMessage.of("plain"), tools=[])
    assert [type(b).__name__ for b in model.requests[0].messages[0].content] == [
        "TextContent",
        "ImageContent",
    ]
    assert model.requests[1].messages[0].text == "plain"
    with pytest.raises(TypeError, match="exec content must be a str"):
        runtime.exec([42], tools=[])  # type: ignore[list-item]
    assert runtime.last_run is not None and runtime.last_run.rounds == 1


def test_aexec_inside_a_running_loop_and_sync_exec_from_a_thread() -> None:
    runtime, _, _ = make_runtime(["async answer", "sync answer"])

    async def main() -> tuple[str, str]:
        first = await runtime.aexec("a", tools=[])
        # sync exec while an event loop runs: done in a worker thread
        second = runtime.exec("b", tools=[])
        return first, second

    assert asyncio.run(main()) == ("async answer", "sync answer")


def test_errors_in_the_worker_thread_reach_the_caller() -> None:
    runtime, _, _ = make_runtime([{"stop_reason": "error", "error": "thread boom"}])

    async def main() -> None:
        runtime.exec("b", tools=[])

    from openprogram import ModelError

    with pytest.raises(ModelError, match="thread boom"):
        asyncio.run(main())


def test_runtime_misuse_is_reported() -> None:
    with pytest.raises(TypeError, match="only apply with model="):
        Runtime(provider=ScriptedModel([]), api_key="x")


def test_before_finish_adds_follow_ups_in_the_same_run() -> None:
    model = ScriptedModel(["draft", "final"])
    agent = Agent(model)
    asked: list[str | None] = []

    def before_finish(last: Any) -> list[UserMessage]:
        asked.append(last.text if last is not None else None)
        return [UserMessage.of("improve it")] if len(asked) == 1 else []

    agent.before_finish = before_finish
    rec = TraceRecorder()
    agent.subscribe(rec)
    result = asyncio.run(agent.prompt("write"))
    assert asked == ["draft", "final"]
    assert result.final is not None and result.final.text == "final"
    assert [e["type"] for e in rec.trace].count("agent_end") == 1
    assert [m.text for m in model.requests[1].messages] == ["write", "draft", "improve it"]


def test_a_caller_runs_an_agent_with_its_own_signal_and_run_id_and_takes_its_queue() -> None:
    from openprogram.agent import AbortSignal

    agent = Agent(ScriptedModel(["never sent"]))
    run_ids: list[str] = []
    agent.subscribe(lambda event: run_ids.append(event.run_id))
    signal = AbortSignal()
    signal.set()  # the caller's own abort, before the run starts
    result = asyncio.run(agent.prompt("hi", signal=signal, run_id="mine-1"))
    assert (result.reason, result.run_id) == ("aborted", "mine-1")
    assert run_ids and set(run_ids) == {"mine-1"}
    agent.steer("steered")
    agent.follow_up("followed")
    steering, follow_ups = agent.take_queued()
    assert ([m.text for m in steering], [m.text for m in follow_ups]) == (["steered"], ["followed"])
    assert agent.queued_steering == [] and agent.queued_follow_ups == []
