"""Behaviour coverage on the wire: what a served client did, seen from its session's report.

The loop's catalogue (:data:`~openprogram_sim.coverage.CATALOGUE`) is about our own loop;
a client behind ``openprogram-sim serve`` is someone else's, and the server sees only its
requests. :data:`WIRE_CATALOGUE` lists the client's own behaviours those requests show
(passed a tool error back, retried after a 429 and waited as ``retry-after`` asked,
recovered from a cut stream, returned every result of a parallel round, stopped on the
final text, ...). :func:`wire_behaviours` reads them from one session's report (its
compact trace and the facts of each request, :attr:`SessionReport.rounds
<openprogram_sim.wire.SessionReport.rounds>`); :class:`WireCoverage` counts them over the
sessions of a server, as ``openprogram-sim serve --coverage`` prints::

    coverage = WireCoverage()
    for report in server.check().sessions:
        coverage.add(report.label, wire_behaviours(report))
    print(coverage.table())

A behaviour is *seen* when a session shows it; the table names the ones no session showed.
The ids are stable, like the loop catalogue's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["WIRE_CATALOGUE", "WireBehaviour", "WireCoverage", "wire_behaviours"]

RETRY_SLACK = 0.01
"""Seconds a retry may come before ``retry-after`` says and still count as honouring it
(the ``retry_after`` client check allows the same)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WireBehaviour:
    """One behaviour of a client, as its requests show it."""

    id: str
    """Stable identifier (the JSON, the report)."""
    group: str
    """tools, faults, stops or protocol."""
    title: str
    """What the client did, in a line."""
    seen: str
    """What a session's requests must show for it to count as seen."""


WIRE_CATALOGUE: tuple[WireBehaviour, ...] = (
    WireBehaviour(
        id="tool_round",
        group="tools",
        title="ran the tool calls it was served and sent their results back",
        seen="an answer with tool calls, and a next request carrying a result for one of them",
    ),
    WireBehaviour(
        id="every_parallel_result",
        group="tools",
        title="returned every result of a round with several calls",
        seen="an answer with two or more tool calls, each answered exactly once in the next "
        "request",
    ),
    WireBehaviour(
        id="tool_error_returned",
        group="tools",
        title="passed a tool error back to the model",
        seen="a tool result marked as an error (is_error on Anthropic, response.error on "
        "Gemini, status error on Bedrock; OpenAI carries no such mark)",
    ),
    WireBehaviour(
        id="retried_error_status",
        group="faults",
        title="retried a request answered with an error status",
        seen="an HTTP error answer (429, 5xx, ...), then the same request again",
    ),
    WireBehaviour(
        id="honoured_retry_after",
        group="faults",
        title="retried after a 429 no sooner than its retry-after asked",
        seen="a 429 answer with retry-after (or retry-after-ms), then the same request again, "
        "at least that long after the answer ended",
    ),
    WireBehaviour(
        id="recovered_cut_stream",
        group="faults",
        title="recovered from a stream cut off before its end",
        seen="an answer broken off (a cut connection, a corrupt chunk, truncate), then the "
        "same request again, ending in an answer that is no error",
    ),
    WireBehaviour(
        id="retried_stream_error",
        group="faults",
        title="retried after an error inside a streamed answer",
        seen="an error event inside a 200 answer, then the same request again",
    ),
    WireBehaviour(
        id="stopped_on_text",
        group="stops",
        title="stopped on the final text",
        seen="a text answer with no tool calls, after which the client sent nothing more, or "
        "only a request with a new user message",
    ),
    WireBehaviour(
        id="new_user_turn",
        group="stops",
        title="went on with a new user message after a final text",
        seen="a request after a final text that brings a new user message",
    ),
    WireBehaviour(
        id="streamed",
        group="protocol",
        title="asked for a streamed answer",
        seen='a model request with "stream": true (or a streaming route)',
    ),
    WireBehaviour(
        id="not_streamed",
        group="protocol",
        title="asked for a whole answer",
        seen="a model request without streaming",
    ),
    WireBehaviour(
        id="previous_response",
        group="protocol",
        title=(
            "sent only its new messages, the server holding the conversation (Responses "
            "previous_response_id, Anthropic thread continue)"
        ),
        seen=(
            "a Responses request naming a previous_response_id, or an Anthropic thread "
            "continue, that the session served"
        ),
    ),
)

_ORDER = {b.id: i for i, b in enumerate(WIRE_CATALOGUE)}


class _Served(Protocol):
    """What :func:`wire_behaviours` reads of a session's report."""

    @property
    def trace(self) -> list[dict[str, Any]]: ...

    @property
    def rounds(self) -> list[dict[str, Any]]: ...


def _retries(rounds: Sequence[Mapping[str, Any]], k: int) -> list[Mapping[str, Any]]:
    """The requests that repeat request ``k``'s, one after another (a chain of retries)."""
    chain = []
    last = rounds[k]["request"]
    for r in rounds[k + 1 :]:
        if r.get("retry_of") != last:
            break
        chain.append(r)
        last = r["request"]
    return chain


