"""The invariants every run of the loop keeps, checked on its trace.

:func:`check_trace` reads a trace alone (any run: an exec, an Agent prompt); the checks
that need to know what was asked for (caps of nested execs, steering points, follow-ups,
exec's result or error) are in :func:`check_outcome_invariants`. Each violation is one
line naming the invariant and where it broke (``#i`` is the trace index).

The cap and the skip text are the seed's (:mod:`openprogram_sim.fuzz._rules`), never the
loop's own constants: a checker that shares the code under test cannot catch its bugs.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from openprogram.errors import ModelError, RunAbortedError
from openprogram_sim.fuzz._rules import HARD_CAP, SKIP_TEXT, effective_cap, is_skip_text

__all__ = ["DOCUMENTED_ERRORS", "check_outcome_invariants", "check_trace"]

DOCUMENTED_ERRORS: tuple[type[BaseException], ...] = (ModelError, RunAbortedError)
"""What may leave ``exec`` when its run ends badly (misuse errors are raised before any
run starts, so a generated case never sees them)."""

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
        handler = getattr(self, kind, None)
        if handler is None:
            self.fail(i, f"unknown event type {kind!r}")
        handler(i, e, frame)

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


def _plain_json(value: Any) -> bool:
    """Whether ``value`` is built only of dicts with str keys, lists, str, int, bool, None
    and floats other than NaN: what a JSON round trip gives back unchanged (a quick walk,
    a few times faster than the round trip; anything else is left to the round trip)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            if any(type(key) is not str for key in item):
                return False
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is float:
            if item != item:  # NaN
                return False
        elif not (kind is str or kind is int or kind is bool or item is None):
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
    if _plain_json(trace):
        return problems  # a JSON round trip gives it back unchanged: no need to run one
    try:
        if json.loads(json.dumps(trace)) != trace:
            problems.append("the trace does not survive a JSON round trip unchanged")
    except (TypeError, ValueError) as exc:
        problems.append(f"the trace is not JSON-serializable: {exc}")
    return problems


# --------------------------------------------------------------------------- with a scenario


def _caps(scenario: Any) -> CapFor:
    def cap_for(depth: int, tool: str | None) -> int | None:
        if depth == 0:
            return effective_cap(scenario.exec.max_iterations)
        spec = scenario.tools.get(tool) if tool is not None else None
        if spec is None or spec.exec is None:
            return None
        return effective_cap(spec.exec.max_iterations)

    return cap_for


