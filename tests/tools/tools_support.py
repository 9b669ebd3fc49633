"""Helpers for the tool-layer tests: event recording and scripted runtimes."""

from __future__ import annotations

from typing import Any

from openprogram import Runtime, ToolRegistry
from openprogram.events import AgentEvent
from openprogram_sim.models import ScriptedModel


class Recorder:
    """Collects a runtime's events as short strings (``type[:detail]@depth.round``)."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)

    def lines(self, *types: str) -> list[str]:
        """Events of the given types (all but message updates when none given)."""
        keep = set(types) or None
        out = []
        for e in self.events:
            if e.type == "message_update" or (keep is not None and e.type not in keep):
                continue
            out.append(f"{e.type}{_detail(e)}@{e.depth}.{e.round}")
        return out


def _detail(event: Any) -> str:
    if event.type == "tool_execution_end":
        return f":{event.tool_name}:{'error' if event.is_error else 'ok'}"
    if event.type in ("tool_execution_start", "tool_execution_update"):
        return f":{event.tool_name}"
    if event.type == "agent_end":
        return f":{event.reason}"
    if event.type in ("message_start", "message_end"):
        return f":{event.message.role}"
    return ""


def run_with(
    turns: list[Any], registry: ToolRegistry, **runtime_options: Any
) -> tuple[Runtime, ScriptedModel, Recorder]:
    """A runtime over a scripted model with a recorder subscribed."""
    model = ScriptedModel(turns)
    runtime = Runtime(provider=model, registry=registry, **runtime_options)
    recorder = Recorder()
    runtime.subscribe(recorder)
    return runtime, model, recorder


def tool_results(recorder: Recorder) -> list[tuple[str, bool, str]]:
    """(tool name, is_error, result text) of every finished tool call, in order."""
    return [
        (e.tool_name, e.is_error, e.result.text)
        for e in recorder.events
        if e.type == "tool_execution_end"
    ]
