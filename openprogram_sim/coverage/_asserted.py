"""Which behaviours a scenario's ``expect:`` asserts: the rule that turns "exercised" into
"asserted".

An expectation asserts a behaviour when it checks one of the behaviour's witnesses (see
:class:`~openprogram_sim.coverage._classify.Witness`):

- an entry of ``expect.events`` asserts a witness event when the check matched it to that
  very event (the check's own rule: ``ordered`` takes the first match after the previous
  one, ``exact`` the event at the same position, ``unordered`` the first unused match) and it
  names one of the witness's fields with a value other than ``{$any: true}``;
- an entry of ``expect.requests`` asserts a witness request when it selects that request
  (``call:``; else the n-th request with its ``depth``/``round``; else the request in its
  position) and names one of the witness's fields (``depth`` and ``round`` count when
  given), again not as ``{$any: true}``;
- ``expect.result``, ``expect.raises`` (not false), ``expect.model_calls`` and
  ``expect.counts.<event type>`` assert the witnesses that name them.

``not_events`` never asserts a behaviour: an absence says nothing about what happened.

Beside the behaviours, :func:`expectation_keys` names what a scenario asserts with the
expectations that hold for a real model: ``trajectory.<mode>`` for each
``expect.trajectory`` and ``property.<rule>`` for each rule of ``expect.properties`` (a
conversation's execs included), so a suite sees which modes and rules it uses at all.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from openprogram_sim.coverage._classify import Evidence, Witness
from openprogram_sim.scenario import Expect, Scenario
from openprogram_sim.trace import MODES, RULES, event_matches

__all__ = ["EXPECTATION_KEYS", "Checked", "asserted_ids", "checked_by", "expectation_keys"]

EXPECTATION_KEYS = (*(f"trajectory.{m}" for m in MODES), *(f"property.{r}" for r in RULES))
"""What :func:`expectation_keys` counts: each trajectory mode, then each property rule."""

_ANY = {"$any": True}


def _named(fields: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(k for k, v in fields.items() if v != _ANY)


@dataclass(slots=True)
class Checked:
    """What the expectations of one scenario check, located in its run."""

    events: dict[int, set[str]] = field(default_factory=dict)
    """Trace index -> fields named by the expected events matched to it."""
    requests: dict[int, set[str]] = field(default_factory=dict)
    """Request index -> fields named by the expected requests that select it."""
    keys: set[str] = field(default_factory=set)
    """``result``, ``raises``, ``model_calls``, ``counts.<type>``: those given."""

    def covers(self, witness: Witness) -> bool:
        if witness.kind == "expect":
            return witness.at in self.keys
        table = self.events if witness.kind == "event" else self.requests
        named = table.get(int(witness.at))
        return bool(named and named & witness.keys)


def _event_targets(
    expected: Sequence[Mapping[str, Any]], trace: Sequence[Mapping[str, Any]], mode: str
) -> Iterator[tuple[Mapping[str, Any], int]]:
    """``(expected entry, trace index)`` for each expected event the check matched (only
    entries of the expected type are tried: a trace is read once, by type)."""
    if mode == "exact":
        for i, want in enumerate(expected):
            if i < len(trace) and event_matches(want, trace[i]):
                yield want, i
        return
    by_type: dict[str, list[int]] = {}
    for i, e in enumerate(trace):
        by_type.setdefault(str(e.get("type")), []).append(i)
    used: set[int] = set()
    position = 0
    for want in expected:
        ((kind, _),) = want.items()
        start = 0 if mode == "unordered" else position
        candidates = by_type.get(kind, ())
        found = next(
            (
                j
                for j in candidates[bisect.bisect_left(candidates, start) :]
                if j not in used and event_matches(want, trace[j])
            ),
            None,
        )
        if found is None:
            continue
        if mode == "unordered":
            used.add(found)
        else:
            position = found + 1
        yield want, found


def _request_targets(
    expect: Expect, requests: Sequence[Mapping[str, Any]]
) -> Iterator[tuple[frozenset[str], int]]:
    """``(fields named, request index)`` for each expected request, selected as the check
    selects it."""
    seen: dict[tuple[Any, Any], int] = {}
    for i, want in enumerate(expect.requests):
        fields = {k: v for k, v in vars(want).items() if v is not None and k != "call"}
        if want.call is not None:
            index: int | None = want.call - 1
        elif want.depth is None and want.round is None:
            index = i
        else:
            key = (want.depth, want.round)
            nth = seen[key] = seen.get(key, -1) + 1
            hits = [
                k
                for k, r in enumerate(requests)
                if (want.depth is None or r.get("depth") == want.depth)
                and (want.round is None or r.get("round") == want.round)
            ]
            index = hits[nth] if nth < len(hits) else None
        if index is not None and index < len(requests):
            yield _named(fields), index


def checked_by(
    expect: Expect, trace: Sequence[Mapping[str, Any]], requests: Sequence[Mapping[str, Any]]
) -> Checked:
    """Where in this run each expectation of ``expect`` lands, and what it names."""
    checked = Checked()
    for want, at in _event_targets(expect.events, trace, expect.events_mode):
        ((_, fields),) = want.items()
        checked.events.setdefault(at, set()).update(_named(fields or {}))
    for named, at in _request_targets(expect, requests):
        checked.requests.setdefault(at, set()).update(named)
    if expect.result is not None:
        checked.keys.add("result")
    if expect.raises is not False:
        checked.keys.add("raises")
    if expect.model_calls is not None:
        checked.keys.add("model_calls")
    checked.keys.update(f"counts.{kind}" for kind in expect.counts)
    return checked


def asserted_ids(evidence: Evidence, checked: Checked) -> set[str]:
    """The exercised behaviours whose evidence the expectations check."""
    out = set()
    for name, witnesses in evidence.items():
        groups = set()
        for witness in witnesses:
            if not checked.covers(witness):
                continue
            if witness.group is None:
                out.add(name)
                break
            groups.add(witness.group)
        if len(groups) >= 2:
            out.add(name)
    return out


def expectation_keys(scenario: Scenario) -> list[str]:
    """``trajectory.<mode>`` and ``property.<rule>`` for each trajectory and rule that
    ``scenario`` (and each exec of its conversation) asserts, once each, in the order of
    :data:`EXPECTATION_KEYS`."""
    expects = [scenario.expect, *(step.expect for step in scenario.conversation or ())]
    found = set()
    for expect in expects:
        if expect.trajectory is not None:
            found.add(f"trajectory.{expect.trajectory.mode}")
        found.update(f"property.{name}" for rule in expect.properties for name in rule)
    return [key for key in EXPECTATION_KEYS if key in found]
