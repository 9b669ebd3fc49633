"""Shared test helpers: run an exec and read its trace compactly."""

from __future__ import annotations

from typing import Any

from openprogram import Runtime, ToolRegistry
from openprogram_sim.models import ScriptedModel
from openprogram_sim.trace import TraceRecorder


def compact(trace: list[dict[str, Any]], *, rounds: bool = False, depth: bool = False) -> list[str]:
    """One short string per trace entry, for asserting whole event sequences."""
    out = []
    for e in trace:
        t = e["type"]
        if t in ("message_start", "message_end"):
            s = f"{t}:{e['role']}"
            if t == "message_end" and e["role"] == "assistant":
                s += f"[{','.join(e['tool_calls'])}]/{e['stop_reason']}"
        elif t == "tool_execution_start":
            s = f"tool_start:{e['tool_name']}"
        elif t == "tool_execution_end":
            s = f"tool_end:{e['tool_name']}:{'error' if e['is_error'] else 'ok'}"
        elif t == "agent_end":
            s = f"agent_end:{e['reason']}"
        else:
            s = t
        if rounds:
            s += f"@{e['round']}"
        if depth:
            s = "  " * e["depth"] + s
        out.append(s)
    return out


def tool(
    name: str, fn: Any, properties: dict[str, Any] | None = None, required: list[str] | None = None
) -> dict[str, Any]:
    """A ``{"spec", "execute"}`` tool entry."""
    params: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        params["required"] = required
    return {
        "spec": {"name": name, "description": f"{name} tool", "parameters": params},
        "execute": fn,
    }


def make_runtime(turns: list[Any], **kwargs: Any) -> tuple[Runtime, ScriptedModel, TraceRecorder]:
    model = ScriptedModel(turns, **kwargs)
    runtime = Runtime(provider=model, registry=ToolRegistry())
    rec = TraceRecorder()
    runtime.subscribe(rec)
    return runtime, model, rec
