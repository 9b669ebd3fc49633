"""A run's timeline: its trace turned into the tree the report draws, as plain JSON.

::

    exec   {depth, reason, rounds: [round]}        reason None: the trace ends before agent_end
    round  {n, items: [item]}                       n: the trace's round number
    item   {kind: "user", label, text, entered}     label: prompt | steering | follow-up | user
           {kind: "model", text, picks, stop, error, usage}
           {kind: "tool", name, args, done, result, is_error, skipped, updates, nested: [exec]}
           {kind: "nested", exec}

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
    rounds: list[RoundNode]


class RoundNode(TypedDict):
    n: int | None
    items: list[Item]


class UserItem(TypedDict):
    kind: Literal["user"]
    label: Literal["prompt", "steering", "follow-up", "user"]
    text: str | None
    entered: bool


class ModelItem(TypedDict):
    kind: Literal["model"]
    text: str | None
    picks: list[str]
    stop: str | None
    error: str | None
    usage: dict[str, int] | None


class ToolItem(TypedDict):
    kind: Literal["tool"]
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
    exec: ExecNode


Item = UserItem | ModelItem | ToolItem | NestedItem


def is_skipped(entry: Entry) -> bool:
    """Whether a ``tool_execution_end`` entry is a call the loop skipped (its ``skipped``
    flag: the text is never compared)."""
    return bool(entry.get("skipped"))


def build_timeline(run: Mapping[str, Any]) -> ExecNode:
    """The tree of a run (its ``trace``, with the ``usage``, ``steering`` and ``follow_ups``
    of :func:`~openprogram_sim.report.run_entry`); the outer exec is the root."""
    builder = _Builder(run)
    for entry in run.get("trace") or ():
        builder.feed(entry)
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
        return cls({"depth": depth, "reason": None, "rounds": []})

    def round(self, n: int | None) -> RoundNode:
        """Round ``n``: the last round if it has that number, else a new one."""
        rounds = self.node["rounds"]
        if not rounds or rounds[-1]["n"] != n:
            rounds.append({"n": n, "items": []})
        return rounds[-1]

    def open_nested(self) -> _Exec:
        """A nested exec one level down, under the call that is running if there is one."""
        child = _Exec.at(self.node["depth"] + 1)
        host = self.running
        if host is not None and not host["done"]:
            host["nested"].append(child.node)
        else:
            rounds = self.node["rounds"]
            last = self.round(rounds[-1]["n"] if rounds else 0)
            last["items"].append({"kind": "nested", "exec": child.node})
        return child


class _Builder:
    def __init__(self, run: Mapping[str, Any]) -> None:
        self.root = _Exec.at(0)
        self.stack = [self.root]
        self.usage: Sequence[dict[str, int] | None] = run.get("usage") or ()
        self.calls = 0
        self.steering: Sequence[str] = run.get("steering") or ()
        self.follow_ups: Sequence[str] = run.get("follow_ups") or ()

    def feed(self, entry: Entry) -> None:
        exec_ = self._exec_of(entry)
        handler = _HANDLERS.get(entry.get("type"))
        if handler is not None:
            handler(self, exec_, entry)

    def _exec_of(self, entry: Entry) -> _Exec:
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
            stack.append(stack[-1].open_nested())
        return stack[-1]

    def user(self, exec_: _Exec, entry: Entry) -> None:
        round_ = exec_.round(entry.get("round"))
        text = entry.get("text")
        first = len(exec_.node["rounds"]) == 1 and not any(
            item["kind"] == "user" for item in round_["items"]
        )
        label = "prompt" if first else self._entered_as(text)
        round_["items"].append({"kind": "user", "label": label, "text": text, "entered": not first})

    def _entered_as(self, text: str | None) -> Literal["steering", "follow-up", "user"]:
        if text in self.steering:
            return "steering"
        if text in self.follow_ups:
            return "follow-up"
        return "user"

    def model(self, exec_: _Exec, entry: Entry) -> None:
        round_ = exec_.round(entry.get("round"))
        usage = self.usage[self.calls] if self.calls < len(self.usage) else None
        self.calls += 1
        round_["items"].append(
            {
                "kind": "model",
                "text": entry.get("text"),
                "picks": list(entry.get("tool_calls") or ()),
                "stop": entry.get("stop_reason"),
                "error": entry.get("error"),
                "usage": usage,
            }
        )


def _tool(entry: Entry) -> ToolItem:
    return {
        "kind": "tool",
        "name": entry.get("tool_name"),
        "args": entry.get("args"),
        "done": False,
        "result": None,
        "is_error": False,
        "skipped": False,
        "updates": 0,
        "nested": [],
    }


def _turn_start(builder: _Builder, exec_: _Exec, entry: Entry) -> None:
    exec_.round(entry.get("round"))


def _message_end(builder: _Builder, exec_: _Exec, entry: Entry) -> None:
    role = entry.get("role")
    if role == "user":
        builder.user(exec_, entry)
    elif role == "assistant":
        builder.model(exec_, entry)
    else:  # a tool result: its call's end shows it, but the round still opens
        exec_.round(entry.get("round"))


def _tool_start(builder: _Builder, exec_: _Exec, entry: Entry) -> None:
    tool = _tool(entry)
    exec_.round(entry.get("round"))["items"].append(tool)
    exec_.tools[entry.get("tool_call_id")] = tool
    exec_.running = tool


def _tool_update(builder: _Builder, exec_: _Exec, entry: Entry) -> None:
    tool = exec_.tools.get(entry.get("tool_call_id"))
    if tool is not None:
        tool["updates"] += 1


def _tool_end(builder: _Builder, exec_: _Exec, entry: Entry) -> None:
    tool = exec_.tools.get(entry.get("tool_call_id"))
    if tool is None:  # an end without its start is shown where it ended
        tool = _tool(entry)
        exec_.round(entry.get("round"))["items"].append(tool)
    tool["done"] = True
    tool["result"] = entry.get("result")
    tool["is_error"] = bool(entry.get("is_error"))
    tool["skipped"] = is_skipped(entry)


def _agent_end(builder: _Builder, exec_: _Exec, entry: Entry) -> None:
    exec_.node["reason"] = entry.get("reason")
    exec_.ended = True


_HANDLERS: dict[Any, Callable[[_Builder, _Exec, Entry], None]] = {
    "turn_start": _turn_start,
    "message_end": _message_end,
    "tool_execution_start": _tool_start,
    "tool_execution_update": _tool_update,
    "tool_execution_end": _tool_end,
    "agent_end": _agent_end,
}
