"""A served session as a trace: what the client sent and what the server served, in the
event shapes our own loop's trace uses, so ``expect.trajectory``, ``expect.properties``
and event expectations read it unchanged.

A session is a run seen from the server. Each model request is one round: it opens with
``turn_start``, then the user messages new in that request, then the assistant message the
server served (``message_start``/``message_end`` with ``text``, ``tool_calls``,
``stop_reason``; an error served has ``stop_reason: error``, ``error``, ``error_status``,
``retry_after``). The round's tool calls are closed by the *next* request: each call served
gets its ``tool_execution_start`` (``tool_call_id``, ``tool_name``, ``args`` as served),
and, when the next request carries its result (matched by call id; by name and order on
Gemini without ids), its ``tool_execution_end`` (``result`` the text the client sent,
``is_error`` where the API carries it, ``None`` on OpenAI) and the ``toolResult`` message;
then ``turn_end``. A call never answered has a start and no end.

A request after a final text that brings a new user message starts a new exec (its own
``agent_start``; rounds count from 1 again), as a conversation does on our loop. The trace
ends with ``agent_end``: ``reason`` ``stop`` (the last answer was a text), ``error`` (it
was an error), ``aborted`` (the client never sent the results of the last calls).

What the events cannot say (retries, results missing, duplicated or answering no call)
is kept per round in :class:`Round`, which the client checks read
(:mod:`openprogram_sim.wire._client_checks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "KEPT_TEXT",
    "KEPT_TRACE_BYTES",
    "Exchange",
    "KeptTrace",
    "Round",
    "Served",
    "ServedCall",
    "SessionTrace",
    "build_trace",
    "call_ident",
    "keep_trace",
]

KEPT_TEXT = 2000
"""Characters of one string (a text, a result, an argument) a session's report keeps; the
rest is cut, with a note of how much."""

KEPT_TRACE_BYTES = 64 * 1024
"""Bytes of trace (as JSON) a session's report keeps for its timeline; entries past it are
counted, not kept."""

_LEFT_OUT = frozenset({"message_start", "message_update"})
"""Entries a kept trace leaves out (the ``message_end`` carries the same fields)."""


@dataclass(frozen=True, slots=True)
class ServedCall:
    """One tool call the server served."""

    id: str | None
    """Its id as sent (``None``: Gemini, when the turn names none)."""
    name: str
    args: Any


@dataclass(slots=True)
class Served:
    """What the server answered one model call with (its fields by name, but for the
    server's answers made ready, which give them by position: see ``_Ready.served``)."""

    status: int
    calls: list[ServedCall] = field(default_factory=list)
    text: str = ""
    stop_reason: str = "stop"
    """``stop``, ``toolUse``, ``length`` or ``error`` (any answer the client cannot use:
    an HTTP error, an in-stream error, a cut or unfinished stream)."""
    error: str | None = None
    retry_after: float | None = None
    """Seconds the answer's headers asked the client to wait (``retry-after-ms``, else
    ``retry-after``)."""
    ended: float | None = None
    """When the answer was finished (``time.monotonic``)."""

    @property
    def failed(self) -> bool:
        return self.stop_reason == "error"

    @property
    def final(self) -> bool:
        """A text answer that asks for nothing more."""
        return not self.failed and not self.calls


@dataclass(slots=True, kw_only=True)
class Exchange:
    """One model request of a session and its answer."""

    index: int
    """The request's number in its session (from 1)."""
    arrived: float
    """When the request's body had been read (``time.monotonic``)."""
    messages: list[dict[str, Any]]
    """As :func:`~openprogram_sim.wire._requests.read_messages` reads them (with ids)."""
    served: Served | None
    """``None``: the answer is still being sent."""


@dataclass(slots=True, kw_only=True)
class Round:
    """One model request as the checks read it."""

    index: int
    """The request's number in its session."""
    round: int
    exchange: Exchange
    retry_of: int | None = None
    """The request this one repeats (the same messages after an error), if any."""
    new_user: bool = False
    """The request brings a user message after the last answer (a new user turn)."""
    answered: dict[int, int] = field(default_factory=dict)
    """For each call the previous answer served (by position), the results this request
    carries for it."""
    strays: list[dict[str, Any]] = field(default_factory=list)
    """Results this request brings that answer no call served nor in its own history."""


@dataclass(slots=True, kw_only=True)
class SessionTrace:
    """A session's trace and the rounds it was built from."""

    trace: list[dict[str, Any]]
    rounds: list[Round]


def call_ident(call: ServedCall, answer: int, i: int) -> str:
    """The ``tool_call_id`` of call ``i`` (from 0) served in answer ``answer``: its id, else
    (Gemini without ids) ``#answer.i``."""
    return call.id if call.id is not None else f"#{answer}.{i}"


def build_trace(exchanges: Sequence[Exchange]) -> SessionTrace:
    """The trace of a session's model requests, in arrival order."""
    return _Builder().build(exchanges)


def _results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("role") == "toolResult"]


