"""The report's records, and how they reach it under pytest-xdist.

Each test's record (a scenario item's verdict, or the traces a Python test ran through the
fixtures) is built where the test ran and carried on its ``TestReport`` (attribute
:data:`REPORT_ATTR`), which xdist sends to the controller; the controller's
:class:`Collector` gathers them and writes one HTML report when the session ends.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from openprogram_sim.plugin._eval import EVAL_ATTR, EVAL_OPTIONS, EvalItem, eval_record
from openprogram_sim.plugin._fixtures import RECORD
from openprogram_sim.plugin._items import (
    InvalidScenarioItem,
    ScenarioItem,
    State,
    relpath,
    status_of,
)

__all__ = ["COVERAGE", "REPORT_ATTR", "Collector", "is_worker", "record_for"]

REPORT_ATTR = "openprogram"
"""The attribute of a pytest ``TestReport`` that carries the test's report record."""

COVERAGE = pytest.StashKey[Any]()
"""Where the config keeps the behaviour-coverage hooks, when coverage was asked for."""


def is_worker(config: pytest.Config) -> bool:
    """True in an xdist worker (the controller writes the report)."""
    return hasattr(config, "workerinput")


def record_for(item: pytest.Item, report: pytest.TestReport) -> dict[str, Any] | None:
    if isinstance(item, InvalidScenarioItem):
        if report.when != "call":
            return None
        from openprogram_sim.report import invalid_record

        return invalid_record(item.error, id=item.nodeid, path=relpath(item.config, item.path))
    if isinstance(item, EvalItem):
        return eval_record(item, report)
    if isinstance(item, ScenarioItem):
        return _scenario_item_record(item, report)
    traced = item.stash.get(RECORD, None)
    if traced is None or not traced.runs:
        return None
    if report.when == "call" or (report.when == "teardown" and report.failed):
        return traced.to_record(item, report)
    return None


def _scenario_item_record(item: ScenarioItem, report: pytest.TestReport) -> dict[str, Any] | None:
    if report.when == "call" and item.verdict is not None:
        from openprogram_sim.report import scenario_record

        path = relpath(item.config, item.path)
        record = scenario_record(item.verdict, id=item.nodeid, path=path)
        record["status"] = status_of(report)
        record["duration"] = report.duration
        return record
    if report.when == "setup" and report.skipped:
        return _stub_record(item, "skipped", 0.0, _skip_reason(report))
    if report.when == "call" and report.failed:  # the harness itself raised
        return _stub_record(item, "error", report.duration, report.longreprtext)
    return None


def _stub_record(item: ScenarioItem, status: str, duration: float, failure: str) -> dict[str, Any]:
    """The record of a scenario item that has no verdict (skipped, or the harness raised)."""
    scenario = item.scenario
    assert scenario is not None, "records are built before the item lets its scenario go"
    return {
        "id": item.nodeid,
        "kind": "scenario",
        "title": scenario.scenario,
        "path": relpath(item.config, item.path),
        "description": scenario.description,
        "tags": list(scenario.tags),
        "status": status,
        "duration": duration,
        "props": {},
        "failure": failure,
        "issues": [],
        "result": None,
        "error": None,
        "runs": [],
    }


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr or "")


class Collector:
    """Gathers the records on the reports (the controller's, under xdist) and writes the
    report once the session is over. Registered per config, so nested sessions are apart."""

    def __init__(self, state: State) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = getattr(report, REPORT_ATTR, None)
        if record is not None:
            self.state.records[record["id"]] = record
        said = getattr(report, EVAL_ATTR, None)
        if said is not None:
            self.state.evals[report.nodeid] = said

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        target = session.config.getoption("openprogram_report", None)
        if target and not is_worker(session.config):
            self.state.written = _write(session.config, self.state, target)

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        options = config.stash.get(EVAL_OPTIONS, None)
        if options is not None and self.state.evals:
            terminalreporter.write_sep("-", f"openprogram eval ({options.model})")
            for nodeid in sorted(self.state.evals):
                terminalreporter.write_line(self.state.evals[nodeid])
            terminalreporter.write_line(f"cassettes and regressions under {options.out}")
        if self.state.written is not None:
            terminalreporter.write_sep(
                "-", f"openprogram report ({len(self.state.records)} tests): {self.state.written}"
            )


def _write(config: pytest.Config, state: State, target: str) -> Path:
    from openprogram_sim.report import write_report

    path = config.invocation_params.dir / target
    options = config.stash.get(EVAL_OPTIONS, None)
    if options is not None:
        from openprogram_sim.eval import write_eval_report

        views = [r for _, r in sorted(state.records.items()) if r.get("kind") == "eval"]
        return write_eval_report(views, path, model=options.model, source="pytest")
    coverage = config.stash.get(COVERAGE, None)
    return write_report(
        path,
        state.records.values(),
        source="pytest",
        wall_time=time.perf_counter() - state.started,
        tool_code=coverage.tool_code if coverage is not None else None,
    )
