"""A run's timeline: its trace turned into the tree the report draws, as plain JSON.

::

    exec   {depth, reason, start, end, rounds: [round]}
    round  {n, at, items: [item]}
    item   {kind: "user", at, label, text, entered}
           {kind: "model", at, text, picks, stop, error, usage}
           {kind: "tool", at, name, args, done, result, is_error, skipped, updates, nested: [exec]}
           {kind: "nested", at, exec}

An exec's ``reason`` is None when the trace ends before its ``agent_end``; a round's ``n`` is
the trace's round number; a user item's ``label`` is prompt, steering, follow-up or user.

Every node carries the numbers of the trace entries it was built from, the ``#N`` a failure's
diff names (an entry's position in the trace as recorded: the run's ``numbers``, since the
report's copy of the trace leaves some entries out). An exec has its ``agent_start`` and
``agent_end`` (``start``, ``end``: None when the trace has none); a round and an item list
theirs in ``at``, in trace order: a round its ``turn_start`` and ``turn_end``, a user or model
item its ``message_end``, a tool item its start, updates and end (its tool result message is
not among them: the end shows the result), a ``nested`` item the entry that opened the exec.

A nested exec hangs under the tool call whose body opened it (that call's ``nested``); one
that starts while no call of its parent is running is a ``nested`` item in the parent's
last round. A user message is the ``prompt`` when it is the first of its exec's first round;
any later one ``entered`` the run and is labelled by the run's ``steering`` and
``follow_ups`` texts. Model items take the run's ``usage`` in the order of the model calls.
A tool call the trace shows no end for stays ``done: false`` (the run ended first).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

__all__ = ["ExecNode", "build_timeline", "is_skipped"]


Entry = Mapping[str, Any]


class ExecNode(TypedDict):
    depth: int
    reason: str | None
    start: int | None
    end: int | None
    rounds: list[RoundNode]


class RoundNode(TypedDict):
    n: int | None
    at: list[int]
    items: list[Item]


_ORIGIN_LABELS: dict[str, Literal["prompt", "steering", "follow-up"]] = {
    "prompt": "prompt",
    "steering": "steering",
    "follow_up": "follow-up",
}


class UserItem(TypedDict):
    kind: Literal["user"]
    at: list[int]
    label: Literal["prompt", "steering", "follow-up", "user"]
    text: str | None
    entered: bool


class ModelItem(TypedDict):
    kind: Literal["model"]
    at: list[int]
    text: str | None
    picks: list[str]
    stop: str | None
    error: str | None
    usage: dict[str, int] | None


class ToolItem(TypedDict):
    kind: Literal["tool"]
    at: list[int]
    name: str | None
    args: Any
    done: bool
    result: str | None
    is_error: bool
    skipped: bool
    updates: int
    nested: list[ExecNode]


class NestedItem(TypedDict):
    kind: Literal["nested"]
    at: list[int]
    exec: ExecNode


Item = UserItem | ModelItem | ToolItem | NestedItem


def is_skipped(entry: Entry) -> bool:
    """Whether a ``tool_execution_end`` entry is a call the loop skipped (its ``skipped``
    flag: the text is never compared)."""
    return bool(entry.get("skipped"))


def build_timeline(run: Mapping[str, Any]) -> ExecNode:
    """The tree of a run (its ``trace``, with the ``numbers``, ``usage``, ``steering`` and
    ``follow_ups`` of :func:`~openprogram_sim.report.run_entry`); the outer exec is the root.
    Without ``numbers``, entry ``i`` of the trace is ``#i``."""
    trace: Sequence[Entry] = run.get("trace") or ()
    numbers: Sequence[int] | None = run.get("numbers")
    if numbers is None:
        numbers = range(len(trace))
    elif len(numbers) != len(trace):
        raise ValueError(
            f"run['numbers'] has {len(numbers)} numbers for {len(trace)} trace entries; "
            "give one per entry (its position in the trace as recorded), or leave it out"
        )
    builder = _Builder(run)
    for number, entry in zip(numbers, trace, strict=True):
        builder.feed(entry, number)
    return builder.root.node


@dataclass
class _Exec:
    """An exec being built: its node, and what only the builder needs to know about it."""

    node: ExecNode
    tools: dict[Any, ToolItem] = field(default_factory=dict)
    """Its calls by ``tool_call_id``, to find a call's updates and end."""
    running: ToolItem | None = None
    """The call started last: a nested exec that opens before it ends is its body's."""
    ended: bool = False

    @classmethod
    def at(cls, depth: int) -> _Exec:
        return cls({"depth": depth, "reason": None, "start": None, "end": None, "rounds": []})

    def round(self, n: int | None) -> RoundNode:
        """Round ``n``: the last round if it has that number, else a new one."""
        rounds = self.node["rounds"]
        if not rounds or rounds[-1]["n"] != n:
            rounds.append({"n": n, "at": [], "items": []})
        return rounds[-1]

    def open_nested(self, number: int) -> _Exec:
        """A nested exec one level down (opened by entry ``number``), under the call that is
        running if there is one."""
        child = _Exec.at(self.node["depth"] + 1)
        host = self.running
        if host is not None and not host["done"]:
            host["nested"].append(child.node)
        else:
            rounds = self.node["rounds"]
            last = self.round(rounds[-1]["n"] if rounds else 0)
            last["items"].append({"kind": "nested", "at": [number], "exec": child.node})
        return child


