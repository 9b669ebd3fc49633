"""Served sessions in the report: a record per session of ``openprogram-sim serve`` (kind
``session``), built from its :class:`~openprogram_sim.wire.SessionReport`, and the writers
:meth:`WireServer.check(write=) <openprogram_sim.wire.WireServer.check>` takes::

    from openprogram_sim.play import serve_scenario
    from openprogram_sim.report import session_details, session_html, session_junit

    with serve_scenario(path, details=session_details(path)) as server:
        ...  # the clients, each under its own /s/NAME/
        server.check(write=[session_html("report.html"), session_junit("junit.xml")])

A session's record has the fields of every record (see :mod:`~openprogram_sim.report.
_records`) and: ``session`` (its name, state, turns, requests, what was not kept),
``client_checks`` (each invariant held, broken or off), ``wire_behaviours`` (the ids of
:data:`~openprogram_sim.coverage.WIRE_CATALOGUE` it showed), ``trajectory`` and
``properties`` (from :func:`session_details`, when the server was given it). Its one run is
the session's kept trace, with its timeline; each round carries a ``note`` with the request
it was (its number, API, a retry of which request, how long after the last answer, what
failed).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openprogram_sim.report._expectations import trace_checks
from openprogram_sim.report._records import plain, trace_properties
from openprogram_sim.report._render import write_report
from openprogram_sim.report._timeline import ExecNode, build_timeline

if TYPE_CHECKING:
    from openprogram_sim.scenario import Scenario
    from openprogram_sim.trace import Failure
    from openprogram_sim.wire import ServeReport, SessionReport

__all__ = [
    "scenario_names",
    "served_records",
    "server_failures",
    "session_details",
    "session_html",
    "session_record",
    "write_session_report",
]


def _scenario(scenario: Scenario | str | os.PathLike[str]) -> Scenario:
    from openprogram_sim.scenario import Scenario, load_scenario

    return scenario if isinstance(scenario, Scenario) else load_scenario(os.fspath(scenario))


def session_details(
    scenario: Scenario | str | os.PathLike[str],
) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    """What each session's report keeps of its whole trace for the HTML report and JUnit:
    ``scenario``'s ``expect.trajectory`` (its score and measures) and each rule of its
    ``expect.properties`` (held or broken, and the events), as :func:`trace_checks` gives
    them. Pass it as ``details=`` to :func:`~openprogram_sim.wire.serve`, ``WireServer``
    or :func:`~openprogram_sim.play.serve_scenario`."""
    loaded = _scenario(scenario)

    def details(trace: list[dict[str, Any]]) -> dict[str, Any]:
        checked: dict[str, Any] = plain(trace_checks(loaded, trace))
        for entry in [*checked["trajectory"], *checked["properties"]]:
            if "where" in entry:
                entry["where"] = _relative(entry["where"])
        return checked

    return details


def _relative(where: str) -> str:
    """``file:line`` with the file relative to the working directory when it is under it
    (as the session's failures give it)."""
    name, colon, line = where.rpartition(":")
    if not colon:
        return where
    try:
        return f"{Path(name).relative_to(Path.cwd())}:{line}"
    except ValueError:
        return where


def _round_note(facts: Mapping[str, Any]) -> str:
    """What a round's request was, beyond its events."""
    parts = [f"request #{facts['request']}"]
    if facts.get("api"):
        parts.append(str(facts["api"]) + (" (stream)" if facts.get("stream") else ""))
    if facts.get("retry_of") is not None:
        parts.append(f"retry of #{facts['retry_of']}")
    waited = facts.get("waited")
    if waited is not None and facts.get("retry_of") is not None:
        parts.append(f"{waited:.2f} s after the answer before")
    if facts.get("previous_response"):
        parts.append("sent previous_response_id")
    failure = facts.get("failure")
    if failure is not None:
        what = {"http": f"HTTP {facts.get('status')}", "cut": "a stream cut off"}.get(
            failure, "an error inside the stream"
        )
        wait = facts.get("retry_after")
        parts.append(f"served {what}" + (f" with retry-after {wait:g} s" if wait else ""))
    answered = facts.get("answered") or []
    if any(n != 1 for n in answered):
        parts.append(
            "results per call of the previous answer: " + ", ".join(str(n) for n in answered)
        )
    if facts.get("strays"):
        parts.append(f"{facts['strays']} result(s) answering no call")
    return " · ".join(parts)


def _note_rounds(timeline: ExecNode, trace: Sequence[Mapping[str, Any]],
                 numbers: Sequence[int], rounds: Sequence[Mapping[str, Any]]) -> None:  # fmt: skip
    """Give each round of ``timeline`` the note of the request it was (the k-th
    ``turn_start`` of the trace is the k-th request), and each call never answered the
    words for it."""
    starts = [n for n, e in zip(numbers, trace, strict=True) if e.get("type") == "turn_start"]
    notes = {n: _round_note(f) for n, f in zip(starts, rounds, strict=False)}
    last = len(timeline["rounds"]) - 1
    for k, node in enumerate(timeline["rounds"]):
        at = node["at"]
        if at and at[0] in notes:
            node["note"] = notes[at[0]]  # type: ignore[typeddict-unknown-key]
        why = "no further request came" if k == last else "none in the next request"
        for item in node["items"]:
            if item["kind"] == "tool" and not item["done"]:  # the client never answered it
                item["missing"] = f"no result: {why}"  # type: ignore[typeddict-unknown-key]


def _final_text(trace: Sequence[Mapping[str, Any]]) -> str | None:
    for e in reversed(trace):
        if e.get("type") == "message_end" and e.get("role") == "assistant":
            if e.get("stop_reason") == "error" or e.get("tool_calls"):
                return None
            return str(e.get("text") or "")
    return None


def _run(report: SessionReport) -> dict[str, Any]:
    run: dict[str, Any] = {
        "label": "",
        "trace": report.trace,
        "numbers": report.numbers,
        "usage": [],
        "steering": [],
        "follow_ups": [],
    }
    timeline = build_timeline(run)
    _note_rounds(timeline, report.trace, report.numbers, report.rounds)
    run["timeline"] = timeline
    return run


def _props(report: SessionReport) -> dict[str, Any]:
    props = trace_properties([report.trace])
    props.pop("max_depth", None)  # no nesting is visible on the wire
    props["model_calls"] = report.model_calls
    props["rounds"] = len(report.rounds) + report.rounds_dropped
    props["requests"] = report.requests
    props["retries"] = sum(1 for r in report.rounds if r.get("retry_of") is not None)
    if report.disconnects:
        props["disconnects"] = report.disconnects
    if report.requests_not_kept:
        props["requests_not_kept"] = report.requests_not_kept
    if report.timeline_dropped:
        props["timeline"] = "not kept: the server's budget for ended sessions' timelines was spent"
    elif report.trace_dropped:
        props["trace_entries_not_kept"] = report.trace_dropped
    return props


def session_record(report: SessionReport, *, scenario: str = "", path: str = "") -> dict[str, Any]:
    """The record of one served session (kind ``session``): ``scenario`` is the title of
    the scenario served, ``path`` its file."""
    from openprogram_sim.coverage import wire_behaviours

    name = report.name
    details = report.details or {}
    apis = sorted({str(r["api"]) for r in report.rounds if r.get("api")})
    return {
        "id": "(default session)" if name is None else f"/s/{name}",
        "kind": "session",
        "title": report.label,
        "path": path,
        "description": scenario,
        "tags": apis,
        "status": "passed" if report.passed else "failed",
        "duration": report.duration,
        "props": _props(report),
        "failure": report.render(),
        "issues": [],
        "result": _final_text(report.trace),
        "error": None,
        "runs": [_run(report)],
        "trajectory": list(details.get("trajectory") or ()),
        "properties": list(details.get("properties") or ()),
        "client_checks": dict(report.client),
        "wire_behaviours": wire_behaviours(report),
        "session": {
            "name": name,
            "state": report.state,
            "turns": report.turns,
            "served": report.served,
            "unconsumed": report.unconsumed,
            "requests": report.requests,
            "trace_dropped": report.trace_dropped,
            "rounds_dropped": report.rounds_dropped,
            "requests_not_kept": report.requests_not_kept,
        },
    }


def _shown(report: SessionReport, reports: Sequence[SessionReport]) -> bool:
    """A session gets a section when it is named, or (the default one) had requests or is
    all there is."""
    return report.name is not None or bool(report.requests) or len(reports) == 1


def served_records(
    served: ServeReport, *, scenario: str = "", path: str = ""
) -> list[dict[str, Any]]:
    """A record per session of ``served`` (the default session only when it had requests,
    or is the only one)."""
    reports = served.sessions
    return [session_record(r, scenario=scenario, path=path) for r in reports if _shown(r, reports)]


def _notes(served: ServeReport) -> list[str]:
    notes = []
    if served.sessions_dropped:
        notes.append(
            f"{served.sessions_dropped} more session(s) ended without a section of their own "
            "(the server keeps the reports of the first 1,000 sessions to end, and of the "
            "failing ones after them); they count in the verdict"
        )
    if served.timelines_dropped:
        notes.append(
            f"{served.timelines_dropped} ended session(s) kept their verdict but not their "
            "timeline (the server keeps about 32 MiB of ended sessions' traces)"
        )
    notes += [f"the server: {f.title}" for f in server_failures(served)]
    return notes


def server_failures(served: ServeReport) -> list[Failure]:
    """The failures of ``served`` that are no session's own (requests refused for the
    server's caps, sessions whose reports were not kept)."""
    own = {(f.title, f.where, f.detail) for r in served.sessions for f in r.labelled()}
    return [f for f in served.failures if (f.title, f.where, f.detail) not in own]


def write_session_report(
    path: str | os.PathLike[str],
    served: ServeReport,
    *,
    scenario: str = "",
    scenario_path: str = "",
    title: str | None = None,
    source: str = "openprogram-sim serve",
) -> Path:
    """Write the HTML report of ``served``: a section per session, with its verdict, its
    failures, its trajectory and property verdicts, its client checks and its timeline; the
    client behaviours the sessions showed. Atomically (see
    :func:`~openprogram_sim.report.write_report`)."""
    records = served_records(served, scenario=scenario, path=scenario_path)
    heading = title or ("served sessions" + (f": {scenario}" if scenario else ""))
    return write_report(
        path, records, title=heading, source=source, wall_time=None, notes=_notes(served)
    )


def session_html(
    path: str | os.PathLike[str],
    *,
    scenario: Scenario | str | os.PathLike[str] | None = None,
    title: str | None = None,
) -> Callable[[ServeReport], Path]:
    """A writer for :meth:`WireServer.check(write=) <openprogram_sim.wire.WireServer.check>`:
    the HTML report at ``path`` (``scenario``: the scenario served, loaded or its file, for
    the page's title and each section's path)."""
    name, file = scenario_names(scenario)

    def write(served: ServeReport) -> Path:
        return write_session_report(path, served, scenario=name, scenario_path=file, title=title)

    return write


def scenario_names(scenario: Scenario | str | os.PathLike[str] | None) -> tuple[str, str]:
    """The scenario's title and file ("" when not given)."""
    if scenario is None:
        return "", ""
    loaded = _scenario(scenario)
    return loaded.scenario, loaded.path
