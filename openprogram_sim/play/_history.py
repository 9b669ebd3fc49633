"""The run's final history: the messages the model would see next (``expect.history``).

An outer exec's agent holds the history it was given, then every message the run adds (the
prompt, replies, tool results, steering and follow-ups). The run's events carry the added
ones (``agent_end``'s ``messages``); the given ones are the scenario's ``history:`` (or, in a
conversation, what the execs before added to it). For a ``call:`` entry point the history
its code passed is read back from the last request of that exec (the messages it held before
the first one the run added), so it is known once the model was called. Each exec of a
conversation leaves a :class:`StepRecord`: the history it was given and what it added.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openprogram.events import AgentEvent
from openprogram.types import AnyMessage
from openprogram_sim.models import ScriptedRequest
from openprogram_sim.trace import describe, matches, show

__all__ = ["HistoryKeeper", "StepRecord", "history_mismatch"]


@dataclass(slots=True, kw_only=True)
class StepRecord:
    """One exec of a conversation, as it ended: where its part of the run is (its slices of
    the trace and of the model calls), what it returned or raised, and the history it was
    given and added to."""

    index: int
    trace: tuple[int, int]
    """``(start, end)`` of its entries in the run's trace."""
    calls: tuple[int, int]
    """``(start, end)`` of its model calls among the run's requests."""
    result: Any
    error: Exception | None
    given: list[AnyMessage]
    added: list[AnyMessage]
    unfired: list[str]
    """Its steering entries and abort whose point it never reached."""
    duration: float


class HistoryKeeper:
    """A listener that keeps what the latest outer exec added to its history."""

    wants_updates = False

    def __init__(self) -> None:
        self.added: list[AnyMessage] | None = None
        """The messages the latest outer exec added (None before one has ended)."""

    def __call__(self, event: AgentEvent) -> None:
        if event.type == "agent_end" and event.depth == 0:
            self.added = list(event.messages)

    def final(
        self, given: Sequence[AnyMessage] | None, requests: Sequence[ScriptedRequest]
    ) -> list[AnyMessage]:
        """The latest outer exec's whole history: ``given`` (the history it was passed;
        None: unknown, read from ``requests``) and what it added."""
        added = self.added or []
        if given is None:
            given = _given_before(added, requests)
        return [*given, *added]


def _given_before(added: list[AnyMessage], requests: Sequence[ScriptedRequest]) -> list[Any]:
    """The messages an exec's last request held before the first one the exec added."""
    if not added:
        return []
    first = added[0]
    for request in reversed(requests):
        if request.depth != 0:
            continue
        for i, message in enumerate(request.messages):
            if message is first:
                return request.messages[:i]
    return []


# --------------------------------------------------------------------------- the check


def history_mismatch(
    expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]], mode: str
) -> tuple[int, str] | None:
    """None when ``actual`` (the final history as message fields) holds ``expected`` (the
    fields each expected message gives): in order with gaps (``ordered``) or one for one
    (``exact``); else the index of the first expected message that did not match, and the
    diff a person reads."""
    if mode == "exact":
        return _exact(expected, actual)
    position = 0
    for i, want in enumerate(expected):
        found = next((j for j in range(position, len(actual)) if _fits(want, actual[j])), None)
        if found is None:
            earlier = any(_fits(want, m) for m in actual[:position])
            reason = (
                "it matches only messages before the previous match, out of order"
                if earlier
                else "not found after the previous match"
            )
            closest = _closest(want, actual, position)
            return i, _render(reason, expected, i, actual, position, closest)
        position = found + 1
    return None


def _exact(
    expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]]
) -> tuple[int, str] | None:
    for i, want in enumerate(expected):
        if i >= len(actual):
            reason = f"the history ended after {len(actual)} message(s)"
            return i, _render(reason, expected, i, actual, i, None)
        if not _fits(want, actual[i]):
            return i, _render("the message at this position differs", expected, i, actual, i, i)
    if len(actual) > len(expected):
        extra = actual[len(expected)]
        lines = [
            f"the history has {len(actual) - len(expected)} more message(s) than the "
            f"{len(expected)} expected, first: {_line(extra)}",
            *_listing(actual, len(expected)),
        ]
        return -1, "\n".join(lines)
    return None


def _fits(want: Mapping[str, Any], have: Mapping[str, Any]) -> bool:
    return all(name in have and matches(value, have[name]) for name, value in want.items())


def _misses(want: Mapping[str, Any], have: Mapping[str, Any]) -> int:
    return sum(1 for name, value in want.items() if not _fits({name: value}, have))


def _closest(
    want: Mapping[str, Any], actual: Sequence[Mapping[str, Any]], start: int
) -> int | None:
    """The message most like ``want``: of its role, at or after ``start`` first, then with
    fewer differing fields, then with the closer differing values."""
    same_role = [
        j for j, m in enumerate(actual) if "role" not in want or _fits({"role": want["role"]}, m)
    ]
    if not same_role:
        return None

    def likeness(have: Mapping[str, Any]) -> float:
        return sum(
            difflib.SequenceMatcher(None, describe(v), show(have.get(k))).ratio()
            for k, v in want.items()
            if not _fits({k: v}, have)
        )

    return min(
        same_role,
        key=lambda j: (j < start, _misses(want, actual[j]), -likeness(actual[j]), abs(j - start)),
    )


def _line(message: Mapping[str, Any]) -> str:
    """One message as a person reads it: role, calls or tool, text."""
    role = message.get("role")
    out = str(role)
    if role == "assistant" and message.get("tool_calls"):
        calls = ", ".join(f"{c['name']}({show(c.get('arguments'))})" for c in message["tool_calls"])
        out += f" calls {_cut(calls, 70)}"
    elif role == "toolResult":
        out += f" {message.get('tool_name')} ->{' error:' if message.get('is_error') else ''}"
    text = message.get("text")
    if text:
        out += f" {show(_cut(str(text), 60))}"
    return out


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _listing(actual: Sequence[Mapping[str, Any]], position: int) -> list[str]:
    lines = [f"the final history ({len(actual)} message(s)):"]
    for j, message in enumerate(actual):
        lines.append(f"  {'>' if j == position else ' '} #{j:<3} {_line(message)}")
    if not actual:
        lines.append("    (empty)")
    return lines


def _render(
    reason: str,
    expected: Sequence[Mapping[str, Any]],
    index: int,
    actual: Sequence[Mapping[str, Any]],
    position: int,
    closest: int | None,
) -> str:
    want = expected[index]
    shown = ", ".join(f"{k}: {describe(v)}" for k, v in want.items())
    lines = [
        f"expected message {index + 1} of {len(expected)} did not match: {reason}",
        f"  {{{shown}}}",
        *_listing(actual, position),
    ]
    if closest is not None:
        have = actual[closest]
        lines.append(f"closest actual message: #{closest}")
        for name, value in want.items():
            if not _fits({name: value}, have):
                lines.append(
                    f"  {name}: expected {describe(value)}, actual "
                    f"{show(have.get(name, '(absent)'))}"
                )
    return "\n".join(lines)
