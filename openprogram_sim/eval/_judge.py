"""One sample judged: the scenario's expectations that apply to a real model, each on its
own, and the keys that only make sense for a script named as not applicable."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from openprogram_sim.play import RunOutcome, check_outcome
from openprogram_sim.scenario import Expect, Scenario

__all__ = ["APPLICABLE", "NOT_APPLICABLE", "Judgement", "judge", "not_applicable"]

APPLICABLE = ("result", "raises", "trajectory", "properties")
"""The ``expect:`` keys a real model's run is judged by."""

NOT_APPLICABLE = ("events", "not_events", "counts", "requests", "history", "model_calls")
"""Keys that pin what a script does (its exact events, counts, requests, history and number
of model calls): reported, never counted as failures."""


@dataclass(slots=True, kw_only=True)
class Judgement:
    """What one sample's run did against the applicable expectations."""

    checks: dict[str, bool] = field(default_factory=dict)
    """Each applicable key given (``exec`` when none is: the run must not raise), held or
    not."""
    failures: list[str] = field(default_factory=list)
    """Every failure, as ``run`` prints it."""

    @property
    def passed(self) -> bool:
        return all(self.checks.values())


def not_applicable(scenario: Scenario) -> list[str]:
    """The keys the scenario's ``expect:`` (and its conversation steps') give that a real
    model's run is not judged by."""
    expects = [scenario.expect, *(s.expect for s in scenario.conversation or ())]
    return [
        key
        for key in NOT_APPLICABLE
        if any(key in e.model_fields_set and getattr(e, key) for e in expects)
    ]


def _given(expect: Expect) -> list[str]:
    return [key for key in APPLICABLE if key in expect.model_fields_set]


def _narrowed(expect: Expect) -> Expect:
    """``expect`` with only its applicable keys."""
    return Expect(**{key: getattr(expect, key) for key in _given(expect)})


def _checked(outcome: RunOutcome, expect: Expect) -> list[str]:
    update: dict[str, Any] = {"expect": expect}
    steps = outcome.scenario.conversation
    if steps is not None:  # each exec's own expect:, narrowed too, is checked with every key
        update["conversation"] = [
            s.model_copy(update={"expect": _narrowed(s.expect)}) for s in steps
        ]
    scenario = outcome.scenario.model_copy(update=update)
    verdict = check_outcome(dataclasses.replace(outcome, scenario=scenario))
    return [str(f) for f in verdict.failures]


def judge(outcome: RunOutcome) -> Judgement:
    """``outcome`` against its scenario's applicable expectations, each key checked on its
    own (with ``raises:`` beside it, so an exec that raised unexpectedly fails each); with
    none given, the run must end without raising."""
    expect = outcome.scenario.expect
    keys = _given(expect)
    out = Judgement()
    if not keys:
        failures = _checked(outcome, Expect())
        out.checks["exec"] = not failures
        out.failures += failures
        return out
    for key in keys:
        values: dict[str, Any] = {key: getattr(expect, key)}
        if key != "raises" and "raises" in keys:
            values["raises"] = expect.raises
        failures = _checked(outcome, Expect(**values))
        out.checks[key] = not failures
        out.failures += [f for f in failures if f not in out.failures]
    return out
