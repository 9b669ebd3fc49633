"""One sample judged: the scenario's expectations that apply to a real model, each on its
own (``expect.judge``: each criterion on its own, from the judge's verdicts), and the keys
that only make sense for a script named as not applicable."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from openprogram_sim.play import RunOutcome, check_outcome
from openprogram_sim.scenario import CriterionVerdict, Expect, Scenario, criterion_failures

__all__ = ["APPLICABLE", "NOT_APPLICABLE", "Judgement", "judge", "not_applicable"]

APPLICABLE = ("result", "raises", "trajectory", "properties", "model_calls", "judge")
"""The ``expect:`` keys a real model's run is judged by (``model_calls`` as a range
``{min, max}``; ``judge`` as one check per criterion, ``judge.NAME``)."""

NOT_APPLICABLE = ("events", "not_events", "counts", "requests", "history", "model_calls")
"""Keys that pin what a script does (its exact events, counts, requests, history and number
of model calls, ``model_calls`` as a number): reported, never counted as failures."""


def _applies(expect: Expect, key: str) -> bool:
    """Whether ``expect`` gives ``key`` in a form a real model's run is judged by."""
    if key not in expect.model_fields_set:
        return False
    if key == "model_calls":  # a range, not the number a script makes
        return expect.model_calls is not None and not isinstance(expect.model_calls, int)
    return key != "judge" or expect.judge is not None


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
    return [key for key in NOT_APPLICABLE if any(_pins(e, key) for e in expects)]


def _pins(expect: Expect, key: str) -> bool:
    """Whether ``expect`` gives ``key`` in a form that pins what a script does."""
    if key not in expect.model_fields_set:
        return False
    if key == "model_calls":  # a number; a range is judged
        return isinstance(expect.model_calls, int)
    return bool(getattr(expect, key))


def _given(expect: Expect) -> list[str]:
    return [key for key in APPLICABLE if key != "judge" and _applies(expect, key)]


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


def judge(outcome: RunOutcome, verdicts: Mapping[str, CriterionVerdict] | None = None) -> Judgement:
    """``outcome`` against its scenario's applicable expectations, each key checked on its
    own (with ``raises:`` beside it, so an exec that raised unexpectedly fails each); with
    none given, the run must end without raising. ``verdicts`` are the judge's, one per
    criterion of ``expect.judge`` (:func:`~openprogram_sim.scenario.ask_judge`), each its own
    check ``judge.NAME``."""
    expect = outcome.scenario.expect
    spec = expect.judge
    if spec is not None and verdicts is None:
        raise ValueError(
            f"{outcome.scenario.path}: expect.judge needs the judge's verdicts (ask_judge)"
        )
    keys = _given(expect)
    out = Judgement()
    if not keys and spec is None:
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
    if spec is not None and verdicts is not None:
        for criterion in spec.criteria:
            out.checks[f"judge.{criterion.name}"] = verdicts[criterion.name].passed
        where = outcome.scenario.where
        failed = criterion_failures(
            spec, verdicts, lambda i: where("expect", "judge", "criteria", i)
        )
        out.failures += [str(f) for f in failed]
    return out
