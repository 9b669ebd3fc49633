"""The client's side of the protocol, checked on every served session: each a named
invariant (:data:`CLIENT_CHECKS`) that :class:`ClientChecks` can turn off.

``answered_once``     every tool call served is answered exactly once, in the next request
``no_unknown_result`` no tool result answers a call never made (neither served in the
                      session nor in the request's own history)
``retry_after``       after an answer with ``retry-after`` (or ``retry-after-ms``), the next
                      request comes no sooner than it said
``max_retries``       no more than ``max_retries`` retries of one request in a row (a retry:
                      the same messages again after an error)
``no_key_in_body``    the API key the client sent in its auth header (``authorization``,
                      ``x-api-key``, ``x-goog-api-key``, ``api-key``, Gemini's ``?key=``) is
                      not inside its request body
``no_request_after_final`` after a final text, the next request brings a new user turn

Each violation is a :class:`~openprogram_sim.trace.Failure` that names the invariant, the
session, the request number and why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from openprogram_sim.trace import Failure
from openprogram_sim.wire._trace import Round, call_ident

__all__ = [
    "CLIENT_CHECKS",
    "DEFAULT_MAX_RETRIES",
    "ClientChecks",
    "check_client",
    "client_verdicts",
    "client_violations",
    "violation_failures",
]

CLIENT_CHECKS = (
    "answered_once",
    "no_unknown_result",
    "retry_after",
    "max_retries",
    "no_key_in_body",
    "no_request_after_final",
)
"""The client invariants, by name."""

DEFAULT_MAX_RETRIES = 4
"""Retries of one request in a row that ``max_retries`` allows by default (the official
SDKs retry twice)."""

RETRY_SLACK = 0.01
"""Seconds a retry may come before ``retry-after`` says (clock granularity)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientChecks:
    """Which client invariants a session is checked with.

    Args:
        off: the names of :data:`CLIENT_CHECKS` not checked.
        max_retries: retries of one request in a row that ``max_retries`` allows
            (``None``: :data:`DEFAULT_MAX_RETRIES`).
    """

    off: frozenset[str] = field(default_factory=frozenset)
    max_retries: int | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.off) - set(CLIENT_CHECKS))
        if unknown:
            raise ValueError(
                f"unknown client check(s) {', '.join(map(repr, unknown))}; the checks are "
                f"{', '.join(CLIENT_CHECKS)}"
            )
        if self.max_retries is not None and self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries!r}")

    @classmethod
    def of(cls, value: ClientChecks | Mapping[str, Any] | Iterable[str] | None) -> ClientChecks:
        """ClientChecks from itself, ``None`` (all on), the names to turn off, or a mapping
        ``{name: false, ..., "max_retries": N}``."""
        if value is None:
            return cls()
        if isinstance(value, ClientChecks):
            return value
        if isinstance(value, Mapping):
            raw = dict(value)
            retries = raw.pop("max_retries", None)
            bad = {k: v for k, v in raw.items() if not isinstance(v, bool)}
            if bad:
                raise ValueError(f"client checks take true or false, got {bad!r}")
            off = frozenset(k for k, v in raw.items() if not v)
            unknown = sorted(set(raw) - set(CLIENT_CHECKS))
            if unknown:
                cls(off=frozenset(unknown))  # raises, naming them
            return cls(off=off, max_retries=None if retries is None else int(retries))
        return cls(off=frozenset(value))

    def on(self, name: str) -> bool:
        return name not in self.off

    @property
    def retries(self) -> int:
        """The retries ``max_retries`` allows."""
        return DEFAULT_MAX_RETRIES if self.max_retries is None else self.max_retries

    def over(self, base: ClientChecks) -> ClientChecks:
        """These checks on top of ``base``'s (a scenario's ``wire:``): the checks either
        turns off, and this one's ``max_retries`` when it sets one."""
        retries = base.max_retries if self.max_retries is None else self.max_retries
        return ClientChecks(off=self.off | base.off, max_retries=retries)


