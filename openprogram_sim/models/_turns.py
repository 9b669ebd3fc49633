"""Scripted model turns: what a scripted provider replies on one call.

A turn is given as a :class:`Turn`, a bare string (its text) or a dict with the same keys
(the scenario file's ``model:`` items); :meth:`Turn.coerce` accepts all three.

A turn may instead be a weighted choice between replies, ``{"one_of": [{"weight": 0.7,
"tool_calls": [...]}, {"weight": 0.3, "text": "..."}]}``: a model that varies on purpose.
Whoever plays it draws one option per call with :meth:`Turn.draw` from its own seeded
``random.Random`` (the scripted model per run, the wire server per session).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from openprogram.types import ErrorDetails, ErrorReason, Usage

__all__ = ["Choice", "Turn", "TurnToolCall", "script_seed", "session_seed"]


@dataclass(slots=True)
class TurnToolCall:
    name: str
    arguments: Any = field(default_factory=dict)
    """A dict (sent as JSON) or a string (sent verbatim, e.g. to test malformed JSON)."""
    id: str | None = None
    _json: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        raw = self.arguments
        if isinstance(raw, str):
            self._json = raw
        elif not _flat(raw):  # dumped now, so arguments JSON cannot hold still fail here
            self._json = json.dumps(raw, ensure_ascii=False)
        # a flat object of JSON scalars always dumps: left until a stream first needs the
        # text (a reply played whole never does: its arguments are copied, not parsed back)

    @property
    def json_text(self) -> str:
        """The arguments as the JSON text streamed (computed once)."""
        text = self._json
        if text is None:
            text = self._json = json.dumps(self.arguments, ensure_ascii=False)
        return text

    @classmethod
    def coerce(cls, value: Any) -> TurnToolCall:
        """A call from a TurnToolCall, ``{name: arguments}`` or ``{"name": ..., "arguments": ...,
        "id": ...}``."""
        if isinstance(value, TurnToolCall):
            return value
        if type(value) is dict or isinstance(value, Mapping):  # no ABC check for a dict
            if "name" in value:
                return cls(value["name"], value.get("arguments", {}), value.get("id"))
            if len(value) == 1:
                ((name, args),) = value.items()
                return cls(str(name), {} if args is None else args)
        raise ValueError(
            f"scripted tool call {value!r} must be {{name: arguments}} or "
            '{"name": ..., "arguments": ..., "id": ...}'
        )


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _flat(arguments: Any) -> bool:
    """Whether ``arguments`` is a dict of str keys to JSON scalars (``json.dumps`` always
    takes one)."""
    if type(arguments) is not dict:
        return False
    for key, value in arguments.items():
        if type(key) is not str or type(value) not in _SCALARS:
            return False
    return True


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
    one_of: tuple[Choice, ...] = ()
    """A weighted choice: when given, the turn is one of these replies, drawn per call by
    :meth:`draw` (the turn's other fields are unused)."""
    seed: int | None = None
    """For a ``one_of`` turn: the seed a player draws from when it is given none (a
    scenario's ``seed:``; the wire server derives each session's from it)."""

    def draw(self, rng: random.Random) -> tuple[Turn, int | None]:
        """The reply to play and the option drawn (from 0): a plain turn is itself (None);
        a ``one_of`` turn draws one option with probability weight / sum of weights,
        using one ``rng.random()``."""
        if not self.one_of:
            return self, None
        total = math.fsum(c.weight for c in self.one_of)
        point = rng.random() * total
        for k, choice in enumerate(self.one_of):
            point -= choice.weight
            if point < 0:
                return choice.turn, k
        return self.one_of[-1].turn, len(self.one_of) - 1

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
        if "one_of" in value:
            return cls.choice(value)
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

    @classmethod
    def choice(cls, value: Mapping[str, Any]) -> Turn:
        """A ``one_of`` turn from ``{"one_of": [{"weight": w, ...turn keys}, ...]}``."""
        extra = sorted(set(value) - {"one_of"})
        if extra:
            raise ValueError(
                f"a one_of turn takes no other key, got {extra}; put them in its options"
            )
        options = value["one_of"]
        if not isinstance(options, Sequence) or isinstance(options, str) or not options:
            raise ValueError(
                "one_of must be a non-empty list of options, each {weight: W, ...turn keys}"
            )
        return cls(one_of=tuple(Choice.coerce(o, k) for k, o in enumerate(options)))


def script_seed(turns: Sequence[Turn]) -> int | None:
    """The seed the ``one_of`` turns of a script were given (the first one's), if any."""
    return next((t.seed for t in turns if t.one_of and t.seed is not None), None)


def session_seed(base: int | None, name: str | None) -> int:
    """A session's seed: from ``base`` and the session's name when ``base`` is given (so a
    seeded scenario serves the same draws to the same session name), else fresh."""
    if base is None:
        return random.SystemRandom().randrange(2**32)
    return random.Random(f"{base}:{name}").randrange(2**32)


@dataclass(frozen=True, slots=True)
class Choice:
    """One option of a ``one_of`` turn: the reply and its weight (any positive number; the
    weights need not sum to 1)."""

    weight: float
    turn: Turn

    def __post_init__(self) -> None:
        check_weight(self.weight, "one_of weight")

    @classmethod
    def coerce(cls, value: Choice | Mapping[str, Any], index: int = 0) -> Choice:
        """A Choice from itself or ``{"weight": w, ...turn keys}`` (option ``index``)."""
        if isinstance(value, Choice):
            return value
        if not isinstance(value, Mapping) or "weight" not in value:
            raise ValueError(f"one_of[{index}] must be {{weight: W, ...turn keys}}, got {value!r}")
        rest = {k: v for k, v in value.items() if k != "weight"}
        if "one_of" in rest:
            raise ValueError(f"one_of[{index}]: an option cannot hold another one_of")
        return cls(check_weight(value["weight"], f"one_of[{index}].weight"), Turn.coerce(rest))


def check_weight(weight: Any, where: str) -> float:
    """``weight`` as a float when it is a positive finite number, else a ValueError naming
    ``where``."""
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise ValueError(f"{where} must be a positive number, got {weight!r}")
    if not math.isfinite(weight) or weight <= 0:
        raise ValueError(f"{where} must be a positive number, got {weight!r}")
    return float(weight)


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
