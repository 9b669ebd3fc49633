"""What an agent campaign served and what the agent did, counted per session."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from openprogram.tools import ArgumentsError, validate_tool_arguments
from openprogram_sim.fuzz.agent._scripts import fault_kind

__all__ = ["AgentStats"]


@dataclass(slots=True)
class AgentStats:
    """What a campaign over an agent served and saw. ``runs`` counts sessions (the
    progress line reads it as the other campaigns' runs)."""

    runs: int = 0
    model_calls: int = 0
    max_calls: int = 0
    """The most model calls one session made."""
    calls: Counter[str] = field(default_factory=Counter)
    """Tool calls served, by kind: valid, invalid arguments, unknown tool."""
    tools: Counter[str] = field(default_factory=Counter)
    """Tool calls served, by name."""
    results: int = 0
    """Tool results the agent sent back."""
    faults: Counter[str] = field(default_factory=Counter)
    """Faults served, by kind."""
    rechunked: int = 0
    """Turns served with each streamed event its own write."""
    ends: Counter[str] = field(default_factory=Counter)
    """How each run of the agent ended: finished, exit N, raised, timed out."""
    seconds: float = 0.0
    """Time in the agent's runs."""

    def add(
        self, turns: list[dict[str, Any]], served: int, trace: list[dict[str, Any]],
        known: dict[str, dict[str, Any]], ended: str, seconds: float, model_calls: int,
    ) -> None:  # fmt: skip
        self.runs += 1
        self.model_calls += model_calls
        self.max_calls = max(self.max_calls, model_calls)
        self.seconds += seconds
        self.ends[ended] += 1
        for turn in turns[:served]:
            kind = fault_kind(turn)
            if kind is not None:
                self.faults[kind] += 1
            elif "interval" in (turn.get("wire") or {}):
                self.rechunked += 1
            for call in turn.get("tool_calls") or []:
                name = call["name"]
                self.tools[name] += 1
                self.calls[_call_kind(call, known)] += 1
        self.results += sum(1 for e in trace if e["type"] == "tool_execution_end")

    def summary(self) -> list[str]:
        def counts(c: Counter[str]) -> str:
            return ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: -kv[1]))

        served = sum(self.calls.values())
        return [
            f"sessions        {self.runs} ({self.seconds:.1f}s in the agent)",
            f"model calls     {self.model_calls} (most in one session: {self.max_calls})",
            f"tool calls      {served} served: {counts(self.calls) or 'none'}; "
            f"{self.results} results sent back",
            f"  by name       {counts(self.tools) or 'none'}",
            f"faults          {sum(self.faults.values())}: {counts(self.faults) or 'none'}; "
            f"{self.rechunked} turns re-chunked",
            f"agent runs      {counts(self.ends)}",
        ]


def _call_kind(call: dict[str, Any], known: dict[str, dict[str, Any]]) -> str:
    """``known``: the agent's tools, name -> schema."""
    name = call["name"]
    if name not in known:
        return "unknown tool"
    try:
        validate_tool_arguments(name, known[name] or {"type": "object"}, call.get("arguments"))
    except (ArgumentsError, TypeError, ValueError):
        return "invalid arguments"
    return "valid"
