"""The invariants every run of the loop keeps, checked on its trace.

:func:`check_trace` (:mod:`openprogram_sim.fuzz._trace_invariants`) reads a trace alone
(any run: an exec, an Agent prompt); the checks that need to know what was asked for (caps
of nested execs, steering points, follow-ups, exec's result or error) are here, in
:func:`check_outcome_invariants`. Each violation is one line naming the invariant and where
it broke (``#i`` is the trace index).

The cap and the skip text are the seed's (:mod:`openprogram_sim.fuzz._rules`), never the
loop's own constants: a checker that shares the code under test cannot catch its bugs.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from openprogram.errors import ModelError, RunAbortedError
from openprogram_sim.fuzz._rules import effective_cap, is_skip_text
from openprogram_sim.fuzz._trace_invariants import CapFor, check_trace

__all__ = ["DOCUMENTED_ERRORS", "check_outcome_invariants", "check_trace"]

DOCUMENTED_ERRORS: tuple[type[BaseException], ...] = (ModelError, RunAbortedError)
"""What may leave ``exec`` when its run ends badly (misuse errors are raised before any
run starts, so a generated case never sees them)."""


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
    if not scenario.steering:
        return []  # nothing queued: no trace to read
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


class _Scan:
    """What the checks below read from a trace, gathered in one pass: the outer run's
    ``agent_end`` and last assistant ``message_end`` (the last of each at depth 0), the
    assistant messages (any depth), the outer run's user messages, and each steering skip
    (a ``tool_execution_end`` skipped with the seed's text) with whether it opens its
    round's skips (the first since the last depth-0 ``turn_start``)."""

    __slots__ = ("end", "last", "replies", "skips", "users")

    def __init__(self, trace: list[dict[str, Any]]) -> None:
        end = last = None
        replies = 0
        users: list[str] = []
        skips: list[tuple[int, dict[str, Any], bool]] = []
        skipping = False
        for i, e in enumerate(trace):
            kind = e["type"]
            if kind == "message_end":
                role = e["role"]
                if role == "assistant":
                    replies += 1
                    if e["depth"] == 0:
                        last = e
                elif role == "user" and e["depth"] == 0:
                    users.append(e["text"])
            elif kind == "tool_execution_end":
                if e.get("skipped") and is_skip_text(e["result"]):
                    first = e["depth"] == 0 and not skipping
                    if first:
                        skipping = True
                    skips.append((i, e, first))
            elif kind == "turn_start":
                if e["depth"] == 0:
                    skipping = False
            elif kind == "agent_end" and e["depth"] == 0:
                end = e
        self.end, self.last, self.replies = end, last, replies
        self.users, self.skips = users, skips


def _check_exit(outcome: Any, scan: _Scan, out: list[str]) -> None:
    error = outcome.error
    end, last = scan.end, scan.last
    if error is not None and not isinstance(error, DOCUMENTED_ERRORS):
        if not outcome.crashed:
            out.append(f"an undocumented exception left exec: {type(error).__name__}: {error}")
        elif end is None or end.get("reason") != "error":
            # a BaseException past `except Exception` (a tool's SystemExit) leaves exec by
            # design (docs/loop.md), once its run has ended on an error
            out.append(
                f"{type(error).__name__} left exec, yet the run did not end with an agent_end "
                "of reason error first"
            )
        return
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


def _check_queues(
    outcome: Any, scan: _Scan, triggers: list[tuple[int, str]], out: list[str]
) -> None:
    scenario = outcome.scenario
    # Each round with skips dequeued at least one steering message queued after the previous
    # dequeue (it may have been queued in an earlier round, while the loop held another).
    skip_rounds = 0
    for i, e, first in scan.skips:
        if e["depth"] != 0:
            out.append(
                f"#{i} a call of the depth-{e['depth']} run was skipped; no steering reaches it"
            )
        elif first:
            skip_rounds += 1
            before = sum(1 for at, _ in triggers if at < i)
            if before < skip_rounds:
                out.append(
                    f"#{i} calls skipped in round {e['round']}, but only {before} steering "
                    f"message(s) were queued before, for {skip_rounds} round(s) with skips"
                )
    users = scan.users
    prompt = scenario.exec.content
    if prompt is None:
        pass  # a conversation step that continues the history: no prompt is sent
    elif users and users[0] == prompt:
        users = users[1:]
    else:
        out.append("the outer run's first message is not the exec prompt")
    follow_ups = scenario.follow_ups
    if not users and not triggers and not follow_ups:
        return  # nothing delivered, nothing queued
    delivered = Counter(users)
    queued = Counter([t for _, t in triggers] + [f.text for f in follow_ups])
    end = scan.end
    if delivered - queued:
        out.append(f"user messages nobody queued were delivered: {sorted(delivered - queued)}")
    if end is not None and end.get("reason") == "stop" and queued - delivered:
        out.append(
            "the run finished (stop) with queued steering/follow-up messages never delivered: "
            f"{sorted(queued - delivered)}"
        )


def _check_steering_skips(outcome: Any, triggers: list[tuple[int, str]], out: list[str]) -> None:
    """Steering queued while the outer run works through a batch (at a tool's end, or
    inside a nested run) skips every call of the batch after the one running."""
    trace = outcome.trace
    for at, _ in triggers:
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
    ``replay`` (the same scenario run again), the same trace, result and error.

    A ``conversation:`` is checked exec by exec: each step is a run of its own (its
    ``agent_start`` follows the previous step's ``agent_end``)."""
    if getattr(outcome, "conversation", None):
        return _check_conversation(outcome, replay)
    return _check_one_exec(outcome, replay)


def _check_conversation(outcome: Any, replay: Any | None) -> list[str]:
    steps = outcome.steps
    again = replay.steps if replay is not None else [None] * len(steps)
    out: list[str] = []
    if len(again) != len(steps):
        out.append(f"the conversation ran {len(steps)} execs, then {len(again)} run again")
    for i, (step, twin) in enumerate(zip(steps, again, strict=False), start=1):
        out += [f"exec {i}: {problem}" for problem in _check_one_exec(step, twin)]
    return out


def _check_one_exec(outcome: Any, replay: Any | None) -> list[str]:
    trace = outcome.trace
    out = check_trace(trace, cap_for=_caps(outcome.scenario))
    scan = _Scan(trace)
    _check_exit(outcome, scan, out)
    replies = scan.replies
    if replies != outcome.model_calls:
        out.append(f"{outcome.model_calls} model calls but {replies} assistant messages")
    triggers = steering_triggers(outcome.scenario, trace)
    _check_queues(outcome, scan, triggers, out)
    _check_steering_skips(outcome, triggers, out)
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
