"""The plugin's fixtures for Python tests: scripted models, trace recorders, scenarios run
and served, and the records they leave for the report.

Only pytest and the standard library are imported here; the harness loads when a fixture
is first used.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from openprogram_sim.plugin._items import status_of

if TYPE_CHECKING:
    from openprogram_sim.plugin._objects import ModelFactory, ScenarioRunner, UsageRecorder

__all__ = [
    "RECORD",
    "TestRecord",
    "openprogram_assert_events",
    "openprogram_model",
    "openprogram_scenario",
    "openprogram_serve",
    "openprogram_trace",
]

RECORD = pytest.StashKey["TestRecord"]()
"""Where an item keeps the traces its test ran through the fixtures."""


class TestRecord:
    """What a Python test ran through the fixtures: its traces, for the report."""

    def __init__(self) -> None:
        self.runs: list[Callable[[], dict[str, Any]]] = []

    def to_record(self, item: pytest.Item, report: pytest.TestReport) -> dict[str, Any]:
        from openprogram_sim.report import python_record

        runs = [make() for make in self.runs]
        runs = [r for r in runs if r["trace"]]
        for i, run in enumerate(runs):
            run["label"] = run["label"] or f"run {i + 1}"
        status = status_of(report) if report.when == "call" else "error"
        markers = sorted({m.name for m in item.iter_markers()} - {"parametrize", "usefixtures"})
        path, _, _ = item.location
        return python_record(
            id=item.nodeid,
            title=item.name,
            path=path,
            tags=markers,
            status=status,
            duration=report.duration,
            runs=runs,
            failure=report.longreprtext if report.failed else "",
        )


def _test_record(request: pytest.FixtureRequest) -> TestRecord:
    stash: pytest.Stash = request.node.stash
    record = stash.get(RECORD, None)
    if record is None:
        record = stash[RECORD] = TestRecord()
    return record


@pytest.fixture
def openprogram_model() -> ModelFactory:
    """A factory of scripted models: ``openprogram_model(turns)``, ``.function(fn)``,
    ``.auto()`` (see :mod:`openprogram_sim.models`)."""
    from openprogram_sim.plugin._objects import ModelFactory

    return ModelFactory()


@pytest.fixture
def openprogram_trace(request: pytest.FixtureRequest) -> UsageRecorder:
    """A :class:`~openprogram_sim.trace.TraceRecorder`: ``runtime.subscribe(it)``, then
    read ``.trace``. What it records is shown in the report under the test."""
    from openprogram_sim.plugin._objects import UsageRecorder
    from openprogram_sim.report import run_entry

    recorder = UsageRecorder()
    _test_record(request).runs.append(
        lambda: run_entry(recorder.trace, label="openprogram_trace", usage=recorder.usage)
    )
    return recorder


@pytest.fixture
def openprogram_scenario(request: pytest.FixtureRequest) -> ScenarioRunner:
    """Run a scenario: ``verdict = openprogram_scenario("scenarios/x.yaml")`` (relative
    paths from the invocation directory); a failed verdict raises with its diff."""
    from openprogram_sim.plugin._objects import ScenarioRunner

    return ScenarioRunner(_test_record(request).runs, request.config.invocation_params.dir)


@pytest.fixture
def openprogram_serve(request: pytest.FixtureRequest) -> Generator[Callable[..., Any], None, None]:
    """Serve a scenario over real loopback HTTP for the test: ``server =
    openprogram_serve("scenarios/x.yaml")`` (a path, relative to the invocation directory,
    a loaded ``Scenario``, or a list of turns) gives a started
    :class:`~openprogram_sim.wire.WireServer` (``server.base_url("openai")``,
    ``server.requests``, ``server.assert_consumed()``, ``server.check()``); every server the
    test started stops at teardown."""
    from openprogram_sim.play import scenario_server
    from openprogram_sim.wire import WireServer

    base = request.config.invocation_params.dir
    started: list[Any] = []

    def start(source: Any, **options: Any) -> Any:
        if isinstance(source, (str, Path)):
            path = Path(source)
            source = path if path.is_absolute() else base / path
        if isinstance(source, Path) or callable(getattr(source, "script", None)):
            server = scenario_server(source, **options)  # its expect.requests checked too
        else:
            server = WireServer(source, **options)
        started.append(server.start())
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def openprogram_assert_events() -> Callable[..., None]:
    """:func:`openprogram_sim.trace.assert_events` as a fixture (no import needed)."""
    from openprogram_sim.trace import assert_events

    return assert_events
