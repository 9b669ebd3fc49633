"""Behaviour coverage of one run, and of a suite: the table, the JSON and the floor."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openprogram_sim.coverage._asserted import (
    EXPECTATION_KEYS,
    asserted_ids,
    checked_by,
    expectation_keys,
)
from openprogram_sim.coverage._catalogue import CATALOGUE, behaviour, parse_ids
from openprogram_sim.coverage._classify import Evidence, classify

if TYPE_CHECKING:
    from openprogram_sim.play import RunOutcome

__all__ = ["BehaviourCoverage", "RunBehaviours", "behaviours_of"]

_ORDER = {b.id: i for i, b in enumerate(CATALOGUE)}


def _ordered(ids: Iterable[str]) -> list[str]:
    return sorted(set(ids), key=lambda i: _ORDER.get(i, len(_ORDER)))


@dataclass(frozen=True, slots=True)
class RunBehaviours:
    """What one scenario run did: the behaviours it exercised, those of them its
    expectations assert, and the evidence (trace events, requests, ``expect:`` keys); and
    the trajectory modes and property rules it asserts with (``trajectory.in_order``,
    ``property.at_most``: see :func:`~openprogram_sim.coverage._asserted.expectation_keys`)."""

    exercised: tuple[str, ...]
    asserted: tuple[str, ...]
    evidence: Evidence
    expectations: tuple[str, ...] = ()

    @property
    def unasserted(self) -> tuple[str, ...]:
        return tuple(b for b in self.exercised if b not in self.asserted)

    def to_json(self) -> dict[str, list[str]]:
        """``{"exercised": [...], "asserted": [...], "expectations": [...]}``, in catalogue
        order (what a report record carries)."""
        return {
            "exercised": list(self.exercised),
            "asserted": list(self.asserted),
            "expectations": list(self.expectations),
        }


def behaviours_of(outcome: RunOutcome) -> RunBehaviours:
    """Classify one scenario run: what it exercised, and what its ``expect:`` asserts.

    >>> from openprogram_sim.scenario import load_scenario, run_scenario
    >>> run = behaviours_of(run_scenario(load_scenario("scenarios/basics/text_finish.yaml")))
    >>> "text_finish" in run.asserted
    True
    """
    requests = _requests(outcome)
    evidence = classify(outcome.trace, requests, outcome.scenario, raised=outcome.error is not None)
    checked = checked_by(outcome.scenario.expect, outcome.trace, requests)
    asserted = asserted_ids(evidence, checked)
    return RunBehaviours(
        exercised=tuple(_ordered(evidence)),
        asserted=tuple(_ordered(asserted)),
        evidence=evidence,
        expectations=tuple(expectation_keys(outcome.scenario)),
    )


def _requests(outcome: RunOutcome) -> Sequence[Mapping[str, Any]]:
    """The fields of each request the classification reads, from the requests as recorded
    (converting every request's history, as ``outcome.requests`` does, would cost more than
    the whole classification)."""
    recorded = getattr(outcome, "recorded", None)
    if recorded is None:
        return outcome.requests
    return [
        {
            "depth": r.depth,
            "round": r.round,
            "tools": r.tools,
            "tool_choice": r.tool_choice,
            "parallel_tool_calls": r.parallel_tool_calls,
        }
        for r in recorded
    ]


class BehaviourCoverage:
    """A suite's behaviour coverage: per behaviour of the catalogue, the scenarios (paths)
    that exercise it and those that also assert it; per trajectory mode and property rule
    (:data:`~openprogram_sim.coverage._asserted.EXPECTATION_KEYS`), the scenarios that
    assert with it.

    Build it with :meth:`add` per scenario, or :meth:`from_records` from report records
    (what pytest-xdist workers send), and merge two with :meth:`update`."""

    def __init__(self) -> None:
        self.exercised: dict[str, list[str]] = {b.id: [] for b in CATALOGUE}
        self.asserted: dict[str, list[str]] = {b.id: [] for b in CATALOGUE}
        self.expectations: dict[str, list[str]] = {k: [] for k in EXPECTATION_KEYS}
        self.scenarios: list[str] = []

    def add(self, path: str, run: RunBehaviours | Mapping[str, Sequence[str]]) -> None:
        """Count one scenario (``run`` as :func:`behaviours_of` gives it, or its JSON)."""
        data = run.to_json() if isinstance(run, RunBehaviours) else run
        if path not in self.scenarios:
            self.scenarios.append(path)
        for key, table in self._tables():
            for id in data.get(key, ()):
                paths = table.setdefault(id, [])
                if path not in paths:
                    paths.append(path)

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> BehaviourCoverage:
        """From report records: each scenario record's ``behaviours`` under its ``path``."""
        coverage = cls()
        for record in records:
            found = record.get("behaviours")
            if record.get("kind") == "scenario" and found is not None:
                coverage.add(str(record.get("path") or record.get("id")), found)
        return coverage

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BehaviourCoverage:
        """The inverse of :meth:`to_json`."""
        coverage = cls()
        for id, entry in (data.get("behaviours") or {}).items():
            for path in entry.get("exercised", ()):
                coverage.add(path, {"exercised": [id]})
            for path in entry.get("asserted", ()):
                coverage.add(path, {"asserted": [id]})
        for key, paths in (data.get("expectations") or {}).items():
            for path in paths:
                coverage.add(path, {"expectations": [key]})
        return coverage

    def _tables(self) -> tuple[tuple[str, dict[str, list[str]]], ...]:
        return (
            ("exercised", self.exercised),
            ("asserted", self.asserted),
            ("expectations", self.expectations),
        )

    def update(self, other: BehaviourCoverage) -> None:
        for path in other.scenarios:
            if path not in self.scenarios:
                self.scenarios.append(path)
        for (_, mine), (_, theirs) in zip(self._tables(), other._tables(), strict=True):
            for id, paths in theirs.items():
                known = mine.setdefault(id, [])
                known.extend(p for p in paths if p not in known)

    # ------------------------------------------------------------------ reading it

    def status(self, id: str) -> str:
        """``asserted``, ``exercised`` (exercised, unasserted) or ``missing``."""
        if self.asserted.get(id):
            return "asserted"
        return "exercised" if self.exercised.get(id) else "missing"

    @property
    def missing(self) -> list[str]:
        """Behaviours no scenario exercises, in catalogue order."""
        return [b.id for b in CATALOGUE if not self.exercised.get(b.id)]

    @property
    def unasserted(self) -> list[str]:
        """Behaviours exercised but asserted by no scenario."""
        return [b.id for b in CATALOGUE if self.status(b.id) == "exercised"]

    @property
    def percent(self) -> float:
        """Behaviours of the catalogue exercised, in per cent."""
        done = sum(1 for b in CATALOGUE if self.exercised.get(b.id))
        return 100.0 * done / len(CATALOGUE)

    @property
    def asserted_percent(self) -> float:
        done = sum(1 for b in CATALOGUE if self.asserted.get(b.id))
        return 100.0 * done / len(CATALOGUE)

    def to_json(self) -> dict[str, Any]:
        """``{"behaviours": {id: {"exercised": [paths], "asserted": [paths]}}}`` (every id
        of the catalogue, in its order; paths sorted), with ``exercised_percent`` and
        ``asserted_percent``; and ``{"expectations": {key: [paths]}}``, each trajectory
        mode and property rule (``trajectory.exact``, ..., ``property.ends_with``) with the
        scenarios that assert with it."""
        return {
            "behaviours": {
                b.id: {
                    "exercised": sorted(self.exercised.get(b.id, ())),
                    "asserted": sorted(self.asserted.get(b.id, ())),
                }
                for b in CATALOGUE
            },
            "exercised_percent": round(self.percent, 2),
            "asserted_percent": round(self.asserted_percent, 2),
            "expectations": {k: sorted(self.expectations.get(k, ())) for k in EXPECTATION_KEYS},
        }

    def failures(
        self, *, fail_under: float | None = None, require: Sequence[str] = ()
    ) -> list[str]:
        """Why the suite falls short of a floor: behaviours exercised below ``fail_under``
        per cent, or ``require``d ids no scenario exercises (empty: it holds). Unknown ids in
        ``require`` raise :class:`~openprogram_sim.coverage.UnknownBehaviourError`."""
        problems = []
        if fail_under is not None and self.percent < fail_under:
            problems.append(
                f"behaviour coverage {self.percent:.1f}% is below the floor of "
                f"{fail_under:g}%; not exercised: {', '.join(self.missing)}"
            )
        required = parse_ids(require)
        lost = [id for id in required if not self.exercised.get(id)]
        if lost:
            lines = [f"{len(lost)} required behaviour(s) not exercised by any scenario:"]
            for id in lost:
                b = behaviour(id)
                lines.append(f'  {id}: {b.title} ({b.source}: "{b.quote}")')
            problems.append("\n".join(lines))
        return problems

    def table(self) -> str:
        """The table ``--coverage`` prints: one line per behaviour, then the gaps."""
        width = max(len(b.id) for b in CATALOGUE)
        head = (
            f"behaviour coverage: {len(CATALOGUE)} behaviours, "
            f"{sum(1 for b in CATALOGUE if self.exercised.get(b.id))} exercised "
            f"({self.percent:.1f}%), "
            f"{sum(1 for b in CATALOGUE if self.asserted.get(b.id))} asserted "
            f"({self.asserted_percent:.1f}%), by {len(self.scenarios)} scenarios"
        )
        lines = [head, f"  {'group':<12} {'behaviour':<{width}}  exercised  asserted  status"]
        marks = {"asserted": "asserted", "exercised": "UNASSERTED", "missing": "NOT EXERCISED"}
        for b in CATALOGUE:
            lines.append(
                f"  {b.group:<12} {b.id:<{width}}  {len(self.exercised.get(b.id, ())):>9}  "
                f"{len(self.asserted.get(b.id, ())):>8}  {marks[self.status(b.id)]}"
            )
        for id in self.unasserted:
            shown = ", ".join(sorted(self.exercised[id])[:3])
            more = len(self.exercised[id]) - 3
            shown += f" (+{more} more)" if more > 0 else ""
            lines.append(f"exercised, unasserted: {id} (by {shown})")
        for id in self.missing:
            lines.append(f"not exercised: {id}: {behaviour(id).title}")
        lines.extend(self.expectation_lines())
        return "\n".join(lines)

    def expectation_lines(self) -> list[str]:
        """How many scenarios assert with each trajectory mode and each property rule::

        trajectory modes asserted (scenarios): exact 1, in_order 2, any_order 0, ...
        property rules asserted (scenarios): never 0, before 1, at_most 2, ...
        """
        out = []
        for kind, title in (("trajectory", "trajectory modes"), ("property", "property rules")):
            counts = [
                f"{k.partition('.')[2]} {len(self.expectations.get(k, ()))}"
                for k in EXPECTATION_KEYS
                if k.startswith(kind + ".")
            ]
            out.append(f"{title} asserted (scenarios): {', '.join(counts)}")
        return out
