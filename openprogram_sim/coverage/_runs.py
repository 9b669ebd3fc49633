"""A trace read back as the loop's structure: runs (one per exec), their rounds, each round's
reply and tool calls, and the runs nested inside a call.

Only the trace and the requests are read. Each model call produces exactly one assistant
``message_end``, in call order, so the k-th reply is paired with the k-th recorded request
(the harness's runner records one per call, nested ones included).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Call", "Round", "Run", "read_runs"]


@dataclass(slots=True, kw_only=True)
class Call:
    """One tool call of a reply: its start and end events, and the runs opened inside it."""

    name: str
    id: str
    start: int | None = None
    end: int | None = None
    args: Any = None
    is_error: bool = False
    skipped: bool = False
    runs: list[Run] = field(default_factory=list)

    @property
    def ran(self) -> bool:
        """Whether the loop ran it (it has a result and was not skipped)."""
        return self.end is not None and not self.skipped

    @property
    def events(self) -> list[int]:
        return [i for i in (self.start, self.end) if i is not None]


@dataclass(slots=True, kw_only=True)
class Round:
    """One model call of a run, from its ``turn_start``."""

    number: int
    start: int
    inputs: list[int] = field(default_factory=list)
    """``message_end`` indices of the user messages that entered this round (the prompt,
    steering, follow-ups, a choices re-ask)."""
    reply: int | None = None
    """The assistant ``message_end`` index."""
    request: int | None = None
    """Index into the outcome's requests."""
    calls: list[Call] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class Run:
    """One exec: ``agent_start`` to ``agent_end``."""

    depth: int
    start: int
    end: int | None = None
    reason: str | None = None
    rounds: list[Round] = field(default_factory=list)
    parent: Call | None = None
    """The tool call whose body opened this run (None for the outer run)."""
    outer: Run | None = None

    @property
    def requests(self) -> list[int]:
        return [r.request for r in self.rounds if r.request is not None]

    def calls(self) -> Iterator[tuple[Round, Call]]:
        for round_ in self.rounds:
            for call in round_.calls:
                yield round_, call


_SKIPPED = frozenset({"message_start", "message_update", "tool_execution_update"})
"""Entries the structure does not need (their ``*_end`` carries the same fields)."""


def read_runs(trace: Sequence[Mapping[str, Any]]) -> list[Run]:
    """Every run of ``trace``, outer first, each nested run after the one that opened it."""
    runs: list[Run] = []
    stack: list[Run] = []
    replies = 0
    open_calls: dict[int, Call] = {}
    """The call being executed at each depth (a nested run's parent)."""
    for i, e in enumerate(trace):
        kind = e.get("type")
        if kind in _SKIPPED:
            continue
        depth = int(e.get("depth") or 0)
        if kind == "agent_start":
            outer = stack[-1] if stack else None
            run = Run(depth=depth, start=i, outer=outer, parent=open_calls.get(depth - 1))
            if run.parent is not None:
                run.parent.runs.append(run)
            runs.append(run)
            stack.append(run)
            continue
        run_or_none = _run_at(stack, depth)
        if run_or_none is None:
            continue
        run = run_or_none
        if kind == "agent_end":
            run.end, run.reason = i, e.get("reason")
            stack.remove(run)
        elif kind == "turn_start":
            run.rounds.append(Round(number=int(e.get("round") or 0), start=i))
        elif run.rounds:
            replies = _round_event(run.rounds[-1], e, i, replies, open_calls)
    return runs


def _run_at(stack: list[Run], depth: int) -> Run | None:
    for run in reversed(stack):
        if run.depth == depth:
            return run
    return None


def _round_event(
    round_: Round, e: Mapping[str, Any], i: int, replies: int, open_calls: dict[int, Call]
) -> int:
    kind = e.get("type")
    if kind == "message_end":
        if e.get("role") == "user":
            round_.inputs.append(i)
        elif e.get("role") == "assistant":
            round_.reply, round_.request = i, replies
            return replies + 1
    elif kind == "tool_execution_start":
        call = Call(name=str(e.get("tool_name")), id=str(e.get("tool_call_id")), start=i)
        call.args = e.get("args")
        round_.calls.append(call)
        open_calls[int(e.get("depth") or 0)] = call
    elif kind == "tool_execution_end":
        call = _find_call(round_, e)
        call.end, call.args = i, e.get("args")
        call.is_error, call.skipped = bool(e.get("is_error")), bool(e.get("skipped"))
        open_calls.pop(int(e.get("depth") or 0), None)
    return replies


def _find_call(round_: Round, e: Mapping[str, Any]) -> Call:
    wanted = str(e.get("tool_call_id"))
    for call in round_.calls:
        if call.id == wanted and call.end is None:
            return call
    call = Call(name=str(e.get("tool_name")), id=wanted)
    round_.calls.append(call)
    return call
