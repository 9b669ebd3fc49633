"""Nested exec: a tool body that calls exec opens another loop, one level deeper."""

from __future__ import annotations

from typing import Any

import pytest
from _support import LAST_TURN_STOPS, OPENING, compact, make_runtime, tool

from openprogram import Runtime, ToolRegistry, current_depth
from openprogram_sim.models import ScriptedModel


def leaf(x: str) -> str:
    return f"leaf({x})"


LEAF = tool("leaf", leaf, {"x": {"type": "string"}}, ["x"])


def nested_tool(runtime_box: dict[str, Runtime], **exec_kwargs: Any) -> dict[str, Any]:
    def research(topic: str) -> str:
        return str(runtime_box["rt"].exec(f"look into {topic}", **exec_kwargs))

    return tool("research", research, {"topic": {"type": "string"}}, ["topic"])


def test_nested_exec_inherits_the_outer_tools_list() -> None:
    """Seed: "A nested exec inside a tool body inherits the outer call's tools= list (via
    the _current_tools contextvar)"."""
    box: dict[str, Runtime] = {}
    research = nested_tool(box)
    runtime, model, rec = make_runtime(
        [
            {"tool_calls": [{"research": {"topic": "bees"}}]},  # depth 0, round 1
            {"tool_calls": [{"leaf": {"x": "b"}}]},  # depth 1, round 1
            {"text": "bees are busy"},  # depth 1, round 2
            {"text": "Summary: bees are busy"},  # depth 0, round 2
        ]
    )
    box["rt"] = runtime
    assert runtime.exec("tell me", tools=[research, LEAF]) == "Summary: bees are busy"
    assert [(r.depth, r.round, r.tools) for r in model.requests] == [
        (0, 1, ["research", "leaf"]),
        (1, 1, ["research", "leaf"]),
        (1, 2, ["research", "leaf"]),
        (0, 2, ["research", "leaf"]),
    ]
    assert compact(rec.trace, depth=True) == [
        *OPENING,
        "message_end:assistant[research]/toolUse",
        "tool_start:research",
        "  agent_start",
        "  turn_start",
        "  message_start:user",
        "  message_end:user",
        "  message_start:assistant",
        "  message_end:assistant[leaf]/toolUse",
        "  tool_start:leaf",
        "  tool_end:leaf:ok",
        "  message_start:toolResult",
        "  message_end:toolResult",
        "  turn_end",
        "  turn_start",
        "  message_start:assistant",
        "  message_end:assistant[]/stop",
        "  turn_end",
        "  agent_end:stop",
        "tool_end:research:ok",
        "message_start:toolResult",
        "message_end:toolResult",
        *LAST_TURN_STOPS,
    ]
    research_end = next(
        e for e in rec.trace if e["type"] == "tool_execution_end" and e["tool_name"] == "research"
    )
    assert research_end["result"] == "bees are busy"


@pytest.mark.parametrize("opt_out", [{"tools": []}, {"toolset": "none"}])
def test_nested_exec_can_opt_out_of_tools(opt_out: dict[str, Any]) -> None:
    box: dict[str, Runtime] = {}
    runtime, model, _ = make_runtime(
        [
            {"tool_calls": [{"research": {"topic": "x"}}]},
            {"text": "inner answer"},
            {"text": "outer answer"},
        ]
    )
    box["rt"] = runtime
    runtime.exec("go", tools=[nested_tool(box, **opt_out), LEAF])
    assert [(r.depth, r.tools) for r in model.requests] == [
        (0, ["research", "leaf"]),
        (1, []),
        (0, ["research", "leaf"]),
    ]


def test_async_tool_body_can_await_aexec_on_the_same_loop() -> None:
    box: dict[str, Runtime] = {}
    depths: list[int] = []

    async def research(topic: str) -> str:
        depths.append(current_depth())
        return str(await box["rt"].aexec(f"about {topic}", tools=[LEAF]))

    runtime, model, rec = make_runtime(
        [
            {"tool_calls": [{"research": {"topic": "t"}}]},
            {"text": "inner"},
            {"text": "outer"},
        ]
    )
    box["rt"] = runtime
    assert (
        runtime.exec("go", tools=[tool("research", research, {"topic": {"type": "string"}})])
        == "outer"
    )
    assert depths == [0]
    assert [(r.depth, r.tools) for r in model.requests] == [
        (0, ["research"]),
        (1, ["leaf"]),
        (0, ["research"]),
    ]
    assert [e["depth"] for e in rec.trace if e["type"] == "agent_end"] == [1, 0]


def test_nested_error_becomes_the_outer_tools_error_result() -> None:
    box: dict[str, Runtime] = {}
    runtime, _, rec = make_runtime(
        [
            {"tool_calls": [{"research": {"topic": "x"}}]},
            {"stop_reason": "error", "error": "rate limited"},
            {"text": "could not research"},
        ]
    )
    box["rt"] = runtime
    assert runtime.exec("go", tools=[nested_tool(box)]) == "could not research"
    ends = [(e["depth"], e["type"], e.get("reason")) for e in rec.trace if e["type"] == "agent_end"]
    assert ends == [(1, "agent_end", "error"), (0, "agent_end", "stop")]
    research_end = next(e for e in rec.trace if e["type"] == "tool_execution_end")
    assert research_end["is_error"] is True and research_end["result"] == "rate limited"


def test_exec_without_tools_uses_the_registry_full_toolset() -> None:
    """Seed: "With neither tools= nor toolset= passed, exec resolves the FULL registry
    toolset"."""
    model = ScriptedModel(["ok", "ok", "ok"])
    registry = ToolRegistry([LEAF, tool("other", lambda: "o")])
    runtime = Runtime(provider=model, registry=registry)
    runtime.exec("a")
    runtime.exec("b", toolset="none")
    runtime.exec("c", tools=[])
    assert [r.tools for r in model.requests] == [["leaf", "other"], [], []]
