"""What a fuzz campaign generated and ran, counted from the runs' traces."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from openprogram_sim.fuzz._invariants import steering_triggers
from openprogram_sim.play import RunOutcome

__all__ = ["FuzzStats"]


@dataclass(slots=True)
class FuzzStats:
    """What a campaign generated and ran."""

    runs: int = 0
    replays: int = 0
    rounds: int = 0
    """Model calls (assistant replies), all depths."""
    tool_calls: int = 0
    results: Counter[str] = field(default_factory=Counter)
    """Tool results by kind: ok, tool error, unknown tool, invalid arguments, skipped."""
    tools: Counter[str] = field(default_factory=Counter)
    """Tool calls by the name called (unknown names included)."""
    valid: Counter[str] = field(default_factory=Counter)
    """Calls that reached the tool (its arguments valid; a result or a tool error), by name."""
    faults: Counter[str] = field(default_factory=Counter)
    """Model turns that failed, by kind."""
    ends: Counter[str] = field(default_factory=Counter)
    """``agent_end.reason`` of every run (all depths)."""
    steering: int = 0
    """Steering messages injected (their trigger point was reached)."""
    follow_ups: int = 0
    nested_runs: int = 0
    max_depth: int = 0
    max_rounds: int = 0
    """The most rounds one run made."""

    def add(self, outcome: RunOutcome) -> None:
        self.runs += 1
        trace = outcome.trace
        rounds_by_run: list[int] = []
        for e in trace:
            kind = e["type"]
            if kind == "tool_execution_end":
                result = _result_kind(e)
                self.results[result] += 1
                if result in ("ok", "tool error"):
                    self.valid[e["tool_name"]] += 1
            elif kind == "agent_end":
                self.ends[e["reason"]] += 1
                rounds_by_run.append(e["round"])
            elif kind == "agent_start" and e["depth"] > 0:
                self.nested_runs += 1
                self.max_depth = max(self.max_depth, e["depth"])
            elif kind == "tool_execution_start":
                self.tool_calls += 1
                self.tools[e["tool_name"]] += 1
        calls = outcome.model_calls
        self.rounds += calls
        self.max_rounds = max(self.max_rounds, *rounds_by_run, 0)
        script = outcome.scenario.model if isinstance(outcome.scenario.model, list) else []
        turns = script[:calls]
        for turn in turns:
            if turn.fault is not None:
                self.faults[f"fault {turn.fault}"] += 1
            elif turn.stop_reason in ("error", "aborted"):
                self.faults[f"{turn.stop_reason} stop"] += 1
        if calls > len(turns):
            self.faults["script exhausted"] += calls - len(turns)
        scenario = outcome.scenario
        if scenario.steering:
            self.steering += len(steering_triggers(scenario, trace))
        self.follow_ups += len(scenario.follow_ups)

    def merge(self, other: FuzzStats) -> None:
        for name in ("runs", "replays", "rounds", "tool_calls", "steering", "follow_ups"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.nested_runs += other.nested_runs
        self.results.update(other.results)
        self.tools.update(other.tools)
        self.valid.update(other.valid)
        self.faults.update(other.faults)
        self.ends.update(other.ends)
        self.max_depth = max(self.max_depth, other.max_depth)
        self.max_rounds = max(self.max_rounds, other.max_rounds)

    def summary(self) -> list[str]:
        def counts(c: Counter[str]) -> str:
            return ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: -kv[1]))

        return [
            f"runs            {self.runs} (replayed and compared: {self.replays})",
            f"model calls     {self.rounds} (most in one run: {self.max_rounds})",
            f"tool calls      {self.tool_calls}: {counts(self.results)}",
            f"  by name       {counts(self.tools)}",
            f"model faults    {sum(self.faults.values())}: {counts(self.faults)}",
            f"runs ended      {counts(self.ends)}",
            f"steering        {self.steering} injected; follow-ups {self.follow_ups} queued",
            f"nested runs     {self.nested_runs} (deepest: depth {self.max_depth})",
        ]


def _result_kind(e: dict[str, Any]) -> str:
    if e.get("skipped"):
        return "skipped"
    if not e["is_error"]:
        return "ok"
    text = e["result"]
    if text.startswith("Tool ") and " not found (available: " in text:
        return "unknown tool"
    if text.startswith("Validation failed for tool "):
        return "invalid arguments"
    return "tool error"