def _new_part(prev: list[dict[str, Any]] | None, now: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What ``now`` adds to ``prev`` (all of it when ``prev`` is no prefix of it)."""
    if prev is not None and len(prev) <= len(now) and now[: len(prev)] == prev:
        return now[len(prev) :]
    return now


class _Builder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.rounds: list[Round] = []
        self.round = 0
        self.open = False
        self.served_ids: set[str] = set()

    def emit(self, kind: str, **fields: Any) -> None:
        self.events.append({"type": kind, "depth": 0, "round": self.round, **fields})

    def build(self, exchanges: Sequence[Exchange]) -> SessionTrace:
        prev: Exchange | None = None
        for ex in exchanges:
            self._request(prev, ex)
            prev = ex
        if prev is not None:
            self._close(prev, None)
            served = prev.served
            if served is None or served.failed:
                reason = "error"
            else:
                reason = "aborted" if served.calls else "stop"
            self.emit("agent_end", reason=reason)
        return SessionTrace(trace=self.events, rounds=self.rounds)

    def _request(self, prev: Exchange | None, ex: Exchange) -> None:
        new = _new_part(prev.messages if prev else None, ex.messages)
        retry = prev is not None and prev.served is not None and prev.served.failed
        retry_of = prev.index if retry and prev and ex.messages == prev.messages else None
        new_user = any(m.get("role") == "user" for m in new)
        info = Round(index=ex.index, round=0, exchange=ex, retry_of=retry_of, new_user=new_user)
        if prev is not None:
            self._close(prev, ex, info)
        restart = prev is None or (prev.served is not None and prev.served.final and new_user)
        if restart:
            if self.open:
                self.emit("agent_end", reason="stop")
            self.round = 0
            self.emit("agent_start")
            self.open = True
        self.round += 1
        info.round = self.round
        self.rounds.append(info)
        self.emit("turn_start")
        for m in new:
            if m.get("role") == "user":
                fields = {"role": "user", "text": m.get("text", "")}
                self.emit("message_start", **fields)
                self.emit("message_end", **fields)
        self._served(ex.served)

    def _served(self, served: Served | None) -> None:
        if served is None:
            return
        fields: dict[str, Any] = {
            "role": "assistant",
            "text": served.text,
            "tool_calls": [c.name for c in served.calls],
            "stop_reason": served.stop_reason,
        }
        if served.failed:
            fields.update(
                error=served.error or "", error_status=served.status,
                retry_after=served.retry_after,
            )  # fmt: skip
        self.emit("message_start", **{**fields, "tool_calls": [], "stop_reason": "stop"})
        self.emit("message_end", **fields)
        self.served_ids.update(c.id for c in served.calls if c.id is not None)

    def _close(self, prev: Exchange, ex: Exchange | None, info: Round | None = None) -> None:
        """End ``prev``'s round: its calls, with the results ``ex`` (the next request)
        carries for them, then ``turn_end``."""
        served = prev.served
        calls = [] if served is None or served.failed else served.calls
        messages = ex.messages if ex is not None else []
        new_results = _results(_new_part(prev.messages, messages))
        used: set[int] = set()
        answered = 0
        for i, call in enumerate(calls):
            if call.id is not None:
                found = [r for r in new_results if r.get("tool_call_id") == call.id]
            else:  # Gemini without ids: by name, in order, among the new results
                found = []
                for k, r in enumerate(new_results):
                    if (
                        k not in used
                        and r.get("tool_call_id") is None
                        and r.get("tool_name") == call.name
                    ):
                        used.add(k)
                        found = [r]
                        break
            if info is not None:
                info.answered[i] = len(found)
            self.emit(
                "tool_execution_start",
                tool_call_id=call_ident(call, prev.index, i),
                tool_name=call.name,
                args=call.args,
            )
            if found:
                answered += 1
                self._result(call, call_ident(call, prev.index, i), found[0])
        if info is not None:
            known = self.served_ids | {
                str(c.get("id"))
                for m in messages
                if m.get("role") == "assistant"
                for c in m.get("tool_calls", [])
                if c.get("id") is not None
            }
            info.strays = [
                r
                for r in new_results
                if r.get("tool_call_id") is not None and r["tool_call_id"] not in known
            ]
        self.emit(
            "turn_end",
            tool_calls=[c.name for c in calls],
            stop_reason=served.stop_reason if served else "error",
            tool_results=answered,
        )

    def _result(self, call: ServedCall, ident: str, result: dict[str, Any]) -> None:
        is_error = result.get("is_error")
        text = result.get("text", "")
        self.emit(
            "tool_execution_end", tool_call_id=ident, tool_name=call.name, args=call.args,
            result=text, is_error=is_error, skipped=False, error_kind=None,
        )  # fmt: skip
        fields = {"role": "toolResult", "text": text, "tool_call_id": ident,
                  "tool_name": call.name, "is_error": is_error, "skipped": False}  # fmt: skip
        self.emit("message_start", **fields)
        self.emit("message_end", **fields)


@dataclass(slots=True, kw_only=True)
class KeptTrace:
    """What a session's report keeps of its trace: the entries the timeline draws, each
    string cut at :data:`KEPT_TEXT` characters, until :data:`KEPT_TRACE_BYTES`."""

    entries: list[dict[str, Any]]
    numbers: list[int]
    """Each kept entry's position in the whole trace (the ``#N`` failures name)."""
    dropped: int = 0
    """Entries past the byte budget, not kept (``message_start``/``message_update`` are
    left out by design and not counted)."""


_SCALARS = (bool, int, float)
_SEQUENCES = (list, tuple)


def _cut(value: Any, limit: int) -> tuple[Any, int]:
    """``value`` with every string longer than ``limit`` cut, saying how much was (the
    value itself when nothing is), and about how many bytes it takes as JSON."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value, len(value) + 2
        cut = f"{value[:limit]}... [{len(value) - limit} more characters not kept]"
        return cut, len(cut) + 2
    if value is None or isinstance(value, _SCALARS):
        return value, 5
    if isinstance(value, dict):
        size, out, same = 2, {}, True
        for k, v in value.items():
            small, n = _cut(v, limit)
            same = same and small is v and isinstance(k, str)
            out[str(k)] = small
            size += n + len(str(k)) + 4
        return (value if same else out), size
    if isinstance(value, _SEQUENCES):
        size, items, same = 2, [], isinstance(value, list)
        for v in value:
            small, n = _cut(v, limit)
            same = same and small is v
            items.append(small)
            size += n + 1
        return (value if same else items), size
    return _cut(str(value), limit)


def keep_trace(
    trace: Sequence[dict[str, Any]], *, text: int = KEPT_TEXT, budget: int = KEPT_TRACE_BYTES
) -> KeptTrace:
    """The part of ``trace`` a session's report keeps (see :class:`KeptTrace`): JSON-safe,
    and at most about ``budget`` bytes however long the session was."""
    kept = KeptTrace(entries=[], numbers=[])
    used = 0
    for i, entry in enumerate(trace):
        if entry.get("type") in _LEFT_OUT:
            continue
        if used >= budget:
            kept.dropped += 1
            continue
        small, size = _cut(entry, text)
        used += size
        kept.entries.append(small)
        kept.numbers.append(i)
    return kept