def _fault_behaviours(rounds: Sequence[Mapping[str, Any]]) -> set[str]:
    found: set[str] = set()
    for k, r in enumerate(rounds):
        failure = r.get("failure")
        if failure is None:
            continue
        chain = _retries(rounds, k)
        if not chain:
            continue
        if failure == "http":
            found.add("retried_error_status")
            wait = r.get("retry_after")
            waited = chain[0].get("waited")
            timed = r.get("status") == 429 and wait is not None and waited is not None
            if timed and float(waited or 0) + RETRY_SLACK >= float(wait or 0):
                found.add("honoured_retry_after")
        elif failure == "cut":
            if any(c.get("failure") is None and c.get("status") is not None for c in chain):
                found.add("recovered_cut_stream")
        elif failure == "stream":
            found.add("retried_stream_error")
    return found


def _stop_behaviours(rounds: Sequence[Mapping[str, Any]]) -> set[str]:
    found: set[str] = set()
    for k, r in enumerate(rounds):
        if not r.get("final"):
            continue
        after = rounds[k + 1] if k + 1 < len(rounds) else None
        if after is None or after.get("new_user"):
            found.add("stopped_on_text")
        if after is not None and after.get("new_user"):
            found.add("new_user_turn")
    return found


def _tool_behaviours(
    rounds: Sequence[Mapping[str, Any]], trace: Iterable[Mapping[str, Any]]
) -> set[str]:
    found: set[str] = set()
    for k, r in enumerate(rounds[:-1]):
        calls = int(r.get("calls") or 0)
        answered = rounds[k + 1].get("answered") or []
        if calls and any(n >= 1 for n in answered):
            found.add("tool_round")
        if calls >= 2 and len(answered) == calls and all(n == 1 for n in answered):
            found.add("every_parallel_result")
    if any(e.get("type") == "tool_execution_end" and e.get("is_error") is True for e in trace):
        found.add("tool_error_returned")
    return found


def wire_behaviours(report: _Served) -> list[str]:
    """The ids of :data:`WIRE_CATALOGUE` one session's report shows, in catalogue order."""
    rounds = report.rounds
    found = _fault_behaviours(rounds) | _stop_behaviours(rounds)
    found |= _tool_behaviours(rounds, report.trace)
    for r in rounds:
        if r.get("stream") is True:
            found.add("streamed")
        elif r.get("stream") is False:
            found.add("not_streamed")
        if r.get("previous_response"):
            found.add("previous_response")
    return sorted(found, key=lambda i: _ORDER[i])


class WireCoverage:
    """Which client behaviours the sessions of a server showed: per behaviour of
    :data:`WIRE_CATALOGUE`, the sessions (labels) that showed it."""

    def __init__(self) -> None:
        self.seen: dict[str, list[str]] = {b.id: [] for b in WIRE_CATALOGUE}
        self.sessions: list[str] = []

    def add(self, session: str, ids: Iterable[str]) -> None:
        """Count one session (its label) and the behaviours it showed."""
        if session not in self.sessions:
            self.sessions.append(session)
        for id in ids:
            if id not in self.seen:
                known = ", ".join(self.seen)
                raise ValueError(f"unknown wire behaviour {id!r}; the behaviours are {known}")
            if session not in self.seen[id]:
                self.seen[id].append(session)

    @property
    def missing(self) -> list[str]:
        """Behaviours no session showed, in catalogue order."""
        return [b.id for b in WIRE_CATALOGUE if not self.seen[b.id]]

    @property
    def percent(self) -> float:
        done = sum(1 for b in WIRE_CATALOGUE if self.seen[b.id])
        return 100.0 * done / len(WIRE_CATALOGUE)

    def to_json(self) -> dict[str, Any]:
        """``{"behaviours": {id: [sessions]}, "seen_percent": P, "sessions": N}`` (every id,
        in catalogue order)."""
        return {
            "behaviours": {b.id: list(self.seen[b.id]) for b in WIRE_CATALOGUE},
            "seen_percent": round(self.percent, 2),
            "sessions": len(self.sessions),
        }

    def table(self) -> str:
        """The table ``serve --coverage`` prints: one line per behaviour, then the gaps."""
        width = max(len(b.id) for b in WIRE_CATALOGUE)
        seen = len(WIRE_CATALOGUE) - len(self.missing)
        lines = [
            f"client behaviour coverage: {len(WIRE_CATALOGUE)} behaviours, {seen} seen "
            f"({self.percent:.1f}%), over {len(self.sessions)} session(s)",
            f"  {'group':<9} {'behaviour':<{width}}  sessions  status",
        ]
        for b in WIRE_CATALOGUE:
            status = "seen" if self.seen[b.id] else "NOT SEEN"
            lines.append(f"  {b.group:<9} {b.id:<{width}}  {len(self.seen[b.id]):>8}  {status}")
        for b in WIRE_CATALOGUE:
            if not self.seen[b.id]:
                lines.append(f"not seen: {b.id}: {b.title}")
        return "\n".join(lines)