def check_client(
    rounds: list[Round],
    leaks: Mapping[int, str],
    *,
    label: str,
    checks: ClientChecks,
) -> list[Failure]:
    """Every client invariant ``rounds`` (a session's model requests, see
    :func:`~openprogram_sim.wire._trace.build_trace`) break; ``leaks``: request number ->
    the header whose key its body holds."""
    found = client_violations(rounds, leaks, max_retries=checks.retries)
    return violation_failures(found, label=label, checks=checks)


def violation_failures(
    violations: list[tuple[int, str, str]], *, label: str, checks: ClientChecks
) -> list[Failure]:
    """The :func:`client_violations` of the invariants ``checks`` keeps on, as failures."""
    return [
        Failure(
            f"client check {name} broken by request #{index}: {why}",
            f"(turn it off with serve --no-check {name}, or the scenario's wire: {{checks: "
            f"{{{name}: false}}}})",
            f"{label}, request #{index}",
        )
        for index, name, why in violations
        if checks.on(name)
    ]


def client_verdicts(violations: list[tuple[int, str, str]], checks: ClientChecks) -> dict[str, str]:
    """Each invariant of :data:`CLIENT_CHECKS` as ``held``, ``broken`` or ``off``, given the
    :func:`client_violations` of a session."""
    broken = {name for _, name, _ in violations}
    return {
        name: "off" if not checks.on(name) else ("broken" if name in broken else "held")
        for name in CLIENT_CHECKS
    }


def client_violations(
    rounds: list[Round], leaks: Mapping[int, str], *, max_retries: int = DEFAULT_MAX_RETRIES
) -> list[tuple[int, str, str]]:
    """``(request number, invariant, why)`` for every break of an invariant, on or off, in
    request order (``max_retries``: the retries in a row ``max_retries`` allows)."""
    found: list[tuple[int, str, str]] = []
    retries = 0
    for k, r in enumerate(rounds):
        prev = rounds[k - 1] if k else None
        if prev is not None:
            found += _answers(prev, r)
            retries = retries + 1 if r.retry_of is not None else 0
            found += _timing(prev, r, retries, max_retries)
        found += [(r.index, "no_unknown_result", _stray(s)) for s in r.strays]
    for index, header in sorted(leaks.items()):
        found.append(
            (index, "no_key_in_body", f"the body holds the API key the client sent in {header}")
        )
    found.sort(key=lambda f: f[0])
    return found


def _answers(prev: Round, r: Round) -> list[tuple[int, str, str]]:
    served = prev.exchange.served
    if served is None or served.failed or not served.calls:
        return []
    out = []
    for i, call in enumerate(served.calls):
        count = r.answered.get(i, 0)
        if count == 1:
            continue
        which = f"call {call_ident(call, prev.index, i)} ({call.name})"
        how = "has no result" if count == 0 else f"has {count} results"
        out.append(
            (r.index, "answered_once",
             f"{which} served in answer #{prev.index} {how} in the next request")
        )  # fmt: skip
    return out


def _timing(prev: Round, r: Round, retries: int, most: int) -> list[tuple[int, str, str]]:
    out: list[tuple[int, str, str]] = []
    served = prev.exchange.served
    if served is None:
        return out
    wait = served.retry_after
    if wait is not None and served.ended is not None:
        waited = r.exchange.arrived - served.ended
        if waited + RETRY_SLACK < wait:
            out.append(
                (r.index, "retry_after",
                 f"it came {waited:.3f} s after answer #{prev.index}, whose retry-after "
                 f"asked for {wait:g} s")
            )  # fmt: skip
    if r.retry_of is not None and retries > most:
        out.append(
            (r.index, "max_retries",
             f"retry {retries} of request #{r.index - retries} in a row, where {most} "
             "are allowed (max_retries)")
        )  # fmt: skip
    if served.final and not r.new_user:
        same = " (the same request again)" if r.exchange.messages == prev.exchange.messages else ""
        out.append(
            (r.index, "no_request_after_final",
             f"answer #{prev.index} was the final text, and this request brings no new "
             f"user message{same}")
        )  # fmt: skip
    return out


def _stray(result: dict[str, Any]) -> str:
    return (
        f"a tool result for call {result.get('tool_call_id')!r}, which was never made (not "
        "served in this session, nor in the request's own history)"
    )
