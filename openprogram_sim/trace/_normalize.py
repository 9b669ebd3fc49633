"""Traces: a run's events normalized to plain, JSON-serializable dicts.

Every entry has ``type``, ``depth`` and ``round``. Messages add ``role`` (user |
assistant | toolResult) and ``text``; assistant messages add ``tool_calls`` (names) and
``stop_reason`` (and ``error`` when set); tool events add ``tool_call_id``, ``tool_name``,
``args``, and on end ``result`` (text) and ``is_error``; ``agent_end`` adds ``reason``.
``message_update`` events are left out by default (they are streaming noise for
assertions); pass ``updates=True`` to keep them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, get_args

from openprogram.events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    MessageEnd,
    MessageOrigin,
    MessageStart,
    MessageUpdate,
    ToolErrorKind,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from openprogram.types import (
    AnyMessage,
    AssistantMessage,
    ErrorReason,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "EVENT_FIELDS",
    "FIELD_TYPES",
    "TraceRecorder",
    "check_field_value",
    "event_to_dict",
    "field_schema",
    "to_trace",
]

_BASE = ("type", "depth", "round")
_MESSAGE = (*_BASE, "role", "origin", "text", "tool_calls", "stop_reason", "error", "error_reason",
            "error_status", "retryable", "retry_after", "tool_call_id", "tool_name", "is_error",
            "skipped")  # fmt: skip
_TOOL = (*_BASE, "tool_call_id", "tool_name", "args")
EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    "agent_start": _BASE,
    "agent_end": (*_BASE, "reason"),
    "turn_start": _BASE,
    "turn_end": (*_BASE, "tool_calls", "stop_reason", "tool_results"),
    "message_start": _MESSAGE,
    "message_update": _MESSAGE,
    "message_end": _MESSAGE,
    "tool_execution_start": _TOOL,
    "tool_execution_update": (*_TOOL, "partial_result"),
    "tool_execution_end": (*_TOOL, "result", "is_error", "skipped", "error_kind"),
}
"""Which trace fields each event type has (what an expectation may name)."""

_REASONS = ["stop", "error", "aborted", "cap"]
_STOPS = ["stop", "length", "toolUse", "error", "aborted"]
FIELD_TYPES: dict[str, Any] = {
    "type": "string",
    "depth": "integer",
    "round": "integer",
    "role": ["user", "assistant", "toolResult"],
    "origin": list(get_args(MessageOrigin)),
    "text": "string",
    "tool_calls": "array",
    "stop_reason": _STOPS,
    "error": "string",
    "error_reason": list(get_args(ErrorReason)),
    "error_status": "integer",
    "retryable": "boolean",
    "retry_after": "number",
    "tool_call_id": "string",
    "tool_name": "string",
    "is_error": "boolean",
    "skipped": "boolean",
    "error_kind": list(get_args(ToolErrorKind)),
    "result": "string",
    "tool_results": "integer",
    "reason": _REASONS,
}
"""Each trace field's JSON type (or its allowed values); ``args`` and ``partial_result``
may be anything."""

_NULLABLE = frozenset({"error_status", "retry_after", "error_kind"})
"""Fields that may be ``null``: when the provider said nothing (an in-stream error's status),
or when there is nothing to say (the ``error_kind`` of a result that is no error)."""

_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list,),
    "number": (int, float),
}


def check_field_value(name: str, value: Any) -> str | None:
    """None when ``value`` (not a matcher) can be the trace field ``name``, else what is
    wrong: ``is_error: maybe`` is caught when the file loads, not by a run that never
    matches."""
    kind = FIELD_TYPES.get(name)
    if kind is None or (isinstance(value, dict) and any(str(k).startswith("$") for k in value)):
        return None
    if value is None and name in _NULLABLE:
        return None
    if isinstance(kind, list):
        if value not in kind:
            return f"{name} is one of {', '.join(kind)}; got {value!r}"
        return None
    ok = isinstance(value, _PYTHON_TYPES[kind])
    if kind in ("integer", "number") and isinstance(value, bool):
        ok = False
    if not ok:
        return f"{name} is a{'n' if kind[0] in 'aei' else ''} {kind}; got {value!r}"
    return None


def field_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of an expected value of trace field ``name`` (its type, or a matcher)."""
    kind = FIELD_TYPES.get(name)
    if kind is None:
        return {}
    nullable = name in _NULLABLE
    if isinstance(kind, list):
        plain: dict[str, Any] = {"enum": [*kind, None] if nullable else kind}
    else:
        plain = {"type": [kind, "null"] if nullable else kind}
    return {"anyOf": [plain, {"$ref": "#/$defs/Matcher"}]}


def _error_fields(message: AssistantMessage, out: dict[str, Any]) -> None:
    """A failed reply's error fields (none for a reply that did not fail)."""
    if message.error_message is not None:
        out["error"] = message.error_message
    details = message.error_details
    if details is not None:
        out["error_reason"] = details.reason
        out["error_status"] = details.status
        out["retryable"] = details.retryable
        out["retry_after"] = details.retry_after


def _message_fields(message: AnyMessage, out: dict[str, Any]) -> None:
    """``message``'s trace fields, written into ``out``."""
    out["role"] = message.role
    out["text"] = message.text
    if isinstance(message, AssistantMessage):
        out["tool_calls"] = [c.name for c in message.tool_calls]
        out["stop_reason"] = message.stop_reason
        _error_fields(message, out)
    elif isinstance(message, ToolResultMessage):
        out["tool_call_id"] = message.tool_call_id
        out["tool_name"] = message.tool_name
        out["is_error"] = message.is_error
        out["skipped"] = message.skipped


# Each event type's own fields, written after type, depth and round (one lookup by type;
# about 30 events a run, each recorded as it is emitted).


def _message(event: Any, out: dict[str, Any]) -> None:
    _message_fields(event.message, out)
    origin = getattr(event, "origin", None)
    if origin is not None:
        out["origin"] = origin


def _tool_start(event: Any, out: dict[str, Any]) -> None:
    out["tool_call_id"] = event.tool_call_id
    out["tool_name"] = event.tool_name
    out["args"] = event.args


def _tool_update(event: Any, out: dict[str, Any]) -> None:
    out["tool_call_id"] = event.tool_call_id
    out["tool_name"] = event.tool_name
    out["args"] = event.args
    out["partial_result"] = _plain(event.partial_result)


def _tool_end(event: Any, out: dict[str, Any]) -> None:
    out["tool_call_id"] = event.tool_call_id
    out["tool_name"] = event.tool_name
    out["args"] = event.args
    out["result"] = event.result.text
    out["is_error"] = event.is_error
    out["skipped"] = event.skipped
    out["error_kind"] = event.error_kind


def _turn_end(event: Any, out: dict[str, Any]) -> None:
    message = event.message
    out["tool_calls"] = [c.name for c in message.tool_calls]
    out["stop_reason"] = message.stop_reason
    out["tool_results"] = len(event.tool_results)


def _agent_end(event: Any, out: dict[str, Any]) -> None:
    out["reason"] = event.reason


_FIELDS: dict[str, Callable[[Any, dict[str, Any]], None]] = {
    "message_start": _message,
    "message_end": _message,
    "message_update": _message,
    "tool_execution_start": _tool_start,
    "tool_execution_update": _tool_update,
    "tool_execution_end": _tool_end,
    "turn_end": _turn_end,
    "agent_end": _agent_end,
}


def event_to_dict(event: AgentEvent) -> dict[str, Any]:
    """One event as a trace entry."""
    build = _BUILDERS.get(type(event))
    if build is not None:
        return build(event)
    return _generic(event)


def _generic(event: Any) -> dict[str, Any]:
    """Any event (a subclass of the engine's included), field by field."""
    kind = event.type
    out: dict[str, Any] = {"type": kind, "depth": event.depth, "round": event.round}
    fields = _FIELDS.get(kind)
    if fields is not None:
        fields(event, out)
    return out


# The recorder's fast path: one builder per event class, each writing its entry in one dict
# display (the same keys, in the same order, as the field writers above, which a test holds
# it to). About 30 events a run are recorded as they are emitted, so a call and a lookup
# per field written is a visible share of a generated campaign's time.


def _bare(event: Any) -> dict[str, Any]:
    return {"type": event.type, "depth": event.depth, "round": event.round}


def _message_entry(event: Any) -> dict[str, Any]:
    message = event.message
    kind = type(message)
    if kind is AssistantMessage:
        out = {
            "type": event.type,
            "depth": event.depth,
            "round": event.round,
            "role": message.role,
            "text": message.text,
            "tool_calls": [b.name for b in message.content if isinstance(b, ToolCall)],
            "stop_reason": message.stop_reason,
        }
        if message.error_message is not None or message.error_details is not None:
            _error_fields(message, out)
    elif kind is ToolResultMessage:
        out = {
            "type": event.type,
            "depth": event.depth,
            "round": event.round,
            "role": message.role,
            "text": message.text,
            "tool_call_id": message.tool_call_id,
            "tool_name": message.tool_name,
            "is_error": message.is_error,
            "skipped": message.skipped,
        }
    elif kind is UserMessage:
        out = {
            "type": event.type,
            "depth": event.depth,
            "round": event.round,
            "role": message.role,
            "text": message.text,
        }
    else:  # a subclass: the writers' isinstance tests decide
        return _generic(event)
    origin = event.origin
    if origin is not None:
        out["origin"] = origin
    return out


def _update_entry(event: Any) -> dict[str, Any]:
    # a message_update has no origin of its own (the writers' getattr finds none)
    message = event.message
    if type(message) is not AssistantMessage:
        return _generic(event)
    out: dict[str, Any] = {"type": event.type, "depth": event.depth, "round": event.round}
    _message_fields(message, out)
    return out


def _tool_start_entry(event: Any) -> dict[str, Any]:
    return {
        "type": event.type,
        "depth": event.depth,
        "round": event.round,
        "tool_call_id": event.tool_call_id,
        "tool_name": event.tool_name,
        "args": event.args,
    }


def _tool_end_entry(event: Any) -> dict[str, Any]:
    return {
        "type": event.type,
        "depth": event.depth,
        "round": event.round,
        "tool_call_id": event.tool_call_id,
        "tool_name": event.tool_name,
        "args": event.args,
        "result": event.result.text,
        "is_error": event.is_error,
        "skipped": event.skipped,
        "error_kind": event.error_kind,
    }


def _turn_end_entry(event: Any) -> dict[str, Any]:
    message = event.message
    return {
        "type": event.type,
        "depth": event.depth,
        "round": event.round,
        "tool_calls": [b.name for b in message.content if isinstance(b, ToolCall)],
        "stop_reason": message.stop_reason,
        "tool_results": len(event.tool_results),
    }


def _agent_end_entry(event: Any) -> dict[str, Any]:
    return {"type": event.type, "depth": event.depth, "round": event.round, "reason": event.reason}


_BUILDERS: dict[type, Callable[[Any], dict[str, Any]]] = {
    AgentStart: _bare,
    TurnStart: _bare,
    MessageStart: _message_entry,
    MessageEnd: _message_entry,
    MessageUpdate: _update_entry,
    ToolExecutionStart: _tool_start_entry,
    ToolExecutionEnd: _tool_end_entry,
    TurnEnd: _turn_end_entry,
    AgentEnd: _agent_end_entry,
}
"""The engine's own event classes (any other, a subclass included, goes field by field)."""


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
        self.wants_updates = updates
        """Without ``updates``, the loop builds no ``message_update`` for this recorder."""
        self.trace: list[dict[str, Any]] = []

    def __call__(self, event: AgentEvent) -> None:
        if self.updates or event.type != "message_update":
            build = _BUILDERS.get(type(event))
            self.trace.append(build(event) if build is not None else _generic(event))

    def types(self) -> list[str]:
        return [e["type"] for e in self.trace]
