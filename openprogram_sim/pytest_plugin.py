"""The pytest plugin (entry point ``pytest11: openprogram``).

Options (group ``openprogram``)::

    --openprogram-scenarios [PATHS]   collect every scenario file under PATHS (default:
                                      scenarios/) as a test item; tags become markers
    --openprogram-report PATH         write one self-contained HTML report
    --openprogram-coverage            print which loop behaviours the scenarios exercise
                                      and assert (the catalogue: docs/coverage.md)
    --openprogram-coverage-json PATH  write that coverage as JSON
    --openprogram-coverage-fail-under N, --openprogram-coverage-require ID,...
                                      fail the session below a floor of behaviours
    --openprogram-coverage-source PKG measure your tool code with coverage.py, one
                                      context per scenario (--openprogram-coverage-data)
    --openprogram-record-mode MODE    none (default, and always when CI is set), once,
                                      new_episodes or all, for openprogram_cassette

Each scenario file is one item (``path/to/file.yaml::<title>``); a failing one shows the
verdict's diff, an invalid one its ``file:line`` errors. Scenario items carry JUnit
properties (``model_calls``, ``tool_calls``, ``errors``, ``end_reason``, ``max_depth``,
``rounds``).

Fixtures for Python tests: ``openprogram_model`` (a scripted-model factory),
``openprogram_trace`` (a trace recorder to subscribe), ``openprogram_scenario`` (runs a
scenario and asserts its verdict), ``openprogram_serve`` (serves a scenario over loopback
HTTP to any client) and ``openprogram_assert_events``; the module function
:func:`assert_events` does the same. A test that used them appears in the report with its
traces. Records travel to the pytest-xdist controller on the test reports, so ``-n`` runs
write one report.

``openprogram_cassette`` (with the ``openprogram_cassette`` marker naming its file, and the
overridable ``openprogram_cassette_config``) records and replays every ``httpx``/``httpx2``
client of a test (see :mod:`openprogram_sim.cassettes`).

Only pytest and the standard library are imported at start-up; the harness is imported
when a scenario or fixture is used.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from openprogram_sim._pytest_items import (
    STATE,
    SUFFIXES,
    InvalidScenarioItem,
    ScenarioFailed,
    ScenarioFile,
    ScenarioItem,
    State,
    relpath,
)

if TYPE_CHECKING:
    from openprogram_sim._fixtures import ModelFactory, ScenarioRunner, UsageRecorder

__all__ = [
    "InvalidScenarioItem",
    "ModelFactory",
    "ScenarioFailed",
    "ScenarioFile",
    "ScenarioItem",
    "ScenarioRunner",
]

_MOVED = {"assert_events": "openprogram_sim.trace", "assert_no_events": "openprogram_sim.trace"}


def __getattr__(name: str) -> Any:
    # The fixture types load with the harness, not at pytest start-up.
    if name in ("ModelFactory", "ScenarioRunner"):
        from openprogram_sim import _fixtures

        return getattr(_fixtures, name)
    if name in _MOVED:
        import importlib
        import warnings

        warnings.warn(
            f"openprogram_sim.pytest_plugin.{name} moved to {_MOVED[name]}.{name} (also "
            f"importable from openprogram_sim); the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


REPORT_ATTR = "openprogram"
"""The attribute of a pytest ``TestReport`` that carries the test's report record."""

_RECORD = pytest.StashKey["_TestRecord"]()
_COLLECTOR = pytest.StashKey["_Collector"]()
_COVERAGE = pytest.StashKey[Any]()


# --------------------------------------------------------------------------- options


def pytest_addoption(parser: pytest.Parser) -> None:
    from openprogram_sim._pytest_options import add_options

    add_options(parser)


def _given(value: Any) -> bool:
    return value is not None and value is not False and value != []


_COVERAGE_OPTIONS = (
    "openprogram_coverage",
    "openprogram_coverage_json",
    "openprogram_coverage_fail_under",
    "openprogram_coverage_require",
    "openprogram_coverage_source",
)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    state = State(config)
    config.stash[STATE] = state
    collector = config.stash[_COLLECTOR] = _Collector(state)
    config.pluginmanager.register(collector, "openprogram-collector")
    config.addinivalue_line(
        "markers", "openprogram_scenario: a test item collected from a scenario file"
    )
    config.addinivalue_line(
        "markers",
        "openprogram_cassette(path=None, **options): the openprogram_cassette fixture's "
        "file (relative to the test file) and Cassette options",
    )
    if any(_given(config.getoption(name, None)) for name in _COVERAGE_OPTIONS):
        from openprogram_sim.coverage._pytest import CoverageHooks

        hooks = config.stash[_COVERAGE] = CoverageHooks(config)
        config.pluginmanager.register(hooks, "openprogram-coverage")
        hooks.start()
    if config.getoption("openprogram_fuzz", None) is not None:
        config.addinivalue_line("markers", "openprogram_fuzz: a chunk of a fuzz campaign")
        from openprogram_sim.fuzz._pytest import FuzzHooks

        config.pluginmanager.register(FuzzHooks(config), "openprogram-fuzz")
    paths = config.getoption("openprogram_scenarios", None)
    if paths is None:
        return
    base = config.invocation_params.dir
    state.roots = [(base / p).resolve() for p in (paths or ["scenarios"])]
    _add_collection_args(config, state.roots)