def steering_triggers(scenario: Any, trace: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """``(trace index, text)`` of each steering message the scenario queued: after the
    N-th ``tool_execution_end`` (any depth) or the depth-0 ``turn_end`` of round N; every
    entry at one point, in file order."""
    by_tool: dict[int, list[str]] = {}
    by_round: dict[int, list[str]] = {}
    for s in scenario.steering:
        if s.after_tool is not None:
            by_tool.setdefault(s.after_tool, []).append(s.text)
        elif s.after_round is not None:
            by_round.setdefault(s.after_round, []).append(s.text)
    out: list[tuple[int, str]] = []
    ends = 0
    for i, e in enumerate(trace):
        if e["type"] == "tool_execution_end":
            ends += 1
            out.extend((i, text) for text in by_tool.get(ends, ()))
        elif e["type"] == "turn_end" and e["depth"] == 0:
            out.extend((i, text) for text in by_round.get(e["round"], ()))
    return out


def _outer(trace: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The outer run's agent_end and last assistant message_end."""
    end = next((e for e in reversed(trace) if e["type"] == "agent_end" and e["depth"] == 0), None)
    last = next(
        (
            e
            for e in reversed(trace)
            if e["type"] == "message_end" and e["depth"] == 0 and e["role"] == "assistant"
        ),
        None,
    )
    return end, last


def _check_exit(outcome: Any, out: list[str]) -> None:
    error = outcome.error
    if error is not None and not isinstance(error, DOCUMENTED_ERRORS):
        out.append(f"an undocumented exception left exec: {type(error).__name__}: {error}")
        return
    end, last = _outer(outcome.trace)
    if end is None:
        return
    reason = str(end.get("reason"))
    raised: dict[str, type[BaseException]] = {"error": ModelError, "aborted": RunAbortedError}
    expected = raised.get(reason)
    if expected is None and error is not None:
        out.append(f"the run ended {reason}, yet exec raised {type(error).__name__}: {error}")
    elif expected is not None and not isinstance(error, expected):
        got = "returned" if error is None else f"raised {type(error).__name__}"
        out.append(f"the run ended {reason}, so exec must raise {expected.__name__}; it {got}")
    elif error is None and last is not None and outcome.result != last.get("text"):
        out.append(
            f"exec returned {outcome.result!r}, not the final assistant text {last.get('text')!r}"
        )


def _check_queues(outcome: Any, out: list[str]) -> None:
    scenario, trace = outcome.scenario, outcome.trace
    triggers = steering_triggers(scenario, trace)
    # Each round with skips dequeued at least one steering message queued after the previous
    # dequeue (it may have been queued in an earlier round, while the loop held another).
    skip_rounds = 0
    skipping = False
    for i, e in enumerate(trace):
        if e["type"] == "turn_start" and e["depth"] == 0:
            skipping = False
        if e["type"] != "tool_execution_end" or not e.get("skipped"):
            continue
        if not is_skip_text(e["result"]):
            continue  # left unrun by an abort or an error, not by steering
        if e["depth"] != 0:
            out.append(
                f"#{i} a call of the depth-{e['depth']} run was skipped; no steering reaches it"
            )
        elif not skipping:
            skipping = True
            skip_rounds += 1
            before = sum(1 for at, _ in triggers if at < i)
            if before < skip_rounds:
                out.append(
                    f"#{i} calls skipped in round {e['round']}, but only {before} steering "
                    f"message(s) were queued before, for {skip_rounds} round(s) with skips"
                )
    users = [
        e["text"]
        for e in trace
        if e["type"] == "message_end" and e["depth"] == 0 and e["role"] == "user"
    ]
    if users and users[0] == scenario.exec.content:
        users = users[1:]
    else:
        out.append("the outer run's first message is not the exec prompt")
    delivered = Counter(users)
    queued = Counter([t for _, t in triggers] + [f.text for f in scenario.follow_ups])
    end, _ = _outer(trace)
    if delivered - queued:
        out.append(f"user messages nobody queued were delivered: {sorted(delivered - queued)}")
    if end is not None and end.get("reason") == "stop" and queued - delivered:
        out.append(
            "the run finished (stop) with queued steering/follow-up messages never delivered: "
            f"{sorted(queued - delivered)}"
        )


def _check_steering_skips(outcome: Any, out: list[str]) -> None:
    """Steering queued while the outer run works through a batch (at a tool's end, or
    inside a nested run) skips every call of the batch after the one running."""
    trace = outcome.trace
    for at, _ in steering_triggers(outcome.scenario, trace):
        if trace[at]["type"] == "turn_end":
            continue  # after a round: no batch is running
        running = next(
            (
                k
                for k in range(at, len(trace))
                if trace[k]["depth"] == 0 and trace[k]["type"] in ("tool_execution_end", "turn_end")
            ),
            None,
        )
        if running is None or trace[running]["type"] == "turn_end":
            continue
        for k in range(running + 1, len(trace)):
            e = trace[k]
            if e["depth"] != 0:
                continue
            if e["type"] == "turn_end":
                break
            if e["type"] == "tool_execution_end" and not e.get("skipped"):
                out.append(
                    f"#{k} tool call {e['tool_call_id']} ran after a steering message was "
                    f"queued at #{at} (steering skips the rest of the batch)"
                )
                return


def check_outcome_invariants(outcome: Any, *, replay: Any | None = None) -> list[str]:
    """Every invariant of a scenario run (``outcome``: a
    :class:`~openprogram_sim.scenario.RunOutcome`): :func:`check_trace` with each run's cap,
    plus: only documented exceptions leave exec, and the one that matches how the outer run
    ended; exec returns the final assistant text; the model was called once per assistant
    message; skips only when a steering message was queued (one per round with skips), and
    a steering message queued mid-batch skips the rest of it; every steering and follow-up
    message delivered at most once, and all of them when the run finished; and, given a
    ``replay`` (the same scenario run again), the same trace, result and error."""
    out = check_trace(outcome.trace, cap_for=_caps(outcome.scenario))
    _check_exit(outcome, out)
    replies = sum(
        1 for e in outcome.trace if e["type"] == "message_end" and e["role"] == "assistant"
    )
    if replies != outcome.model_calls:
        out.append(f"{outcome.model_calls} model calls but {replies} assistant messages")
    _check_queues(outcome, out)
    _check_steering_skips(outcome, out)
    if replay is not None:
        if replay.trace != outcome.trace:
            first = next(
                (
                    i
                    for i, (a, b) in enumerate(zip(outcome.trace, replay.trace, strict=False))
                    if a != b
                ),
                min(len(outcome.trace), len(replay.trace)),
            )
            out.append(f"the same scenario run again gives another trace (from #{first})")
        if replay.result != outcome.result or replay.error_text != outcome.error_text:
            out.append("the same scenario run again gives another result or error")
    return out
