"""The structural invariants of a trace, read alone (any run: an exec, an Agent prompt):
:func:`check_trace`. Each violation is one line naming the invariant and where it broke
(``#i`` is the trace index). The checks that need the scenario are in
:mod:`openprogram_sim.fuzz._invariants`.

The cap and the skip text are the seed's (:mod:`openprogram_sim.fuzz._rules`), never the
loop's own constants: a checker that shares the code under test cannot catch its bugs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from openprogram_sim.fuzz._rules import HARD_CAP, SKIP_TEXT, is_skip_text
from openprogram_sim.trace._normalize import EVENT_FIELDS

__all__ = ["CapFor", "check_trace"]

CapFor = Callable[[int, "str | None"], "int | None"]
"""``cap_for(depth, enclosing_tool_name)``: the round cap of that run, if known."""


class _Stop(Exception):
    """A structural violation: later events would only report its consequences."""


@dataclass(slots=True)
class _Frame:
    """One run (agent_start .. agent_end) while its events are read."""

    depth: int
    tool: str | None
    cap: int | None
    rounds: int = 0
    turn_open: bool = False
    message: dict[str, Any] | None = None
    tool_open: dict[str, Any] | None = None
    calls: list[str] | None = None
    stop: str | None = None
    results: list[dict[str, Any]] = field(default_factory=list)
    awaiting_result_message: str | None = None
    delivered: int = 0
    ids: set[str] = field(default_factory=set)
    must_end: str | None = None
    incomplete: str | None = None
    expect_steering: bool = False
    unrun: bool = False
    """Calls of the last round were left unrun (skipped, not for steering): the run ends."""
    last_calls: list[str] = field(default_factory=list)
    last_stop: str | None = None


class _Checker:
    def __init__(self, trace: list[dict[str, Any]], cap_for: CapFor | None) -> None:
        self.trace = trace
        self.cap_for = cap_for
        self.stack: list[_Frame] = []
        self.closed = False
        self.out: list[str] = []

    def fail(self, i: int, message: str) -> NoReturn:
        self.out.append(f"#{i} {message}")
        raise _Stop

    def run(self) -> list[str]:
        if not self.trace:
            return ["the trace is empty: no agent_start, no agent_end"]
        try:
            for i, event in enumerate(self.trace):
                self.step(i, event)
            if self.stack:
                depths = [f.depth for f in self.stack]
                self.fail(
                    len(self.trace), f"the trace ends with runs open (no agent_end) at {depths}"
                )
        except _Stop:
            pass
        return self.out

    # -- dispatch ------------------------------------------------------------------------

    def step(self, i: int, e: dict[str, Any]) -> None:
        kind = e["type"]
        if self.closed:
            self.fail(i, f"{kind} after the outer run's agent_end (agent_end must be last)")
        if kind == "agent_start":
            self.agent_start(i, e)
            return
        if not self.stack:
            self.fail(i, f"{kind} before any agent_start")
        frame = self.stack[-1]
        if e["depth"] != frame.depth:
            self.fail(
                i,
                f"{kind} at depth {e['depth']} while the innermost open run is at depth "
                f"{frame.depth} (a run's events must stay inside it; one agent_end per run)",
            )
        if kind != "turn_start" and e["round"] != frame.rounds:
            self.fail(i, f"{kind} says round {e['round']}, but the run is in round {frame.rounds}")
        handler = _HANDLERS.get(kind)
        if handler is None:
            self.fail(i, f"unknown event type {kind!r}")
        handler(self, i, e, frame)

    def agent_start(self, i: int, e: dict[str, Any]) -> None:
        if self.stack:
            outer = self.stack[-1]
            if e["depth"] != outer.depth + 1 or outer.tool_open is None:
                self.fail(
                    i,
                    f"agent_start at depth {e['depth']} outside a running tool of the depth "
                    f"{outer.depth} run (a nested run opens inside its tool call)",
                )
            tool = outer.tool_open["tool_name"]
        elif e["depth"] != 0 or i != 0:
            self.fail(i, "the trace must open with agent_start at depth 0")
        else:
            tool = None
        cap = self.cap_for(e["depth"], tool) if self.cap_for is not None else None
        self.stack.append(_Frame(e["depth"], tool, cap))

    # -- turns ---------------------------------------------------------------------------

    def turn_start(self, i: int, e: dict[str, Any], f: _Frame) -> None:
        if f.turn_open:
            self.fail(i, f"turn_start while round {f.rounds} is still open (unbalanced turns)")
        if f.must_end:
            self.fail(i, f"the loop went on after a {f.must_end} stop (it must end the run)")
        if f.incomplete:
            self.fail(i, f"the loop went on although {f.incomplete}")
        if f.unrun:
            self.fail(i, "the loop went on after leaving calls unrun (only an end does that)")
        f.rounds += 1
        if e["round"] != f.rounds:
            self.fail(i, f"turn_start says round {e['round']}, expected {f.rounds}")
        limit = f.cap if f.cap is not None else HARD_CAP
        if f.rounds > limit:
            self.fail(i, f"round {f.rounds} exceeds the cap of {limit} model calls")
        f.turn_open = True
        f.calls = None
        f.stop = None
        f.results = []
        f.delivered = 0

    def turn_end(self, i: int, e: dict[str, Any], f: _Frame) -> None:
        if not f.turn_open:
            self.fail(i, "turn_end without turn_start (unbalanced turns)")
        # an aborted tool may end without its toolResult message: judged at agent_end
        missing, f.awaiting_result_message = f.awaiting_result_message, None
        self._nothing_open(i, "turn_end", f)
        if f.calls is None:
            self.fail(i, f"round {f.rounds} ended without an assistant message")
        if e.get("tool_calls") != f.calls or e.get("stop_reason") != f.stop:
            self.fail(i, "turn_end disagrees with the round's assistant message")
        if e.get("tool_results") != f.delivered:
            self.fail(
                i,
                f"turn_end counts {e.get('tool_results')} tool results, the round fed back "
                f"{f.delivered}",
            )
        if f.stop in ("error", "aborted"):
            f.must_end = f.stop
        elif missing is not None:
            f.incomplete = (
                f"tool call {missing} got no toolResult message (every tool result is fed "
                "back to the model)"
            )
        elif len(f.results) != len(f.calls):
            f.incomplete = (
                f"round {f.rounds} has {len(f.calls)} tool call(s) but {len(f.results)} "
                "result(s) (every call gets exactly one result)"
            )
        skips = [r for r in f.results if r.get("skipped")]
        if any(is_skip_text(r["result"]) for r in skips):
            f.expect_steering = True
        elif skips:
            f.unrun = True
        f.last_calls, f.last_stop = f.calls, f.stop
        f.turn_open = False

    def _nothing_open(self, i: int, kind: str, f: _Frame) -> None:
        if f.message is not None:
            self.fail(i, f"{kind} while a {f.message['role']} message is open (no message_end)")
        if f.tool_open is not None:
            self.fail(i, f"{kind} while tool call {f.tool_open['tool_call_id']} is running")
        if f.awaiting_result_message is not None:
            self.fail(
                i,
                f"{kind} before the toolResult message of {f.awaiting_result_message} "
                "(every tool result is fed back as a message)",
            )

    # -- messages ------------------------------------------------------------------------

    def message_start(self, i: int, e: dict[str, Any], f: _Frame) -> None:
        if not f.turn_open:
            self.fail(i, "message_start outside a turn")
        if f.message is not None or f.tool_open is not None:
            self.fail(i, "message_start while a message or a tool call is open")
        role = e["role"]
        if role == "toolResult":
            if f.awaiting_result_message != e.get("tool_call_id"):
                self.fail(
                    i,
                    f"toolResult message for {e.get('tool_call_id')} that does not follow its "
                    "tool_execution_end (ids must pair, in call order)",
                )
        elif f.awaiting_result_message is not None:
            self._nothing_open(i, "message_start", f)
        if f.expect_steering:
            if role != "user":
                self.fail(
                    i,
                    "calls were skipped, but the next round does not open with the steering "
                    "message (skipped results come only with a steering message)",
                )
            f.expect_steering = False
        f.message = e

    def message_update(self, i: int, e: dict[str, Any], f: _Frame) -> None:
        if f.message is None or f.message["role"] != e["role"]:
            self.fail(i, "message_update outside its message")

    def message_end(self, i: int, e: dict[str, Any], f: _Frame) -> None:
        if f.message is None or f.message["role"] != e["role"]:
            self.fail(i, f"message_end ({e['role']}) without its message_start")
        f.message = None
        role = e["role"]
        if role == "assistant":
            if f.calls is not None:
                self.fail(i, f"a second assistant message in round {f.rounds}")
            f.calls = list(e.get("tool_calls") or [])
            f.stop = e.get("stop_reason")
        elif role == "toolResult":
            f.awaiting_result_message = None
            f.delivered += 1
        elif f.calls is not None:
            self.fail(i, "a user message after the assistant's reply in the same round")

    # -- tools ---------------------------------------------------------------------------

    def tool_execution_start(self, i: int, e: dict[str, Any], f: _Frame) -> None:
        self._nothing_open(i, "tool_execution_start", f)
        if f.calls is None:
            self.fail(i, "a tool ran before the assistant message of its round")
        if f.stop in ("error", "aborted"):
            self.fail(i, f"tool {e['tool_name']} ran after a {f.stop} stop")
        k = len(f.results)
        if k >= len(f.calls):
            self.fail(i, f"tool execution #{k + 1} in a round with {len(f.calls)} call(s)")
        if e["tool_name"] != f.calls[k]:
            self.fail(
                i,
                f"tool execution #{k + 1} is {e['tool_name']}, but call #{k + 1} is "
                f"{f.calls[k]} (calls run in order)",
            )
        if e["tool_call_id"] in f.ids:
            self.fail(i, f"tool call id {e['tool_call_id']} executed twice")
        f.ids.add(e["tool_call_id"])
        f.tool_open = e

    def tool_execution_update(self, i: int, e: dict[str, Any], f: _Frame) -> None:
        if f.tool_open is None or f.tool_open["tool_call_id"] != e["tool_call_id"]:
            self.fail(i, "tool_execution_update outside its tool call")

    def tool_execution_end(self, i: int, e: dict[str, Any], f: _Frame) -> None:
        start = f.tool_open
        if start is None or start["tool_call_id"] != e["tool_call_id"]:
            self.fail(i, f"tool_execution_end for {e['tool_call_id']} without its start")
        if start["tool_name"] != e["tool_name"]:
            self.fail(i, "tool_execution_end names another tool than its start")
        skipped = bool(e.get("skipped"))
        if skipped and not e["is_error"]:
            self.fail(i, "a skipped call's result is not an error result")
        previous = [bool(r.get("skipped")) for r in f.results]
        if skipped and is_skip_text(e["result"]) and not previous:
            self.fail(i, "the first call of a round was skipped (skips follow a finished call)")
        if previous and previous[-1] and not skipped:
            self.fail(i, "a call ran after a skipped one (steering skips every remaining call)")
        f.tool_open = None
        f.results.append(e)
        f.awaiting_result_message = e["tool_call_id"]

    # -- the end -------------------------------------------------------------------------

    def agent_end(self, i: int, e: dict[str, Any], f: _Frame) -> None:
        if f.turn_open:
            self.fail(
                i, f"agent_end while round {f.rounds} is open (every turn_start has a turn_end)"
            )
        self._nothing_open(i, "agent_end", f)
        reason = e.get("reason")
        if f.must_end and reason != f.must_end:
            self.fail(i, f"the run ended on a {f.must_end} stop but agent_end says {reason}")
        if f.incomplete and reason != "aborted":
            self.fail(i, f"{f.incomplete}, and the run ended {reason}, not aborted")
        if reason == "stop" and (f.last_calls or f.last_stop in ("error", "aborted")):
            self.fail(i, "agent_end says stop, but the last reply was not a text-only finish")
        if reason == "stop" and f.expect_steering:
            self.fail(i, "calls were skipped, but no steering message was delivered")
        if f.unrun and reason not in ("aborted", "error"):
            self.fail(
                i,
                f"calls were left unrun with a result that is not the steering skip's "
                f"{SKIP_TEXT!r}, yet the run ended {reason} (only an abort or an error leaves "
                "calls unrun)",
            )
        if reason == "cap" and f.cap is not None and f.rounds != f.cap:
            self.fail(i, f"agent_end says cap after {f.rounds} rounds; the cap is {f.cap}")
        if reason not in ("stop", "error", "aborted", "cap"):
            self.fail(i, f"agent_end has reason {reason!r}")
        self.stack.pop()
        if not self.stack:
            self.closed = True


_HANDLERS: dict[str, Callable[[_Checker, int, dict[str, Any], _Frame], None]] = {
    kind: getattr(_Checker, kind)
    for kind in (
        "turn_start",
        "turn_end",
        "message_start",
        "message_update",
        "message_end",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "agent_end",
    )
}
"""What reads each event type inside a run (``agent_start`` opens one: read before)."""


def _plain_json(value: Any) -> bool:
    """Whether ``value`` is built only of dicts with str keys, lists, str, int, bool, None
    and floats other than NaN: what a JSON round trip gives back unchanged (a quick walk,
    a few times faster than the round trip; anything else is left to the round trip).

    Each container's members are looked at where they are met: the scalars (nearly every
    value of a trace) are never put on the walk's stack, and a dict's keys are checked in
    one pass over the set of their types."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            if item and set(map(type, item)) != _STR_ONLY:
                return False
            members = item.values()
        elif kind is list:
            members = item
        else:
            members = (item,)
        for member in members:
            kind = type(member)
            if kind is str or kind is int or kind is bool or member is None:
                continue
            if kind is dict or kind is list:
                stack.append(member)
            elif kind is not float or member != member:  # anything else, or NaN
                return False
    return True


