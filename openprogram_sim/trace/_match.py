"""Matching expected events against a trace.

An expected event is ``{event_type: {field: matcher}}``; it matches a trace entry of that
type whose every named field matches (see :mod:`openprogram_sim.trace._matchers`).
Sequences match ``ordered`` (gaps allowed), ``exact`` or ``unordered``; a mismatch names the
closest actual event, which :mod:`openprogram_sim.trace._explain` renders.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openprogram_sim.trace._matchers import matches, unmatched
from openprogram_sim.trace._paths import ABSENT

__all__ = ["EventMismatch", "event_matches", "match_events"]


@dataclass(slots=True, kw_only=True)
class EventMismatch:
    """Why an event expectation failed: which expectation, and what the trace held."""

    index: int
    """Index of the expectation that did not match."""
    expected: dict[str, Any]
    """``{event_type: {field: matcher}}``."""
    position: int
    """Trace index where the expected event should have been (``ordered``: the first after
    the previous match; ``unordered``: 0, anywhere)."""
    candidate: int | None
    """Trace index of the closest actual event of the same type, if any: the one with the
    fewest differing fields (``ordered``: at or after :attr:`position` first)."""
    reason: str
    mode: str = "ordered"
    """How the sequence was matched: ``ordered``, ``exact`` or ``unordered``."""
    previous: int | None = None
    """``ordered``: the trace index the previous expectation matched (None for the first)."""


def _split(expected: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    ((event_type, fields),) = expected.items()
    return event_type, fields or {}


def event_matches(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> bool:
    """Whether one trace entry satisfies ``{event_type: {field: matcher}}``."""
    event_type, fields = _split(expected)
    if actual["type"] != event_type:
        return False
    return all(name in actual and matches(want, actual[name]) for name, want in fields.items())


def _misses(fields: Mapping[str, Any], actual: Mapping[str, Any]) -> tuple[int, int]:
    """How many fields differ, then in how many places below them."""
    places = [len(list(unmatched(w, actual.get(n, ABSENT)))) for n, w in fields.items()]
    return sum(1 for p in places if p), sum(places)


def _closest(expected: Mapping[str, Any], trace: list[dict[str, Any]], start: int) -> int | None:
    event_type, fields = _split(expected)
    candidates = [i for i, e in enumerate(trace) if e["type"] == event_type]
    if not candidates:
        return None
    # events at or after where it should have been first, then fewer differing fields
    # (fewer differing places below them), then the nearest
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
            return EventMismatch(
                index=i,
                expected=want,
                position=position,
                candidate=_closest(want, trace, position),
                reason=_ordered_reason(want, trace, i, position),
                previous=position - 1 if i else None,
            )
        position = found + 1
    return None


def _ordered_reason(
    want: Mapping[str, Any], trace: list[dict[str, Any]], i: int, position: int
) -> str:
    """Why expectation ``i`` failed: nothing matches after ``position``, and what matches
    before it (out of order), by trace index."""
    earlier = [j for j in range(position) if event_matches(want, trace[j])]
    if not earlier:
        if not i:
            return "not found in the trace"
        return f"not found after #{position - 1}, the match of expected event {i}"
    if earlier == [position - 1]:
        return f"out of order: it matches only #{position - 1}, the match of expected event {i}"
    shown = ", ".join(f"#{j}" for j in earlier[:3]) + (", ..." if len(earlier) > 3 else "")
    return f"out of order: it matches only events before the previous match ({shown})"


def _match_exact(
    expected: list[dict[str, Any]], trace: list[dict[str, Any]]
) -> EventMismatch | None:
    for i, want in enumerate(expected):
        if i >= len(trace):
            return EventMismatch(
                index=i,
                expected=want,
                position=i,
                candidate=None,
                reason="the trace ended before this event",
                mode="exact",
            )
        if not event_matches(want, trace[i]):
            same_type = trace[i]["type"] == _split(want)[0]
            return EventMismatch(
                index=i,
                expected=want,
                position=i,
                candidate=i if same_type else None,
                reason="the event at this position differs"
                if same_type
                else f"the event at this position is a {trace[i]['type']}",
                mode="exact",
            )
    if len(trace) > len(expected):
        extra = trace[len(expected)]
        return EventMismatch(
            index=len(expected),
            expected={"(end of trace)": {}},
            position=len(expected),
            candidate=None,
            reason=(
                f"the trace has {len(trace) - len(expected)} more event(s), first a {extra['type']}"
            ),
            mode="exact",
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
            return EventMismatch(
                index=i,
                expected=want,
                position=0,
                candidate=_closest(want, trace, 0),
                reason="no unused event matches",
                mode="unordered",
            )
        used.add(found)
    return None
