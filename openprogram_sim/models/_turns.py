"""Scripted model turns: what a scripted provider replies on one call.

A turn is given as a :class:`Turn`, a bare string (its text) or a dict with the same keys
(the scenario file's ``model:`` items); :meth:`Turn.coerce` accepts all three.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from openprogram.types import ErrorDetails, ErrorReason, Usage

__all__ = ["Turn", "TurnToolCall"]


@dataclass(slots=True)
class TurnToolCall:
    name: str
    arguments: Any = field(default_factory=dict)
    """A dict (sent as JSON) or a string (sent verbatim, e.g. to test malformed JSON)."""
    id: str | None = None
    json_text: str = field(init=False, repr=False, compare=False)
    """The arguments as the JSON text streamed (computed once)."""

    def __post_init__(self) -> None:
        raw = self.arguments
        self.json_text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)

    @classmethod
    def coerce(cls, value: Any) -> TurnToolCall:
        """A call from a TurnToolCall, ``{name: arguments}`` or ``{"name": ..., "arguments": ...,
        "id": ...}``."""
        if isinstance(value, TurnToolCall):
            return value
        if isinstance(value, Mapping) and "name" in value:
            return cls(value["name"], value.get("arguments", {}), value.get("id"))
        if isinstance(value, Mapping) and len(value) == 1:
            ((name, args),) = value.items()
            return cls(str(name), {} if args is None else args)
        raise ValueError(
            f"scripted tool call {value!r} must be {{name: arguments}} or "
            '{"name": ..., "arguments": ..., "id": ...}'
        )


@dataclass(slots=True)
class Turn:
    """One scripted model reply."""

    text: str | None = None
    thinking: str | None = None
    tool_calls: list[TurnToolCall] = field(default_factory=list)
    stop_reason: Literal["stop", "length", "toolUse", "error", "aborted"] | None = None
    """Defaults to ``toolUse`` with tool calls, else ``stop``."""
    error: str | None = None
    """The provider's error text for an ``error``/``aborted`` stop."""
    error_reason: ErrorReason | None = None
    """For an ``error`` stop: the kind of failure the provider reported (its
    :class:`~openprogram.types.ErrorDetails` ``reason``; ``other`` when not given)."""
    retryable: bool | None = None
    """For an ``error`` stop: whether the provider said a retry may succeed."""
    retry_after: float | None = None
    """For an ``error`` stop: seconds the provider asked to wait."""
    usage: Usage | None = None
    latency: float = 0.0
    """Seconds the reply takes, on the model's virtual clock (no real waiting)."""
    fault: Literal["truncate", "raise", "hang"] | None = None
    """Misbehave after streaming the body: ``truncate`` ends the stream without a final
    event, ``raise`` raises ``ScriptedFault`` (with ``error`` as its text), ``hang`` waits
    until the run is aborted."""

    def error_details(self) -> ErrorDetails | None:
        """What an ``error`` stop of this turn reports (None for other turns)."""
        if self.stop_reason != "error":
            return None
        return ErrorDetails(
            reason=self.error_reason or "other",
            retryable=bool(self.retryable),
            retry_after=self.retry_after,
        )

    @classmethod
    def coerce(cls, value: Turn | Mapping[str, Any] | str) -> Turn:
        """A Turn from a Turn, a bare string (text) or a dict with the same keys; tool calls
        may be ``{name: args}`` or ``{"name": ..., "arguments": ..., "id": ...}``."""
        if isinstance(value, Turn):
            return value
        if isinstance(value, str):
            return cls(text=value)
        if not isinstance(value, Mapping):
            raise TypeError(f"a scripted turn must be a Turn, a str or a dict, got {value!r}")
        unknown = set(value) - set(_TURN_KEYS)
        if unknown:
            raise ValueError(
                f"unknown key(s) {sorted(unknown)} in scripted turn {dict(value)!r}; allowed: "
                f"{', '.join(_TURN_KEYS)}"
            )
        usage = value.get("usage")
        return cls(
            text=value.get("text"),
            thinking=value.get("thinking"),
            tool_calls=[TurnToolCall.coerce(c) for c in value.get("tool_calls") or []],
            stop_reason=value.get("stop_reason"),
            error=value.get("error"),
            error_reason=value.get("error_reason"),
            retryable=value.get("retryable"),
            retry_after=value.get("retry_after"),
            usage=Usage(**usage) if isinstance(usage, Mapping) else usage,
            fault=value.get("fault"),
            latency=float(value.get("latency", 0.0)),
        )


_TURN_KEYS = (
    "text",
    "thinking",
    "tool_calls",
    "stop_reason",
    "error",
    "error_reason",
    "retryable",
    "retry_after",
    "usage",
    "fault",
    "latency",
)