_STR_ONLY = {str}

_ENTRY_KEYS = frozenset(key for keys in EVENT_FIELDS.values() for key in keys)
"""Every key a trace entry may have (all of them str)."""
_LEAVES = frozenset({str, int, bool, type(None)})


def _plain_trace(trace: Any) -> bool:
    """:func:`_plain_json` of a trace, a few times faster on the entries a recorder writes:
    an entry whose keys are all trace field names (so str: a str subclass equal to one
    survives the round trip as well) has its values looked at one by one, its lists and
    dicts walked by :func:`_plain_json`; anything else goes to :func:`_plain_json` whole.
    Only ever True where a JSON round trip gives the trace back unchanged."""
    if type(trace) is not list:
        return _plain_json(trace)
    keys, leaves = _ENTRY_KEYS, _LEAVES
    for entry in trace:
        if type(entry) is not dict or not keys.issuperset(entry):
            return _plain_json(trace)
        for member in entry.values():
            kind = type(member)
            if kind in leaves:
                continue
            if kind is list or kind is dict:
                if not _plain_json(member):
                    return False
            elif kind is not float or member != member:  # anything else, or NaN
                return False
    return True


def check_trace(trace: list[dict[str, Any]], *, cap_for: CapFor | None = None) -> list[str]:
    """The structural invariants of a trace: one ``agent_end`` per run, last of it; runs,
    turns, messages and tool calls balanced at every depth, nested runs only inside a
    running tool; rounds numbered from 1 and within the cap; every tool call of a reply
    executed once, in call order, each followed by its toolResult message (ids paired);
    skips only as the tail of a round, followed by the steering message; no tool after an
    ``error``/``aborted`` stop, and such a stop ends the run; ``agent_end.reason``
    consistent with how the run ended. Returns the violations (empty when it holds)."""
    problems = _Checker(trace, cap_for).run()
    if _plain_trace(trace):
        return problems  # a JSON round trip gives it back unchanged: no need to run one
    try:
        if json.loads(json.dumps(trace)) != trace:
            problems.append("the trace does not survive a JSON round trip unchanged")
    except (TypeError, ValueError) as exc:
        problems.append(f"the trace is not JSON-serializable: {exc}")
    return problems
