"""Assertions on traces, usable in any test runner (pytest shows their diffs best).

:func:`assert_events` and :func:`assert_no_events` take a trace (a list of entries, or
anything with a ``.trace`` such as :class:`~openprogram_sim.trace.TraceRecorder`) and raise
``AssertionError`` with the same diff a failing scenario prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from openprogram_sim.trace._explain import render_entry, render_mismatch
from openprogram_sim.trace._match import event_matches, match_events
from openprogram_sim.trace._matchers import check_matcher, describe
from openprogram_sim.trace._normalize import EVENT_FIELDS

__all__ = ["assert_events", "assert_no_events"]


def _entries(trace: Any) -> list[dict[str, Any]]:
    """A trace's entries, from a list of them or from anything with a ``.trace`` (a
    :class:`TraceRecorder`, the ``openprogram_trace`` fixture, a scenario's outcome)."""
    entries = getattr(trace, "trace", trace)
    if isinstance(entries, (str, bytes)) or not isinstance(entries, Sequence):
        raise TypeError(
            f"expected a trace (a list of event dicts) or a recorder with .trace, got "
            f"{type(trace).__name__}"
        )
    return [dict(e) for e in entries]


def assert_events(
    trace: Sequence[Mapping[str, Any]] | Any,
    expected: Sequence[Mapping[str, Any]],
    mode: str = "ordered",
) -> None:
    """Assert that ``trace`` (entries, or a recorder) holds ``expected``
    (``{event_type: {field: matcher}}`` items, the matchers of scenario files) ``ordered``
    (gaps allowed), ``exact`` or ``unordered``;
    raises ``AssertionError`` with the same diff text a scenario failure shows::

        assert_events(rec.trace, [
            {"tool_execution_end": {"tool_name": "search", "is_error": False}},
            {"agent_end": {"reason": "stop"}},
        ])
    """
    __tracebackhide__ = True
    if mode not in ("ordered", "exact", "unordered"):
        raise ValueError(f"mode must be 'ordered', 'exact' or 'unordered', got {mode!r}")
    _check_expected(expected)
    events = _entries(trace)
    wanted = [dict(e) for e in expected]
    mismatch = match_events(wanted, events, mode)
    if mismatch is not None:
        detail = render_mismatch(mismatch, events, total=len(wanted))
        indented = "\n".join(f"  {line}" for line in detail.splitlines())
        raise AssertionError(f"events ({mode}) did not match\n{indented}")


def assert_no_events(
    trace: Sequence[Mapping[str, Any]] | Any, unwanted: Sequence[Mapping[str, Any]]
) -> None:
    """Assert that no event of ``trace`` matches any of ``unwanted`` (like ``not_events``)."""
    __tracebackhide__ = True
    _check_expected(unwanted)
    events = _entries(trace)
    for item in unwanted:
        hits = [i for i, e in enumerate(events) if event_matches(item, e)]
        if hits:
            shown = "\n".join(f"  #{i:<3} {render_entry(events[i])}" for i in hits[:5])
            raise AssertionError(
                f"an event that must not occur occurred {len(hits)} time(s): "
                f"{describe(item)}\n{shown}"
            )


def _check_expected(expected: Sequence[Mapping[str, Any]]) -> None:
    for i, item in enumerate(expected):
        if not isinstance(item, Mapping) or len(item) != 1:
            raise ValueError(
                f"expected event {i + 1} must be one {{event_type: {{field: matcher}}}} "
                f"mapping, got {item!r}"
            )
        ((event_type, fields),) = item.items()
        if event_type not in EVENT_FIELDS:
            raise ValueError(
                f"expected event {i + 1}: unknown event {event_type!r}; events are: "
                f"{', '.join(EVENT_FIELDS)}"
            )
        problem = check_matcher(fields or {})
        if problem:
            raise ValueError(f"expected event {i + 1}: {problem}")
