"""Report records: one plain, JSON-safe dict per test (a scenario file or a Python test).

Records are what the report renders and what pytest-xdist workers ship to the controller
(attached to their test reports), so they hold only JSON types. Fields::

    id, kind ("scenario" | "invalid" | "python"), title, path, description, tags,
    status ("passed" | "failed" | "error" | "skipped"), duration (seconds),
    props (see :func:`trace_properties`), failure (the diff text), issues (load errors),
    result, error, runs: [{label, trace, numbers, usage, steering, follow_ups, timeline}],
    for a scenario run trajectory and properties (its graded trajectories and each rule's
    verdict: see :func:`~openprogram_sim.report.expectation_checks`), and behaviours:
    {exercised: [ids], asserted: [ids], expectations: [keys]} (the loop behaviours of
    :mod:`openprogram_sim.coverage` it exercised, those its expect: asserts, and the
    trajectory modes and property rules it asserts with)

A run's ``trace`` is the trace without ``message_start``/``message_update`` entries (the
``message_end`` carries the same fields), which keeps large suites small; ``numbers`` gives
each kept entry its position in the trace as recorded, the ``#N`` a failure's diff names;
its ``timeline`` is the tree the report draws (see
:func:`~openprogram_sim.report.build_timeline`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from openprogram_sim.report._expectations import expectation_checks
from openprogram_sim.report._timeline import build_timeline

if TYPE_CHECKING:
    from openprogram.types import Usage
    from openprogram_sim.errors import ScenarioError
    from openprogram_sim.play import RunOutcome, Verdict

__all__ = [
    "format_verdict",
    "invalid_record",
    "outcome_runs",
    "plain",
    "python_record",
    "run_entry",
    "scenario_props",
    "scenario_record",
    "trace_properties",
]

_DROPPED = frozenset({"message_start", "message_update"})


def plain(value: Any) -> Any:
    """``value`` with anything JSON cannot hold turned into text (dates, objects)."""
    return json.loads(json.dumps(value, default=str))


def trace_properties(traces: Iterable[Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """What CI dashboards show for a test, from its traces.

    ``model_calls``: assistant messages; ``tool_calls``: calls the model made;
    ``errors``: tool results with ``is_error`` plus runs that ended in error or aborted;
    ``end_reason``: the outer exec's ``agent_end`` reason (of the last run);
    ``max_depth``: the deepest nested exec reached (0: none).
    """
    model_calls = tool_calls = errors = max_depth = 0
    end_reason = ""
    for trace in traces:
        for e in trace:
            kind = e.get("type")
            depth = e.get("depth")
            if depth and int(depth) > max_depth:
                max_depth = int(depth)
            if kind == "message_end" and e.get("role") == "assistant":
                model_calls += 1
                tool_calls += len(e.get("tool_calls") or ())
            elif kind == "tool_execution_end" and e.get("is_error"):
                errors += 1
            elif kind == "agent_end" and not e.get("depth"):
                end_reason = str(e.get("reason") or "")
                errors += end_reason in ("error", "aborted")
    return {
        "model_calls": model_calls,
        "tool_calls": tool_calls,
        "errors": errors,
        "end_reason": end_reason,
        "max_depth": max_depth,
    }


def _usage(usage: Usage | None) -> dict[str, int] | None:
    if usage is None:
        return None
    fields = ("input", "output", "cache_read", "cache_write", "reasoning")
    out = {f: int(getattr(usage, f, 0) or 0) for f in fields}
    return {k: v for k, v in out.items() if v} or None


def run_entry(
    trace: Sequence[Mapping[str, Any]],
    *,
    label: str = "",
    usage: Sequence[Usage | None] = (),
    steering: Sequence[str] = (),
    follow_ups: Sequence[str] = (),
) -> dict[str, Any]:
    """One run of a record: its (compacted) trace and each kept entry's number in ``trace``,
    per model call its usage, the steering and follow-up texts it was given, and the timeline
    built from them."""
    kept = [(i, e) for i, e in enumerate(trace) if e.get("type") not in _DROPPED]
    run: dict[str, Any] = {
        "label": label,
        "trace": plain([e for _, e in kept]),
        "numbers": [i for i, _ in kept],
        "usage": [_usage(u) for u in usage],
        "steering": list(steering),
        "follow_ups": list(follow_ups),
    }
    run["timeline"] = build_timeline(run)
    return run


def format_verdict(verdict: Verdict) -> str:
    """The failures of a verdict as the CLI prints them: ``- title`` then the indented diff."""
    parts = []
    for failure in verdict.failures:
        lines = [f"- {failure.title}"]
        lines += [f"  {line}" for line in failure.explained.splitlines()]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def outcome_runs(outcome: RunOutcome) -> list[dict[str, Any]]:
    """A run's entries for the report; a conversation's execs each as a run of its own,
    labelled by its place and prompt (each exec a section of the report, its entries
    numbered from its start, as its failures number them)."""
    steps = outcome.steps if outcome.scenario.conversation is not None else [outcome]
    runs = []
    for i, step in enumerate(steps):
        scenario = step.scenario
        content = scenario.exec.content
        label = content if content is not None else "(continue, no new prompt)"
        if len(steps) > 1:
            label = f"exec {i + 1}/{len(steps)}: {label}"
        runs.append(
            run_entry(
                step.trace,
                label=label,
                usage=list(step.usage),
                steering=[s.text for s in scenario.steering],
                follow_ups=[f.text for f in scenario.follow_ups],
            )
        )
    return runs


def scenario_props(verdict: Verdict) -> dict[str, Any]:
    """The properties CI dashboards show for a scenario run (JUnit XML, the report)."""
    outcome = verdict.outcome
    props = trace_properties([outcome.trace])
    props["model_calls"] = outcome.model_calls
    props["rounds"] = outcome.rounds
    if outcome.error is not None and props["errors"] == 0:
        props["errors"] = 1
    return props


def scenario_record(verdict: Verdict, *, id: str, path: str) -> dict[str, Any]:
    """The record of a scenario run and its verdict."""
    outcome = verdict.outcome
    scenario = outcome.scenario
    props = scenario_props(verdict)
    result = outcome.result
    return {
        "id": id,
        "kind": "scenario",
        "title": scenario.scenario,
        "path": path,
        "description": scenario.description,
        "tags": list(scenario.tags),
        "status": "passed" if verdict.passed else "failed",
        "duration": outcome.duration,
        "props": props,
        "failure": format_verdict(verdict),
        "issues": [],
        "result": plain(result) if result is not None else None,
        "error": outcome.error_text,
        "runs": outcome_runs(verdict.outcome),
        **expectation_checks(verdict),
        "behaviours": _behaviours(verdict),
    }


def _behaviours(verdict: Verdict) -> dict[str, list[str]]:
    """The behaviours of the catalogue a scenario run exercised and asserted (JSON-safe)."""
    from openprogram_sim.coverage import behaviours_of

    return behaviours_of(verdict.outcome).to_json()


def invalid_record(error: ScenarioError, *, id: str, path: str) -> dict[str, Any]:
    """The record of a scenario file that could not be loaded."""
    return {
        "id": id,
        "kind": "invalid",
        "title": f"invalid scenario file {path}",
        "path": path,
        "description": "",
        "tags": [],
        "status": "error",
        "duration": 0.0,
        "props": {},
        "failure": "\n".join(str(i) for i in error.issues),
        "issues": [str(i) for i in error.issues],
        "result": None,
        "error": None,
        "runs": [],
    }


def python_record(
    *,
    id: str,
    title: str,
    path: str,
    tags: Sequence[str],
    status: str,
    duration: float,
    runs: list[dict[str, Any]],
    failure: str = "",
) -> dict[str, Any]:
    """The record of a Python test that ran the loop through the plugin's fixtures."""
    props = trace_properties(r["trace"] for r in runs)
    return {
        "id": id,
        "kind": "python",
        "title": title,
        "path": path,
        "description": "",
        "tags": list(tags),
        "status": status,
        "duration": duration,
        "props": props,
        "failure": failure,
        "issues": [],
        "result": None,
        "error": None,
        "runs": runs,
    }
