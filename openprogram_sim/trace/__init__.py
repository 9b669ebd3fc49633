"""Traces: a run's events as plain, JSON-serializable dicts, and assertions on them.

Every entry has ``type``, ``depth`` (0 for the outer exec) and ``round`` (the model call
within its exec); messages add ``role`` and ``text``, tool events ``tool_name``, ``args``,
``result`` and ``is_error``, ``agent_end`` its ``reason``. Usable without pytest::

    from openprogram_sim.trace import TraceRecorder, assert_events

    rec = TraceRecorder()
    runtime.subscribe(rec)
    runtime.exec("Find a.", tools=[search])
    assert_events(rec.trace, [
        {"tool_execution_end": {"tool_name": "search", "is_error": False}},
        {"agent_end": {"reason": "stop"}},
    ])

Expected fields match by equality or with an operator (:data:`OPERATORS`: ``$regex``,
``$contains``, ``$subset``, ``$in``, ``$json``, ``$any``).
"""

from openprogram_sim.trace._assert import assert_events, assert_no_events
from openprogram_sim.trace._explain import diff_lines, render_entry, render_mismatch
from openprogram_sim.trace._failure import Failure, render_failures
from openprogram_sim.trace._match import EventMismatch, event_matches, match_events
from openprogram_sim.trace._matchers import (
    OPERATORS,
    REGEX_SECONDS,
    check_matcher,
    describe,
    describe_pair,
    matches,
    show,
)
from openprogram_sim.trace._normalize import (
    EVENT_FIELDS,
    FIELD_TYPES,
    TraceRecorder,
    check_field_value,
    event_to_dict,
    field_schema,
    to_trace,
)
from openprogram_sim.trace._paths import (
    Difference,
    IgnoreList,
    differences,
    parse_path,
    path_text,
    show_pair,
    show_value,
)

__all__ = [
    "EVENT_FIELDS",
    "FIELD_TYPES",
    "OPERATORS",
    "REGEX_SECONDS",
    "Difference",
    "EventMismatch",
    "Failure",
    "IgnoreList",
    "TraceRecorder",
    "assert_events",
    "assert_no_events",
    "check_field_value",
    "check_matcher",
    "describe",
    "describe_pair",
    "diff_lines",
    "differences",
    "event_matches",
    "event_to_dict",
    "field_schema",
    "match_events",
    "matches",
    "parse_path",
    "path_text",
    "render_entry",
    "render_failures",
    "render_mismatch",
    "show",
    "show_pair",
    "show_value",
    "to_trace",
]

for _cls in (Difference, EventMismatch, Failure, IgnoreList, TraceRecorder):
    _cls.__module__ = __name__
del _cls
