"""The contract every tool run by the loop keeps, whatever the tool does.

A fuzzer knows nothing of what a user's tool should compute, so it checks only what holds
for any tool (``tool-call-loop.md``: tool errors are data the model sees; a run ends):

- ``escapes``: what a tool raises becomes an error result; nothing leaves ``exec`` but the
  documented errors (``ModelError``, ``RunAbortedError``), so a ``SystemExit`` or
  ``KeyboardInterrupt`` raised in a tool breaks it;
- ``error_lost``: a call whose tool raised has an error result (``is_error: true``);
- ``not_json``: a result is JSON-serializable (text, numbers, the tool layer's own result
  types, or a value JSON encodes); anything else reaches the model as its ``str()``;
- ``hangs``: a run ends within its time limit (real time), a tool that never returns
  included;
- and the loop's invariants (:mod:`openprogram_sim.fuzz._invariants`), among them: no tool
  runs after an ``error``/``aborted`` stop.

Each broken clause is a :class:`~openprogram_sim.fuzz.Breach` naming the call that broke it
(from the probe's records, :mod:`openprogram_sim.fuzz.tools._probe`), which is what a
regression file replays (the breach is part of the campaign's report, so it is defined below
both campaigns, in :mod:`openprogram_sim.fuzz._results`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openprogram_sim.fuzz._results import Breach, CallRecord

__all__ = ["check_contract", "escape_breach", "open_call"]


def _short(text: Any, limit: int = 100) -> str:
    shown = repr(text)
    return shown if len(shown) <= limit else shown[: limit - 4] + "...'"


def open_call(trace: list[dict[str, Any]], cut: int) -> str | None:
    """The id of the innermost tool call started and not ended in ``trace[:cut]``."""
    open_ids: list[str] = []
    for e in trace[:cut]:
        if e["type"] == "tool_execution_start":
            open_ids.append(e["tool_call_id"])
        elif e["type"] == "tool_execution_end" and e["tool_call_id"] in open_ids:
            open_ids.remove(e["tool_call_id"])
    return open_ids[-1] if open_ids else None


def _hang(outcome: Any, records: Sequence[CallRecord], limit: float) -> Breach | None:
    by_id = {r.call_id: r for r in records}
    if outcome.timed_out is not None:
        call_id = open_call(outcome.trace, outcome.timed_out)
        record = by_id.get(call_id) if call_id else None
        what = f"{record.describe()} was still running" if record else "no tool was running"
        return Breach(
            "hangs",
            f"the run did not end within its time limit of {limit:g} s (real time): {what}; "
            "the run was aborted",
            record,
        )
    if outcome.duration <= limit:
        return None
    timed = [r for r in records if r.seconds is not None]
    slowest = max(timed, key=lambda r: r.seconds or 0.0, default=None)
    if slowest is None:
        return Breach("hangs", f"the run took {outcome.duration:.1f} s, over {limit:g} s", None)
    return Breach(
        "hangs",
        f"the run took {outcome.duration:.1f} s, over its time limit of {limit:g} s: "
        f"{slowest.describe()} took {slowest.seconds:.1f} s and blocked the event loop "
        "(the event loop's time limit cannot stop a tool that does)",
        slowest,
        blocked=True,
    )


def check_contract(
    outcome: Any, records: Sequence[CallRecord], *, limit: float | None = None
) -> list[Breach]:
    """The contract clauses ``outcome`` (a :class:`~openprogram_sim.scenario.RunOutcome`)
    broke, given the probe's ``records`` of its calls; ``limit``: the run's time limit in
    seconds (default: the scenario's ``timeout``). An exception that left exec (the
    outcome's, or one that escaped the run altogether) is :func:`escape_breach`'s."""
    out: list[Breach] = []
    ends = {
        e["tool_call_id"]: (i, e)
        for i, e in enumerate(outcome.trace)
        if e["type"] == "tool_execution_end"
    }
    for record in records:
        i, end = ends.get(record.call_id, (None, None))
        where = f"#{i} " if i is not None else ""
        if record.not_json is not None:
            sent = _short(end["result"]) if end is not None else "nothing (no result event)"
            out.append(Breach(
                "not_json",
                f"{where}{record.describe()} returned a {record.value_type} that JSON cannot "
                f"encode ({record.not_json}); the model was sent its str(): {sent}",
                record,
            ))  # fmt: skip
        if record.raised and not record.escapes and end is not None and not end["is_error"]:
            out.append(Breach(
                "error_lost",
                f"{where}{record.describe()} raised {record.raised}, yet its result is not an "
                "error result",
                record,
            ))  # fmt: skip
    hang = _hang(outcome, records, outcome.scenario.timeout if limit is None else limit)
    if hang is not None:
        out.append(hang)
    if outcome.crashed:  # a SystemExit (or the like) left exec: the runner kept the outcome
        out.append(escape_breach(outcome.error, records))
    return out


def escape_breach(exc: BaseException, records: Sequence[CallRecord]) -> Breach:
    """``exc`` left the run (past the runner, which catches ``Exception``): the tool that
    raised it, when the probe saw one."""
    record = next((r for r in reversed(records) if r.escapes), None)
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if record is None:
        return Breach("escapes", f"{what} left exec; only ModelError/RunAbortedError may", None)
    return Breach(
        "escapes",
        f"{record.describe()} raised {what}, which left exec instead of becoming an error "
        "result (only ModelError/RunAbortedError may leave exec)",
        record,
    )
