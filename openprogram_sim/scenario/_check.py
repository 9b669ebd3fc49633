"""A scenario's verdict: its outcome checked against every ``expect:`` key.

Each failed check is a :class:`Failure` with a title and a readable detail (for events:
the first expectation that did not match, the trace around where it should have been,
and a side-by-side of expected and actual fields).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from openprogram_sim.errors import MatchTimeoutError, ScriptExhaustedError
from openprogram_sim.scenario._runner import RunOutcome
from openprogram_sim.trace import (
    describe,
    event_matches,
    match_events,
    matches,
    render_entry,
    render_mismatch,
)

__all__ = ["Failure", "Verdict", "check_outcome"]


@dataclass(slots=True)
class Failure:
    title: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.title}\n{self.detail}" if self.detail else self.title


@dataclass(slots=True)
class Verdict:
    outcome: RunOutcome
    failures: list[Failure] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def report(self) -> str:
        """Every failure, in check order."""
        return "\n\n".join(str(f) for f in self.failures)


def _exhausted(error: BaseException | None) -> ScriptExhaustedError | None:
    while error is not None:
        if isinstance(error, ScriptExhaustedError):
            return error
        error = error.__cause__
    return None


def _check_raises(outcome: RunOutcome, out: list[Failure]) -> None:
    expect = outcome.scenario.expect
    exhausted = _exhausted(outcome.error)
    if exhausted is not None:
        out.append(Failure("the model was called beyond its script", str(exhausted)))
        return
    if expect.raises is False:
        if outcome.error is not None:
            out.append(
                Failure("exec raised, and the scenario expects no error", outcome.error_text or "")
            )
        return
    if outcome.error is None:
        out.append(
            Failure(
                "exec returned, and the scenario expects it to raise",
                f"returned: {outcome.result!r}",
            )
        )
        return
    spec = expect.raises
    message = spec if isinstance(spec, str) else getattr(spec, "message", None)
    wanted_type = getattr(spec, "type", None)
    if wanted_type is not None:
        names = [c.__name__ for c in type(outcome.error).__mro__]
        if wanted_type not in names:
            out.append(
                Failure(
                    f"exec raised {names[0]}, expected {wanted_type}",
                    f"raised: {outcome.error_text}",
                )
            )
    if message is not None and message not in str(outcome.error):
        out.append(
            Failure(
                f"exec raised, but its message lacks {message!r}", f"raised: {outcome.error_text}"
            )
        )


def _check_result(outcome: RunOutcome, out: list[Failure]) -> None:
    expected = outcome.scenario.expect.result
    if expected is None or outcome.error is not None:
        return
    if not matches(expected, outcome.result):
        out.append(
            Failure(
                "exec returned something else",
                f"  expected: {describe(expected)}\n  actual:   {outcome.result!r}",
            )
        )


def _check_calls(outcome: RunOutcome, out: list[Failure]) -> None:
    expect = outcome.scenario.expect
    if expect.model_calls is not None and expect.model_calls != outcome.model_calls:
        out.append(
            Failure(
                f"the model was called {outcome.model_calls} times, expected {expect.model_calls}"
            )
        )
    if outcome.unconsumed:
        total = outcome.scripted_turns
        out.append(
            Failure(
                f"{outcome.unconsumed} of {total} scripted turns were never requested",
                "remove them, or check why the loop ended early",
            )
        )


def _check_requests(outcome: RunOutcome, out: list[Failure]) -> None:
    for i, want in enumerate(outcome.scenario.expect.requests):
        index = (want.call or i + 1) - 1
        if index >= len(outcome.requests):
            out.append(
                Failure(
                    f"expected request {index + 1}, but the model was called "
                    f"{len(outcome.requests)} times"
                )
            )
            continue
        actual = outcome.requests[index]
        fields = _loosen_messages(want.model_dump(exclude_none=True, exclude={"call"}))
        bad = {k: v for k, v in fields.items() if not matches(v, actual.get(k))}
        if bad:
            rows = [
                f"  {k}: expected {describe(v)}, actual {json.dumps(actual.get(k), default=str)}"
                for k, v in bad.items()
            ]
            out.append(
                Failure(
                    f"request {index + 1} (depth {actual['depth']}, round "
                    f"{actual['round']}) differs",
                    "\n".join(rows),
                )
            )


def _subset(value: Any) -> Any:
    if isinstance(value, dict) and not any(str(k).startswith("$") for k in value):
        return {"$subset": value}
    return value


def _loosen_messages(fields: dict[str, Any]) -> dict[str, Any]:
    """Message fields compare like event fields: the ones given must match."""
    if "last_message" in fields:
        fields["last_message"] = _subset(fields["last_message"])
    if isinstance(fields.get("messages"), list):
        fields["messages"] = [_subset(m) for m in fields["messages"]]
    return fields


def _check_events(outcome: RunOutcome, out: list[Failure]) -> None:
    expect = outcome.scenario.expect
    trace = outcome.trace
    if expect.events:
        mismatch = match_events(expect.events, trace, expect.events_mode)
        if mismatch is not None:
            out.append(
                Failure(
                    f"events ({expect.events_mode}) did not match",
                    render_mismatch(mismatch, trace, total=len(expect.events)),
                )
            )
    for unwanted in expect.not_events:
        hits = [i for i, e in enumerate(trace) if event_matches(unwanted, e)]
        if hits:
            shown = "\n".join(f"  #{i:<3} {render_entry(trace[i])}" for i in hits[:5])
            out.append(
                Failure(
                    f"an event that must not occur occurred {len(hits)} time(s): "
                    f"{describe(unwanted)}",
                    shown,
                )
            )
    for event_type, count in expect.counts.items():
        actual = sum(1 for e in trace if e["type"] == event_type)
        if actual != count:
            out.append(Failure(f"{event_type} occurred {actual} time(s), expected {count}"))


def check_outcome(outcome: RunOutcome) -> Verdict:
    """Check ``outcome`` against its scenario's ``expect:``."""
    failures: list[Failure] = []
    for step in (_check_raises, _check_result, _check_calls, _check_requests, _check_events):
        try:
            step(outcome, failures)
        except MatchTimeoutError as exc:  # a pattern that backtracks: the check fails, named
            failures.append(Failure("a $regex expectation could not be checked", str(exc)))
    return Verdict(outcome, failures)
