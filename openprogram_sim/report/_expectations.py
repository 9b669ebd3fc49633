"""A scenario's trajectory and properties as the report, JUnit and ``run --json`` show
them: the trajectory's graded score and each rule's verdict, passed or not.

:func:`expectation_checks` gives plain, JSON-safe dicts (a record's ``trajectory`` and
``properties``); :func:`junit_properties` the same as JUnit ``<property>`` pairs. A
conversation's execs each add theirs, labelled ``exec N`` (their ``#N`` count in that
exec's trace, as its failures do).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openprogram_sim.errors import MatchTimeoutError
from openprogram_sim.trace import describe_rule

if TYPE_CHECKING:
    from openprogram_sim.play import RunOutcome, Verdict

__all__ = ["expectation_checks", "junit_properties", "trace_checks"]

_SCORED_BY = {
    "exact": "F1",
    "in_order": "recall",
    "any_order": "F1",
    "subset": "precision",
    "superset": "recall",
}
"""The measure each mode's score is (as :mod:`openprogram_sim.trace._trajectory` says)."""


def _parts(verdict: Verdict) -> list[tuple[str, int | None, RunOutcome]]:
    """``(label, run, outcome)``: the scenario's own expectations, then each exec's of a
    conversation; ``run`` is the report run whose numbers the ``#N`` use (None: the whole
    conversation's trace, which no one run shows)."""
    outcome = verdict.outcome
    if outcome.scenario.conversation is None:
        return [("", 0, outcome)]
    parts: list[tuple[str, int | None, RunOutcome]] = [("", None, outcome)]
    for i, step in enumerate(outcome.steps):
        parts.append((f"exec {i + 1}", i, step))
    return parts


def _trajectory(label: str, run: int | None, outcome: RunOutcome) -> dict[str, Any] | None:
    from openprogram_sim.play import Verdict

    scenario = outcome.scenario
    spec = scenario.expect.trajectory
    if spec is None:
        return None
    try:
        result = Verdict(outcome).trajectory
    except MatchTimeoutError as exc:  # a $regex that backtracks: shown, not scored
        return {"label": label, "run": run, "mode": spec.mode, "error": str(exc)}
    assert result is not None
    return {
        "label": label,
        "run": run,
        "mode": spec.mode,
        "args": spec.args,
        "depth": spec.depth,
        "score": round(result.score, 4),
        "scored_by": _SCORED_BY[spec.mode],
        "precision": round(result.precision, 4),
        "recall": round(result.recall, 4),
        "f1": round(result.f1, 4),
        "matched": len(result.matched),
        "expected": result.expected_count,
        "made": len(result.calls),
        "min_score": spec.min_score,
        "passed": result.passed,
        "measures": result.measures(),
        "where": scenario.where("expect", "trajectory"),
    }


def _properties(label: str, run: int | None, outcome: RunOutcome) -> list[dict[str, Any]]:
    from openprogram_sim.play import Verdict

    scenario = outcome.scenario
    rules = scenario.expect.properties
    if not rules:
        return []
    checked: list[tuple[dict[str, Any], list[Any] | None]]
    problem: str | None = None
    try:
        checked = list(Verdict(outcome).properties)
    except MatchTimeoutError as exc:  # a $regex that backtracks: each rule shown, unchecked
        checked, problem = [(rule, None) for rule in rules], str(exc)
    out = []
    for i, (rule, broken) in enumerate(checked):
        ((name, _),) = rule.items()
        entry: dict[str, Any] = {
            "label": label,
            "run": run,
            "number": i + 1,
            "rule": name,
            "text": describe_rule(rule),
            "where": scenario.where("expect", "properties", i),
            "held": broken == [] if broken is not None else None,
            "events": sorted({n for v in broken or () for n in v.events}),
            "why": [v.message for v in broken or ()],
        }
        if problem is not None:
            entry["error"] = problem
        out.append(entry)
    return out


def expectation_checks(verdict: Verdict) -> dict[str, Any]:
    """``{"trajectory": [...], "properties": [...]}``: each ``expect.trajectory`` with its
    mode, score (and the measure it is), precision, recall, F1, ``min_score``, ``passed``
    and ``where`` (``file:line``); each rule of ``expect.properties`` with its number,
    ``rule`` (its name), ``text``, ``where``, ``held``, the ``events`` (``#N``) that break
    it and ``why``. Each has its ``label`` (``""``, or ``exec N`` in a conversation) and
    ``run`` (the report run its numbers count in, or None)."""
    trajectories: list[dict[str, Any]] = []
    properties: list[dict[str, Any]] = []
    for label, run, outcome in _parts(verdict):
        found = _trajectory(label, run, outcome)
        if found is not None:
            trajectories.append(found)
        properties.extend(_properties(label, run, outcome))
    return {"trajectory": trajectories, "properties": properties}


class _Traced:
    """What the checks read of a run: the scenario and a trace (a served session's)."""

    def __init__(self, scenario: Any, trace: list[dict[str, Any]]) -> None:
        self.scenario = scenario
        self.trace = trace


def trace_checks(scenario: Any, trace: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`expectation_checks` of ``scenario``'s top-level ``expect.trajectory`` and
    ``expect.properties`` on ``trace`` (a served session's), the same dicts."""
    traced: Any = _Traced(scenario, trace)
    found = _trajectory("", 0, traced)
    return {
        "trajectory": [found] if found is not None else [],
        "properties": _properties("", 0, traced),
    }


def _prefix(label: str) -> str:
    return "openprogram." + (label.replace(" ", ".") + "." if label else "")


def junit_properties(checks: dict[str, Any]) -> list[tuple[str, str]]:
    """:func:`expectation_checks` as JUnit ``<property>`` pairs::

        openprogram.trajectory.mode       in_order
        openprogram.trajectory.score      0.5
        openprogram.trajectory.verdict    passed | failed
        openprogram.property.2.rule       at_most: {"tool": "search", "times": 1}
        openprogram.property.2.verdict    held | broken
        openprogram.property.2.events     #6 #18

    (also ``.precision``, ``.recall``, ``.f1``, ``.min_score`` and ``.where``; a
    conversation's execs under ``openprogram.exec.N.``)."""
    out: list[tuple[str, str]] = []
    for t in checks["trajectory"]:
        head = _prefix(t["label"]) + "trajectory."
        out.append((head + "mode", t["mode"]))
        if "error" in t:
            out.append((head + "verdict", "error"))
            continue
        for key in ("score", "precision", "recall", "f1", "min_score"):
            out.append((head + key, repr(float(t[key]))))
        out.append((head + "verdict", "passed" if t["passed"] else "failed"))
        out.append((head + "where", t["where"]))
    for p in checks["properties"]:
        head = f"{_prefix(p['label'])}property.{p['number']}."
        out.append((head + "rule", p["text"]))
        verdict = {True: "held", False: "broken", None: "error"}[p["held"]]
        out.append((head + "verdict", verdict))
        out.append((head + "where", p["where"]))
        if p["events"]:
            out.append((head + "events", " ".join(f"#{n}" for n in p["events"])))
    return out
