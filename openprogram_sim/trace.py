"""Traces: a run's events normalized to plain, JSON-serializable dicts.

Every entry has ``type``, ``depth`` and ``round``. Messages add ``role`` (user |
assistant | toolResult) and ``text``; assistant messages add ``tool_calls`` (names) and
``stop_reason`` (and ``error`` when set); tool events add ``tool_call_id``, ``tool_name``,
``args``, and on end ``result`` (text) and ``is_error``; ``agent_end`` adds ``reason``.
``message_update`` events are left out by default (they are streaming noise for
assertions); pass ``updates=True`` to keep them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from openprogram.events import AgentEvent
from openprogram.types import AnyMessage, AssistantMessage, ToolResultMessage
from openprogram_sim.matchers import describe, matches

__all__ = [
    "EventMismatch",
    "TraceRecorder",
    "event_matches",
    "event_to_dict",
    "match_events",
    "render_entry",
    "render_mismatch",
    "to_trace",
]


def _message_fields(message: AnyMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "text": message.text}
    if isinstance(message, AssistantMessage):
        out["tool_calls"] = [c.name for c in message.tool_calls]
        out["stop_reason"] = message.stop_reason
        if message.error_message is not None:
            out["error"] = message.error_message
    elif isinstance(message, ToolResultMessage):
        out["tool_call_id"] = message.tool_call_id
        out["tool_name"] = message.tool_name
        out["is_error"] = message.is_error
    return out


def event_to_dict(event: AgentEvent) -> dict[str, Any]:
    """One event as a trace entry."""
    out: dict[str, Any] = {"type": event.type, "depth": event.depth, "round": event.round}
    if event.type in ("message_start", "message_end", "message_update"):
        out.update(_message_fields(event.message))
    elif event.type == "tool_execution_start":
        out.update(tool_call_id=event.tool_call_id, tool_name=event.tool_name, args=event.args)
    elif event.type == "tool_execution_update":
        out.update(
            tool_call_id=event.tool_call_id,
            tool_name=event.tool_name,
            args=event.args,
            partial_result=_plain(event.partial_result),
        )
    elif event.type == "tool_execution_end":
        out.update(
            tool_call_id=event.tool_call_id,
            tool_name=event.tool_name,
            args=event.args,
            result=event.result.text,
            is_error=event.is_error,
        )
    elif event.type == "turn_end":
        out["tool_calls"] = [c.name for c in event.message.tool_calls]
        out["stop_reason"] = event.message.stop_reason
        out["tool_results"] = len(event.tool_results)
    elif event.type == "agent_end":
        out["reason"] = event.reason
    return out


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def to_trace(events: Iterable[AgentEvent], *, updates: bool = False) -> list[dict[str, Any]]:
    """Normalize events to a trace (``message_update`` dropped unless ``updates``)."""
    return [event_to_dict(e) for e in events if updates or e.type != "message_update"]


class TraceRecorder:
    """A listener that records the trace as events arrive::

    rec = TraceRecorder()
    runtime.subscribe(rec)
    runtime.exec("...")
    rec.trace  # list of dicts
    """

    def __init__(self, *, updates: bool = False) -> None:
        self.updates = updates
        self.trace: list[dict[str, Any]] = []

    def __call__(self, event: AgentEvent) -> None:
        if self.updates or event.type != "message_update":
            self.trace.append(event_to_dict(event))

    def types(self) -> list[str]:
        return [e["type"] for e in self.trace]


# --------------------------------------------------------------------------- matching


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
        args = json.dumps(entry.get("args"), ensure_ascii=False, default=str)
        text = f"{head} {entry.get('tool_name')}({_cut(args, 60)})"
        if t == "tool_execution_end":
            flag = "error" if entry.get("is_error") else "ok"
            text += f" -> {flag}: {_cut(str(entry.get('result')), 60)!r}"
        return text
    if t.startswith("message"):
        text = f"{head} {entry.get('role')}"
        if entry.get("tool_calls"):
            text += f" calls={entry['tool_calls']}"
        if entry.get("text"):
            text += f" {_cut(entry['text'], 60)!r}"
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
                _cut(json.dumps(have, default=str), 40),
                "" if ok else "<- differs",
            )
        )
    widths = [max(len(r[c]) for r in rows) for c in range(3)]
    return [
        ("  " + "  ".join(r[c].ljust(widths[c]) for c in range(3)) + "  " + r[3]).rstrip()
        for r in rows
    ]
