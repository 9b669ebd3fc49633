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

For a real model, whose exact trace varies, :func:`assert_trajectory` checks the tool calls
(modes ``exact``, ``in_order``, ``any_order``, ``subset``, ``superset``, calls made in one
round, a graded score) and :func:`assert_properties` checks rules that need no reference
run (:data:`RULES`: ``never``, ``before``, ``at_most``, ``at_least``, ``same_round``,
``no_repeat``, ``ends_with``)::

    assert_trajectory(rec.trace, ["search", ["get_weather", "get_time"]], mode="in_order")
    assert_properties(rec.trace, [{"at_most": {"tool": "search", "times": 3}}])
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
from openprogram_sim.trace._properties import (
    RULES,
    Violation,
    assert_properties,
    check_properties,
    check_rule,
    describe_rule,
    render_violations,
    rules_json_schema,
)
from openprogram_sim.trace._trajectory import (
    ARGS_MODES,
    MODES,
    TraceCall,
    Trajectory,
    TrajectoryResult,
    assert_trajectory,
    match_trajectory,
    trace_calls,
)

__all__ = [
    "ARGS_MODES",
    "EVENT_FIELDS",
    "FIELD_TYPES",
    "OPERATORS",
    "REGEX_SECONDS",
    "Difference",
    "EventMismatch",
    "Failure",
    "IgnoreList",
    "MODES",
    "RULES",
    "TraceCall",
    "TraceRecorder",
    "Trajectory",
    "TrajectoryResult",
    "Violation",
    "assert_events",
    "assert_no_events",
    "assert_properties",
    "assert_trajectory",
    "check_field_value",
    "check_matcher",
    "check_properties",
    "check_rule",
    "describe",
    "describe_pair",
    "describe_rule",
    "diff_lines",
    "differences",
    "event_matches",
    "event_to_dict",
    "field_schema",
    "match_events",
    "match_trajectory",
    "matches",
    "parse_path",
    "path_text",
    "render_entry",
    "render_failures",
    "render_mismatch",
    "render_violations",
    "rules_json_schema",
    "show",
    "show_pair",
    "show_value",
    "to_trace",
    "trace_calls",
]

for _cls in (
    Difference, EventMismatch, Failure, IgnoreList, TraceCall, TraceRecorder, Trajectory,
    TrajectoryResult, Violation,
):  # fmt: skip
    _cls.__module__ = __name__
del _cls
