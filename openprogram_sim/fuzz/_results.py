"""What a campaign reports, whichever campaign ran: its result, the failure it shrank, and
for a campaign over the user's tools, the clause of the tool contract a call broke.

Both campaigns (:mod:`.loop`, :mod:`.tools`) return a :class:`CampaignResult`, and a
:class:`FuzzFailure` may carry a :class:`Breach` naming the :class:`CallRecord` of the call
that broke the contract; so these live below both. The clauses are checked in
:mod:`.tools._contract`, the calls recorded by :mod:`.tools._probe`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from openprogram_sim.fuzz._stats import FuzzStats

__all__ = [
    "BREACH_KINDS",
    "Breach",
    "BreachKind",
    "CallRecord",
    "CampaignResult",
    "FuzzFailure",
]

BreachKind = Literal["escapes", "error_lost", "not_json", "hangs"]
BREACH_KINDS: tuple[BreachKind, ...] = ("escapes", "error_lost", "not_json", "hangs")


@dataclass(slots=True)
class CallRecord:
    """One call of a user tool."""

    tool: str
    call_id: str
    args: Any
    depth: int
    started: float
    seconds: float | None = None
    """How long the call took (None: it never returned)."""
    value_type: str | None = None
    not_json: str | None = None
    """Why JSON cannot encode the value the tool returned (None: it can)."""
    raised: str | None = None
    """``Type: message`` of what the tool raised."""
    escapes: bool = False
    """It raised a ``BaseException`` that is no ``Exception`` (``SystemExit``,
    ``KeyboardInterrupt``, ...): the loop does not turn those into error results. A
    cancellation (the run was aborted) is not one."""

    def describe(self) -> str:
        args = json.dumps(self.args, ensure_ascii=False, default=repr)
        if len(args) > 120:
            args = args[:117] + "..."
        return f"{self.tool}({args}) [{self.call_id}, depth {self.depth}]"


@dataclass(frozen=True, slots=True)
class Breach:
    """One clause of the tool contract broken, by one call."""

    kind: BreachKind
    message: str
    """One line: what broke, where (``#i`` is the trace index when there is a trace)."""
    call: CallRecord | None
    """The call that broke it (None when no single call can be named)."""
    blocked: bool = False
    """A hang that blocked the event loop: the run's own time limit could not stop it."""


@dataclass(slots=True)
class FuzzFailure:
    """A violation, shrunk."""

    scenario: dict[str, Any]
    violations: list[str]
    trace: list[dict[str, Any]]
    model_calls: int
    chunk: int
    seed: int
    path: Path | None = None
    """The regression file kept: written, and ``openprogram-sim run`` on it fails against
    the loop that produced it (None: none kept, see :attr:`unexpressed`)."""
    reproduced: bool | None = None
    """Whether the regression file fails when run, as ``openprogram-sim run`` runs it
    (None: no file was attempted, e.g. ``regressions=None``)."""
    unexpressed: str | None = None
    """Why no regression file was kept: the scenario is outside what the seed's rules
    decide, or the file the rules give passes against this loop (the violation is not one
    a scenario file can show, e.g. a replay that differs)."""
    breach: Breach | None = None
    """The tool-contract clause broken, with the call that broke it (campaigns over your
    own tools, :func:`~openprogram_sim.fuzz.run_tool_campaign`); None for a loop invariant."""
    broke_properties: dict[str, Any] | None = None
    """What the shrunk run broke of the user's own properties (``fuzz --properties``):
    ``{properties: [rules], trajectory: {...}}`` as its regression file expects them; None
    when it kept them all (or none were given)."""


@dataclass(slots=True)
class CampaignResult:
    examples: int
    seed: int
    workers: int
    stats: FuzzStats
    elapsed: float
    failure: FuzzFailure | None = None

    @property
    def runs_per_second(self) -> float:
        return self.stats.runs / self.elapsed if self.elapsed else 0.0