def _add_collection_args(config: pytest.Config, roots: list[Path]) -> None:
    """Make pytest walk the scenario paths too (unless an argument already covers them)."""
    base = config.invocation_params.dir
    given = [(base / str(a).split("::")[0]).resolve() for a in config.args]
    for root in roots:
        if not root.exists():
            raise pytest.UsageError(f"--openprogram-scenarios: no such file or directory: {root}")
        if not any(root == g or g in root.parents for g in given):
            config.args.append(str(root))
            given.append(root)


# --------------------------------------------------------------------------- collection


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    state = parent.config.stash.get(STATE, None)
    if state is None or not state.roots or file_path.suffix not in SUFFIXES:
        return None
    try:
        real = file_path.resolve()
    except (OSError, RuntimeError):  # a link that loops is not a scenario file
        return None
    if real in state.collected or not state.owns(real):
        return None
    state.collected.add(real)
    file: ScenarioFile = ScenarioFile.from_parent(parent, path=file_path)
    return file


# --------------------------------------------------------------------------- records


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    if item.config.getoption("openprogram_report", None):
        record = _record_for(item, report)  # records only feed the HTML report
        if record is not None:
            setattr(report, REPORT_ATTR, record)
    if report.when == "call" and isinstance(item, ScenarioItem):
        # reported: the scenario and its run need not stay alive to the session's end (a
        # large heap makes every later full garbage collection, and pytest's at exit, slow)
        item.verdict = None
        item.scenario = None
    return report


def _record_for(item: pytest.Item, report: pytest.TestReport) -> dict[str, Any] | None:
    if isinstance(item, InvalidScenarioItem):
        if report.when != "call":
            return None
        from openprogram_sim.report import invalid_record

        return invalid_record(item.error, id=item.nodeid, path=relpath(item.config, item.path))
    if isinstance(item, ScenarioItem):
        return _scenario_item_record(item, report)
    traced = item.stash.get(_RECORD, None)
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
        record["status"] = _status(report)
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


def _status(report: pytest.TestReport) -> str:
    if report.skipped:
        return "skipped"
    return "passed" if report.passed else "failed"


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr or "")


class _Collector:
    """Gathers the records on the reports (the controller's, under xdist) and writes the
    report once the session is over. Registered per config, so nested sessions are apart."""

    def __init__(self, state: State) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = getattr(report, REPORT_ATTR, None)
        if record is not None:
            self.state.records[record["id"]] = record

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        target = session.config.getoption("openprogram_report", None)
        if target and not _is_worker(session.config):
            self.state.written = _write(session.config, self.state, target)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.state.written is not None:
            terminalreporter.write_sep(
                "-", f"openprogram report ({len(self.state.records)} tests): {self.state.written}"
            )


def pytest_unconfigure(config: pytest.Config) -> None:
    collector = config.stash.get(_COLLECTOR, None)
    if collector is not None:
        config.pluginmanager.unregister(collector)
    coverage = config.stash.get(_COVERAGE, None)
    if coverage is not None:
        config.pluginmanager.unregister(coverage)


def _write(config: pytest.Config, state: State, target: str) -> Path:
    from openprogram_sim.report import write_report

    path = config.invocation_params.dir / target
    coverage = config.stash.get(_COVERAGE, None)
    return write_report(
        path,
        state.records.values(),
        source="pytest",
        wall_time=time.perf_counter() - state.started,
        tool_code=coverage.tool_code if coverage is not None else None,
    )


# --------------------------------------------------------------------------- fixtures


class _TestRecord:
    """What a Python test ran through the fixtures: its traces, for the report."""

    def __init__(self) -> None:
        self.runs: list[Callable[[], dict[str, Any]]] = []

    def to_record(self, item: pytest.Item, report: pytest.TestReport) -> dict[str, Any]:
        from openprogram_sim.report import python_record

        runs = [make() for make in self.runs]
        runs = [r for r in runs if r["trace"]]
        for i, run in enumerate(runs):
            run["label"] = run["label"] or f"run {i + 1}"
        status = _status(report) if report.when == "call" else "error"
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


def _test_record(request: pytest.FixtureRequest) -> _TestRecord:
    stash: pytest.Stash = request.node.stash
    record = stash.get(_RECORD, None)
    if record is None:
        record = stash[_RECORD] = _TestRecord()
    return record


