"""Wire faults: what a scripted turn does to the HTTP exchange itself (status, headers,
timing, a cut connection, a corrupt chunk), kept beside the turn it belongs to.

A turn names them under a ``wire:`` key, next to the turn's usual keys::

    {"stop_reason": "error", "error": "slow down", "wire": {"status": 429, "retry_after": 2}}
    {"text": "Partly cloudy.", "wire": {"cut_after": 3}}
    {"text": "Partly cloudy.", "latency": 0.5, "wire": {"interval": 0.05}}

A *script* is the list of ``(Turn, WireFault)`` steps a scripted server plays in call order
(:meth:`openprogram_sim.scenario.Scenario.script` gives a scenario's). The wire simulator
(:mod:`openprogram_sim.wire`) turns each step into bytes; the scripted model ignores the
fault.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from openprogram_sim.models._turns import Turn

__all__ = [
    "NO_FAULT",
    "ErrorMode",
    "ScriptStep",
    "TurnLike",
    "WireFault",
    "refuse_scenario",
    "split_turn",
]

ErrorMode = Literal["auto", "http", "stream"]
"""How an ``error`` stop goes on the wire: ``http`` (an error status), ``stream`` (an error
event inside a 200 stream) or ``auto``."""

TurnLike = Turn | Mapping[str, Any] | str
"""A turn as :meth:`Turn.coerce` takes it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WireFault:
    """What one turn does to the HTTP exchange (the ``wire:`` key of a turn). Every
    field is optional; the default is a well-behaved response."""

    status: int | None = None
    """An HTTP error status (e.g. 429, 500, 503, Anthropic's 529): the turn is answered
    with that status and the API's own error body, carrying the turn's ``error`` text.
    With ``error_mode: stream`` it names the error type of the in-stream error event
    instead (e.g. 424: Bedrock's ``modelStreamErrorException``)."""
    retry_after: float | None = None
    """Seconds, sent as the ``retry-after`` header (with an error status)."""
    retry_after_ms: int | None = None
    """Milliseconds, sent as ``retry-after-ms`` (the header OpenAI's clients read first)."""
    error_mode: ErrorMode = "auto"
    """For an ``error`` stop: ``http`` (an error status), ``stream`` (an error event
    inside a 200 stream, after the content) or ``auto`` (see :func:`~openprogram_sim.wire.
    encode`)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers."""
    cut_after: int | None = None
    """Drop the connection after this many body chunks (0: right after the headers),
    without ending the response: the client sees a broken transfer."""
    corrupt_chunk: int | None = None
    """Replace body chunk N (from 1) with bytes the client cannot parse (invalid JSON in
    an SSE event or a JSON body, a bad checksum in an AWS event-stream frame)."""
    interval: float = 0.0
    """Real seconds between body chunks; each chunk (an SSE event, an event-stream frame)
    is then its own write. Without it the body is written at once, as a server writes a
    reply that is ready (the client reads the same bytes)."""

    @classmethod
    def coerce(cls, value: WireFault | Mapping[str, Any] | None) -> WireFault:
        """A WireFault from itself, a dict of its fields, or ``None`` (no fault)."""
        if value is None:
            return NO_FAULT
        if isinstance(value, WireFault):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"wire: must be a dict of {', '.join(_KEYS)}; got {value!r}")
        unknown = sorted(set(value) - set(_KEYS))
        if unknown:
            raise ValueError(f"unknown wire key(s) {unknown}; allowed: {', '.join(_KEYS)}")
        fault = cls(**dict(value))
        fault._check()
        return fault

    def _check(self) -> None:
        if self.status is not None and not 400 <= self.status <= 599:
            raise ValueError(
                f"wire.status must be an HTTP error status (400-599), got {self.status}"
            )
        for name in ("cut_after", "corrupt_chunk"):
            value = getattr(self, name)
            low = 0 if name == "cut_after" else 1
            if value is not None and (not isinstance(value, int) or value < low):
                raise ValueError(f"wire.{name} must be an integer >= {low}, got {value!r}")
        if self.interval < 0:
            raise ValueError(f"wire.interval must be >= 0 seconds, got {self.interval}")
        if self.error_mode not in ("auto", "http", "stream"):
            raise ValueError(
                f"wire.error_mode must be auto, http or stream, got {self.error_mode!r}"
            )


_KEYS = tuple(f.name for f in fields(WireFault))
NO_FAULT = WireFault()
"""The well-behaved exchange."""

ScriptStep = tuple[Turn, WireFault]
"""One scripted reply: the turn and what it does to the HTTP exchange."""


def split_turn(value: TurnLike | tuple[TurnLike, WireFault]) -> ScriptStep:
    """A turn and its wire fault from a dict with an optional ``wire:`` key, a
    :class:`~openprogram_sim.models.Turn` (no fault), a string, or a ready pair."""
    if isinstance(value, tuple):
        turn, fault = value
        return Turn.coerce(turn), WireFault.coerce(fault)
    if isinstance(value, Mapping) and "wire" in value:
        rest = {k: v for k, v in value.items() if k != "wire"}
        return Turn.coerce(rest), WireFault.coerce(value["wire"])
    return Turn.coerce(value), NO_FAULT


def refuse_scenario(source: object, who: str) -> None:
    """Raise a ``TypeError`` saying what to pass instead when ``source``, given to ``who``
    (``serve()``, ``ScriptedWire()``), is a scenario or a path rather than a script."""
    if isinstance(source, str | os.PathLike):
        raise TypeError(
            f"{who} takes a script (a list of turns), not the path {os.fspath(source)!r}; "
            "serve a scenario file with openprogram_sim.play.serve_scenario(path)"
        )
    if callable(getattr(source, "script", None)):
        raise TypeError(
            f"{who} takes a script (a list of turns), not a scenario; pass scenario.script() "
            "(its model: turns with their wire: faults), or serve it with "
            "openprogram_sim.play.serve_scenario(scenario), which also checks its "
            "expect.requests"
        )