class _Builder:
    def __init__(self, run: Mapping[str, Any]) -> None:
        self.root = _Exec.at(0)
        self.stack = [self.root]
        self.usage: Sequence[dict[str, int] | None] = run.get("usage") or ()
        self.calls = 0
        self.steering: Sequence[str] = run.get("steering") or ()
        self.follow_ups: Sequence[str] = run.get("follow_ups") or ()

    def feed(self, entry: Entry, number: int) -> None:
        exec_ = self._exec_of(entry, number)
        handler = _HANDLERS.get(entry.get("type"))
        if handler is not None:
            handler(self, exec_, entry, number)

    def _exec_of(self, entry: Entry, number: int) -> _Exec:
        """The exec an entry belongs to: leave the deeper ones it is out of, and open the
        ones it is in (an ``agent_start`` beside a nested exec that ended opens a new one)."""
        depth = entry.get("depth") or 0
        stack = self.stack
        while len(stack) > 1 and depth < stack[-1].node["depth"]:
            stack.pop()
        top = stack[-1]
        again = entry.get("type") == "agent_start" and top.ended and depth == top.node["depth"]
        if again and len(stack) > 1:
            stack.pop()
        while depth > stack[-1].node["depth"]:
            stack.append(stack[-1].open_nested(number))
        return stack[-1]

    def user(self, exec_: _Exec, entry: Entry, number: int) -> None:
        round_ = exec_.round(entry.get("round"))
        text = entry.get("text")
        first = len(exec_.node["rounds"]) == 1 and not any(
            item["kind"] == "user" for item in round_["items"]
        )
        # a trace recorded without origins: told apart by their texts
        label: Literal["prompt", "steering", "follow-up", "user"] = _ORIGIN_LABELS.get(
            str(entry.get("origin"))
        ) or ("prompt" if first else self._entered_as(text))
        entered = label != "prompt"
        round_["items"].append(
            {"kind": "user", "at": [number], "label": label, "text": text, "entered": entered}
        )

    def _entered_as(self, text: str | None) -> Literal["steering", "follow-up", "user"]:
        if text in self.steering:
            return "steering"
        if text in self.follow_ups:
            return "follow-up"
        return "user"

    def model(self, exec_: _Exec, entry: Entry, number: int) -> None:
        round_ = exec_.round(entry.get("round"))
        usage = self.usage[self.calls] if self.calls < len(self.usage) else None
        self.calls += 1
        round_["items"].append(
            {
                "kind": "model",
                "at": [number],
                "text": entry.get("text"),
                "picks": list(entry.get("tool_calls") or ()),
                "stop": entry.get("stop_reason"),
                "error": entry.get("error"),
                "usage": usage,
            }
        )


def _tool(entry: Entry, number: int) -> ToolItem:
    return {
        "kind": "tool",
        "at": [number],
        "name": entry.get("tool_name"),
        "args": entry.get("args"),
        "done": False,
        "result": None,
        "is_error": False,
        "skipped": False,
        "updates": 0,
        "nested": [],
    }


def _agent_start(builder: _Builder, exec_: _Exec, entry: Entry, number: int) -> None:
    exec_.node["start"] = number


def _turn(builder: _Builder, exec_: _Exec, entry: Entry, number: int) -> None:
    exec_.round(entry.get("round"))["at"].append(number)


def _message_end(builder: _Builder, exec_: _Exec, entry: Entry, number: int) -> None:
    role = entry.get("role")
    if role == "user":
        builder.user(exec_, entry, number)
    elif role == "assistant":
        builder.model(exec_, entry, number)
    else:  # a tool result: its call's end shows it, but the round still opens
        exec_.round(entry.get("round"))


def _tool_start(builder: _Builder, exec_: _Exec, entry: Entry, number: int) -> None:
    tool = _tool(entry, number)
    exec_.round(entry.get("round"))["items"].append(tool)
    exec_.tools[entry.get("tool_call_id")] = tool
    exec_.running = tool


def _tool_update(builder: _Builder, exec_: _Exec, entry: Entry, number: int) -> None:
    tool = exec_.tools.get(entry.get("tool_call_id"))
    if tool is not None:
        tool["updates"] += 1
        tool["at"].append(number)


def _tool_end(builder: _Builder, exec_: _Exec, entry: Entry, number: int) -> None:
    tool = exec_.tools.get(entry.get("tool_call_id"))
    if tool is None:  # an end without its start is shown where it ended
        tool = _tool(entry, number)
        exec_.round(entry.get("round"))["items"].append(tool)
    else:
        tool["at"].append(number)
    tool["done"] = True
    tool["result"] = entry.get("result")
    tool["is_error"] = bool(entry.get("is_error"))
    tool["skipped"] = is_skipped(entry)


def _agent_end(builder: _Builder, exec_: _Exec, entry: Entry, number: int) -> None:
    exec_.node["reason"] = entry.get("reason")
    exec_.node["end"] = number
    exec_.ended = True


_HANDLERS: dict[Any, Callable[[_Builder, _Exec, Entry, int], None]] = {
    "agent_start": _agent_start,
    "turn_start": _turn,
    "turn_end": _turn,
    "message_end": _message_end,
    "tool_execution_start": _tool_start,
    "tool_execution_update": _tool_update,
    "tool_execution_end": _tool_end,
    "agent_end": _agent_end,
}