@pytest.fixture
def openprogram_model() -> ModelFactory:
    """A factory of scripted models: ``openprogram_model(turns)``, ``.function(fn)``,
    ``.auto()`` (see :mod:`openprogram_sim.models`)."""
    from openprogram_sim._fixtures import ModelFactory

    return ModelFactory()


@pytest.fixture
def openprogram_trace(request: pytest.FixtureRequest) -> UsageRecorder:
    """A :class:`~openprogram_sim.trace.TraceRecorder`: ``runtime.subscribe(it)``, then
    read ``.trace``. What it records is shown in the report under the test."""
    from openprogram_sim._fixtures import UsageRecorder
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
    from openprogram_sim._fixtures import ScenarioRunner

    return ScenarioRunner(_test_record(request).runs, request.config.invocation_params.dir)


@pytest.fixture
def openprogram_serve(request: pytest.FixtureRequest) -> Generator[Callable[..., Any], None, None]:
    """Serve a scenario over real loopback HTTP for the test: ``server =
    openprogram_serve("scenarios/x.yaml")`` (a path, relative to the invocation directory,
    a loaded ``Scenario``, or a list of turns) gives a started
    :class:`~openprogram_sim.wire.WireServer` (``server.base_url("openai")``,
    ``server.requests``, ``server.assert_consumed()``, ``server.check()``); every server the
    test started stops at teardown."""
    from openprogram_sim.scenario import load_scenario

    if TYPE_CHECKING:  # the package loads the server lazily, which mypy cannot follow
        from openprogram_sim.wire._server import WireServer
    else:
        from openprogram_sim.wire import WireServer

    base = request.config.invocation_params.dir
    started: list[Any] = []

    def start(source: Any, **options: Any) -> Any:
        if isinstance(source, (str, Path)):
            path = Path(source)
            source = load_scenario(path if path.is_absolute() else base / path)
        server = WireServer(source, **options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def openprogram_assert_events() -> Callable[..., None]:
    """:func:`openprogram_sim.trace.assert_events` as a fixture (no import needed)."""
    from openprogram_sim.trace import assert_events

    return assert_events


# --------------------------------------------------------------------------- cassettes


@pytest.fixture
def openprogram_cassette_config() -> dict[str, Any]:
    """Options for every ``openprogram_cassette`` in its scope: override it in a
    ``conftest.py`` (e.g. ``{"ignore": ["$.metadata"], "timing": "recorded"}``); the
    marker's options are applied over it. Keys are :class:`~openprogram_sim.cassettes.
    Cassette` arguments, plus ``folder`` (where unnamed cassettes go, relative to the test
    file; default ``cassettes/<module>``)."""
    return {}


def _cassette_path(request: pytest.FixtureRequest, folder: str | None) -> Path:
    """``cassettes/<test module>/<test name>.yaml`` beside the test file, pytest-recording's
    convention."""
    test_file = Path(str(request.node.path))
    name = "".join(c if c.isalnum() or c in "-_.[]" else "_" for c in request.node.name)
    base = test_file.parent / (folder if folder is not None else f"cassettes/{test_file.stem}")
    return base / f"{name}.yaml"


@pytest.fixture
def openprogram_cassette(
    request: pytest.FixtureRequest, openprogram_cassette_config: dict[str, Any]
) -> Generator[Any, None, None]:
    """A :class:`~openprogram_sim.cassettes.Cassette` answering every ``httpx``/``httpx2``
    client of the test (openprogram's adapters and the official SDKs alike), in the record
    mode of ``--openprogram-record-mode`` (``none`` unless given, and always in CI).
    ``@pytest.mark.openprogram_cassette("file.yaml", ignore=[...], faults=[...])`` names
    the file and options; ``cassette.provider("anthropic:claude-...")`` is openprogram's
    adapter bound to it. At teardown what was recorded is saved, and requests the cassette
    could not answer, or recorded interactions never requested, fail the test."""
    from openprogram_sim.cassettes import Cassette

    options = dict(openprogram_cassette_config)
    marker = request.node.get_closest_marker("openprogram_cassette")
    path_arg = None
    if marker is not None:
        path_arg = marker.args[0] if marker.args else marker.kwargs.get("path")
        options.update({k: v for k, v in marker.kwargs.items() if k != "path"})
    folder = options.pop("folder", None)
    if path_arg is None:
        path = _cassette_path(request, folder)
    else:
        path = Path(str(request.node.path)).parent / str(path_arg)
    mode = request.config.getoption("openprogram_record_mode", None)
    cassette = Cassette(path, record_mode=mode, **options)
    with cassette.patch():
        yield cassette
    problems = cassette.problems()
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


for _cls in (InvalidScenarioItem, ScenarioFailed, ScenarioFile, ScenarioItem):
    _cls.__module__ = __name__  # the public module users see in reprs
del _cls
