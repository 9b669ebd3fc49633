"""Matching expected events against a trace, and rendering a mismatch people can read.

An expected event is ``{event_type: {field: matcher}}``; it matches a trace entry of that
type whose every named field matches (see :mod:`openprogram_sim.trace._matchers`).
Sequences match ``ordered`` (gaps allowed), ``exact`` or ``unordered``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openprogram_sim.trace._matchers import describe, matches, show

__all__ = ["EventMismatch", "event_matches", "match_events", "render_entry", "render_mismatch"]


@dataclass(slots=True)
class EventMismatch:
    """Why an event expectation failed: which expectation, and what the trace held."""

    index: int
    """Index of the expectation that did not match."""
    expected: dict[str, Any]
    """``{event_type: {field: matcher}}``."""
    position: int
    """Trace index where the expected event should have been."""
    candidate: int | None
    """Trace index of the closest actual event of the same type, if any."""
    reason: str


def _split(expected: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    ((event_type, fields),) = expected.items()
    return event_type, fields or {}


def event_matches(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> bool:
    """Whether one trace entry satisfies ``{event_type: {field: matcher}}``."""
    event_type, fields = _split(expected)
    if actual["type"] != event_type:
        return False
    return all(name in actual and matches(want, actual[name]) for name, want in fields.items())


def _misses(fields: Mapping[str, Any], actual: Mapping[str, Any]) -> int:
    return sum(1 for n, w in fields.items() if n not in actual or not matches(w, actual[n]))


def _closest(expected: Mapping[str, Any], trace: list[dict[str, Any]], start: int) -> int | None:
    event_type, fields = _split(expected)
    candidates = [i for i, e in enumerate(trace) if e["type"] == event_type]
    if not candidates:
        return None
    # events at or after where it should have been first, then fewer differing fields
    return min(candidates, key=lambda i: (i < start, _misses(fields, trace[i]), abs(i - start)))


def match_events(
    expected: list[dict[str, Any]],
    trace: list[dict[str, Any]],
    mode: str = "ordered",
) -> EventMismatch | None:
    """Check ``expected`` against ``trace``: ``ordered`` (in order, gaps allowed),
    ``exact`` (the whole trace, one for one) or ``unordered`` (each somewhere, distinct)."""
    if mode == "exact":
        return _match_exact(expected, trace)
    if mode == "unordered":
        return _match_unordered(expected, trace)
    position = 0
    for i, want in enumerate(expected):
        found = next(
            (j for j in range(position, len(trace)) if event_matches(want, trace[j])), None
        )
        if found is None:
            reason = "not found after the previous match"
            if any(event_matches(want, e) for e in trace[:position]):
                reason = "it matches only events before the previous match, out of order"
            return EventMismatch(i, want, position, _closest(want, trace, position), reason)
        position = found + 1
    return None


def _match_exact(
    expected: list[dict[str, Any]], trace: list[dict[str, Any]]
) -> EventMismatch | None:
    for i, want in enumerate(expected):
        if i >= len(trace):
            return EventMismatch(i, want, i, None, "the trace ended before this event")
        if not event_matches(want, trace[i]):
            return EventMismatch(i, want, i, i, "the event at this position differs")
    if len(trace) > len(expected):
        extra = trace[len(expected)]
        return EventMismatch(
            len(expected),
            {"(end of trace)": {}},
            len(expected),
            None,
            f"the trace has {len(trace) - len(expected)} more event(s), first a {extra['type']}",
        )
    return None


def _match_unordered(
    expected: list[dict[str, Any]], trace: list[dict[str, Any]]
) -> EventMismatch | None:
    used: set[int] = set()
    for i, want in enumerate(expected):
        found = next(
            (j for j in range(len(trace)) if j not in used and event_matches(want, trace[j])), None
        )
        if found is None:
            return EventMismatch(i, want, 0, _closest(want, trace, 0), "no unused event matches")
        used.add(found)
    return None


# --------------------------------------------------------------------------- rendering


def render_entry(entry: Mapping[str, Any]) -> str:
    """One trace entry as a line a person can read: ``tool_execution_end search(...) -> ...``."""
    t = entry["type"]
    head = f"{t:<22} d{entry.get('depth', 0)} r{entry.get('round', 0)}"
    if t.startswith("tool_execution"):
        args = show(entry.get("args"))
        text = f"{head} {entry.get('tool_name')}({_cut(args, 60)})"
        if t == "tool_execution_end":
            flag = "error" if entry.get("is_error") else "ok"
            text += f" -> {flag}: {show(_cut(str(entry.get('result')), 60))}"
        return text
    if t.startswith("message"):
        text = f"{head} {entry.get('role')}"
        if entry.get("tool_calls"):
            text += f" calls={show(entry['tool_calls'])}"
        if entry.get("text"):
            text += f" {show(_cut(entry['text'], 60))}"
        if t == "message_end" and entry.get("role") == "assistant":
            text += f" [{entry.get('stop_reason')}]"
        return text
    if t == "agent_end":
        return f"{head} reason={entry.get('reason')}"
    return head


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def render_mismatch(
    mismatch: EventMismatch, trace: list[dict[str, Any]], *, total: int, context: int = 3
) -> str:
    """The first expectation that did not match, the events around where it should have
    been, and a side-by-side of expected and actual fields."""
    event_type, fields = _split(mismatch.expected)
    want = ", ".join(f"{k}: {describe(v)}" for k, v in fields.items())
    lines = [
        f"expected event {mismatch.index + 1} of {total} did not match: {mismatch.reason}",
        f"  {event_type} {{{want}}}",
        f"trace around where it should have been (at #{mismatch.position}):",
    ]
    lo = max(0, mismatch.position - context)
    hi = min(len(trace), mismatch.position + context + 1)
    for i in range(lo, hi):
        marker = ">" if i == mismatch.position else " "
        lines.append(f"  {marker} #{i:<3} {render_entry(trace[i])}")
    if not trace[lo:hi]:
        lines.append("    (no events there: the trace has ended)")
    if mismatch.candidate is not None:
        actual = trace[mismatch.candidate]
        lines.append(f"closest actual {event_type}: #{mismatch.candidate}")
        lines.extend(_side_by_side(fields, actual))
    return "\n".join(lines)


def _side_by_side(fields: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    rows = [("field", "expected", "actual", "")]
    for name, want in fields.items():
        have = actual.get(name, "(absent)")
        ok = name in actual and matches(want, have)
        rows.append(
            (
                name,
                _cut(describe(want), 40),
                _cut(show(have), 40),
                "" if ok else "<- differs",
            )
        )
    widths = [max(len(r[c]) for r in rows) for c in range(3)]
    return [
        ("  " + "  ".join(r[c].ljust(widths[c]) for c in range(3)) + "  " + r[3]).rstrip()
        for r in rows
    ]
