"""Runs side by side: each run's events carry its id (and its parent's), concurrent execs
on one Runtime share its queues without losing messages, and events stay free when nobody
listens."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest
from _support import make_runtime, tool

from openprogram import Agent, Runtime, ToolRegistry
from openprogram.events import AgentEvent
from openprogram_sim.models import FunctionModel, ScriptedModel, ScriptedRequest


def by_run(events: list[AgentEvent]) -> dict[str, list[AgentEvent]]:
    runs: dict[str, list[AgentEvent]] = defaultdict(list)
    for event in events:
        runs[event.run_id].append(event)
    return dict(runs)


def test_every_event_of_a_run_carries_its_run_id() -> None:
    model = ScriptedModel([{"tool_calls": [{"noop": {}}]}, "one", "two"])
    agent = Agent(model, tools=[tool("noop", lambda: "ok")])
    events: list[AgentEvent] = []
    agent.subscribe(events.append)
    first = asyncio.run(agent.prompt("go"))
    second = asyncio.run(agent.prompt("again"))
    runs = by_run(events)
    assert list(runs) == [first.run_id, second.run_id]
    assert first.run_id and first.run_id != second.run_id
    for run in runs.values():  # each run's events, whole: from its agent_start to its end
        assert run[0].type == "agent_start" and run[-1].type == "agent_end"
        assert [e.type for e in run].count("agent_end") == 1
        assert {e.parent_run_id for e in run} == {None}


def test_nested_runs_have_their_own_id_and_name_their_parent() -> None:
    """A nested exec (from a sync tool, in a worker thread, or awaited by an async tool on
    the same loop) is a run of its own whose ``parent_run_id`` is the run that called the
    tool; a subscriber can rebuild the tree."""
    box: dict[str, Runtime] = {}

    def sync_research() -> str:
        return str(box["rt"].exec("sync dig", tools=[]))

    async def async_research() -> str:
        return str(await box["rt"].aexec("async dig", tools=[]))

    runtime, _, _ = make_runtime(
        [
            {"tool_calls": [{"sync_research": {}}, {"async_research": {}}]},
            "inner one",
            "inner two",
            "outer",
        ]
    )
    box["rt"] = runtime
    events: list[AgentEvent] = []
    runtime.subscribe(events.append)
    runtime.exec(
        "go", tools=[tool("sync_research", sync_research), tool("async_research", async_research)]
    )
    runs = by_run(events)
    assert len(runs) == 3
    outer_id = next(e.run_id for e in events if e.depth == 0)
    tree = {
        run_id: ({e.parent_run_id for e in run}, {e.depth for e in run})
        for run_id, run in runs.items()
    }
    assert tree.pop(outer_id) == ({None}, {0})
    assert list(tree.values()) == [({outer_id}, {1}), ({outer_id}, {1})]
    assert runtime.last_run is not None and runtime.last_run.loop.run_id == outer_id


def test_two_concurrent_execs_can_be_told_apart() -> None:
    async def reply(request: ScriptedRequest) -> Any:
        await asyncio.sleep(0)  # let the other exec run in between
        prompt = request.messages[0].text
        if request.round == 1:
            return {"tool_calls": [{"noop": {}}]}
        return f"{prompt} done"

    model = FunctionModel(reply)
    runtime = Runtime(provider=model, registry=ToolRegistry())
    events: list[AgentEvent] = []
    runtime.subscribe(events.append)
    noop = tool("noop", lambda: "ok")

    async def main() -> list[Any]:
        return list(
            await asyncio.gather(runtime.aexec("A", tools=[noop]), runtime.aexec("B", tools=[noop]))
        )

    assert asyncio.run(main()) == ["A done", "B done"]
    depths = [e.depth for e in events]
    assert set(depths) == {0}
    types = [e.type for e in events]
    assert types.index("agent_start", 1) < types.index("agent_end")  # they did interleave
    runs = by_run(events)
    assert len(runs) == 2
    for run in runs.values():
        assert run[0].type == "agent_start" and run[-1].type == "agent_end"
        texts = [e.message.text for e in run if e.type == "message_end"]
        assert texts[-1] in ("A done", "B done") and texts[0] == texts[-1][0]


def test_follow_ups_left_by_an_exec_that_ends_go_to_the_one_still_running() -> None:
    """Messages queued on a Runtime belong to its queue: they go to the oldest running exec,
    and what that exec leaves undelivered goes on to the next one still running (or back to
    the runtime's queue when none is)."""
    box: dict[str, asyncio.Event] = {}

    async def reply(request: ScriptedRequest) -> Any:
        await asyncio.sleep(0)
        if request.messages[0].text == "A":
            return "A done"
        if request.round == 1:
            return {"tool_calls": [{"wait": {}}]}
        return f"B round {request.round}"

    async def wait() -> str:
        await box["release"].wait()
        return "released"

    model = FunctionModel(reply)
    runtime = Runtime(provider=model, registry=ToolRegistry())
    runtime.follow_up("for whoever runs")

    async def main() -> tuple[Any, Any]:
        box["release"] = asyncio.Event()
        a = asyncio.ensure_future(runtime.aexec("A", tools=[], max_iterations=1))
        b = asyncio.ensure_future(runtime.aexec("B", tools=[tool("wait", wait)]))
        a_text = await a  # A reached its cap with the follow-up still queued
        box["release"].set()
        return a_text, await b

    assert asyncio.run(main()) == ("A done", "B round 3")
    b_requests = [r for r in model.requests if r.messages[0].text == "B"]
    assert [m.text for m in b_requests[-1].messages][-2:] == ["B round 2", "for whoever runs"]


@pytest.mark.parametrize("abort", [False, True])
def test_no_event_object_is_built_when_nobody_listens(
    monkeypatch: pytest.MonkeyPatch, abort: bool
) -> None:
    """Every event class the loop uses is replaced by one that fails when built; a run with
    tool calls, progress updates, a steering skip and an abort mid-batch needs none."""
    import openprogram.agent.agent_loop as loop
    import openprogram.events

    def refuse(**_: Any) -> Any:
        raise AssertionError("an event was built with no listener")

    for name in openprogram.events.__all__:
        if isinstance(getattr(loop, name, None), type):
            monkeypatch.setattr(loop, name, refuse)
    box: dict[str, Agent] = {}

    def work(on_update: Any) -> str:
        if on_update is not None:  # the loop passes none when nobody listens
            on_update("half way")
        if abort:
            box["agent"].abort()
        else:
            box["agent"].steer("change of plan")
        return "worked"

    model = ScriptedModel([{"tool_calls": [{"work": {}}, {"work": {}}]}, "done"])
    agent = Agent(model, tools=[tool("work", work)])
    box["agent"] = agent
    result = asyncio.run(agent.prompt("go"))
    assert result.reason == ("aborted" if abort else "stop")
    assert [m.role for m in result.messages][:4] == [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
    ]
