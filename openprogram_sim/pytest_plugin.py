"""The pytest plugin (entry point ``pytest11: openprogram``).

Options (group ``openprogram``)::

    --openprogram-scenarios [PATHS]   collect every scenario file under PATHS (default:
                                      scenarios/) as a test item; tags become markers
    --openprogram-report PATH         write one self-contained HTML report

Each scenario file is one item (``path/to/file.yaml::<title>``); a failing one shows the
verdict's diff, an invalid one its ``file:line`` errors. Scenario items carry JUnit
properties (``model_calls``, ``tool_calls``, ``errors``, ``end_reason``, ``max_depth``,
``rounds``).

Fixtures for Python tests: ``openprogram_model`` (a scripted-model factory),
``openprogram_trace`` (a trace recorder to subscribe), ``openprogram_scenario`` (runs a
scenario and asserts its verdict) and ``openprogram_assert_events``; the module function
:func:`assert_events` does the same. A test that used them appears in the report with its
traces. Records travel to the pytest-xdist controller on the test reports, so ``-n`` runs
write one report.

Only pytest and the standard library are imported at start-up; the harness is imported
when a scenario or fixture is used.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from openprogram_sim.check import Verdict
    from openprogram_sim.errors import ScenarioError
    from openprogram_sim.scenario import Scenario
    from openprogram_sim.scripted import ScriptedModel
    from openprogram_sim.trace import TraceRecorder

__all__ = [
    "InvalidScenarioItem",
    "ModelFactory",
    "ScenarioFailed",
    "ScenarioFile",
    "ScenarioItem",
    "ScenarioRunner",
    "assert_events",
    "assert_no_events",
]

REPORT_ATTR = "openprogram"
"""The attribute of a pytest ``TestReport`` that carries the test's report record."""

_STATE = pytest.StashKey["_State"]()
_RECORD = pytest.StashKey["_TestRecord"]()
_COLLECTOR = pytest.StashKey["_Collector"]()
_SUFFIXES = (".yaml", ".yml")


# --------------------------------------------------------------------------- options


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("openprogram", "openprogram scenarios and reports")
    group.addoption(
        "--openprogram-scenarios",
        dest="openprogram_scenarios",
        nargs="*",
        metavar="PATHS",
        default=None,
        help="collect every scenario file (*.yaml, *.yml) under PATHS as a test "
        "(default: scenarios/). Put it last, or use --openprogram-scenarios=PATH.",
    )
    group.addoption(
        "--openprogram-report",
        dest="openprogram_report",
        metavar="PATH",
        default=None,
        help="write a self-contained HTML report of scenarios and traced tests to PATH",
    )


class _State:
    """Per-session plugin state (kept on the config, so nested pytester runs are isolated)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.roots: list[Path] = []
        self.records: dict[str, dict[str, Any]] = {}
        self.started = time.perf_counter()
        self.written: Path | None = None

    def owns(self, path: Path) -> bool:
        resolved = path.resolve()
        return any(resolved == r or r in resolved.parents for r in self.roots)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    state = _State(config)
    config.stash[_STATE] = state
    collector = config.stash[_COLLECTOR] = _Collector(state)
    config.pluginmanager.register(collector, "openprogram-collector")
    config.addinivalue_line(
        "markers", "openprogram_scenario: a test item collected from a scenario file"
    )
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
    state = parent.config.stash.get(_STATE, None)
    if state is None or not state.roots or file_path.suffix not in _SUFFIXES:
        return None
    if not state.owns(file_path):
        return None
    file: ScenarioFile = ScenarioFile.from_parent(parent, path=file_path)
    return file


def _node_name(title: str) -> str:
    """A scenario title as a node name: one line, no ``::`` (which would split the id)."""
    name = " ".join(title.split()).replace("::", ":")
    return name or "scenario"


class ScenarioFile(pytest.File):
    """A scenario file: one item, or an :class:`InvalidScenarioItem` when it does not load."""

    def collect(self) -> Iterable[pytest.Item]:
        from openprogram_sim.errors import ScenarioError, ScenarioIssue
        from openprogram_sim.scenario import parse_scenario

        shown = _display_path(self.config, self.path)
        try:
            text = self.path.read_text(encoding="utf-8")
            scenario = parse_scenario(text, shown)
        except OSError as exc:
            error = ScenarioError([ScenarioIssue(shown, None, "", f"cannot read: {exc}")])
            yield InvalidScenarioItem.from_parent(self, name="invalid", error=error)
            return
        except ScenarioError as exc:
            yield InvalidScenarioItem.from_parent(self, name="invalid", error=exc)
            return
        item = ScenarioItem.from_parent(self, name=_node_name(scenario.scenario), scenario=scenario)
        for tag in scenario.tags:
            _register_marker(self.config, tag)
            item.add_marker(tag)
        item.add_marker("openprogram_scenario")
        yield item


def _register_marker(config: pytest.Config, tag: str) -> None:
    # Tags are only known once a file is read; registering each before it is applied is
    # what lets --strict-markers accept them (pytest re-reads the marker list on lookup).
    known = {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
    if tag not in known:
        config.addinivalue_line("markers", f"{tag}: scenario tag")


def _display_path(config: pytest.Config, path: Path) -> str:
    """``path`` as the user typed it: relative to where pytest was started, when below it."""
    try:
        return path.resolve().relative_to(config.invocation_params.dir.resolve()).as_posix()
    except ValueError:
        return str(path)


def _relpath(config: pytest.Config, path: Path) -> str:
    try:
        return path.resolve().relative_to(config.rootpath).as_posix()
    except ValueError:
        return str(path)


class ScenarioFailed(AssertionError):
    """A scenario's verdict has failures; ``repr_failure`` prints them, not a traceback."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(f"{len(verdict.failures)} expectation(s) failed")
        self.verdict = verdict


class ScenarioItem(pytest.Item):
    """One scenario file, run on the simulator and checked against its ``expect:``."""

    def __init__(self, *, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.record: dict[str, Any] | None = None
        # the title is a keyword too, so -k matches any word of it
        self.extra_keyword_matches.add(scenario.scenario)

    def runtest(self) -> None:
        from openprogram_sim.check import check_outcome
        from openprogram_sim.report import scenario_record
        from openprogram_sim.runner import run_scenario

        verdict = check_outcome(run_scenario(self.scenario))
        path = _relpath(self.config, self.path)
        self.record = scenario_record(verdict, id=self.nodeid, path=path)
        for key, value in self.record["props"].items():
            self.user_properties.append((key, value))
        if not verdict.passed:
            raise ScenarioFailed(verdict)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str | Any:
        if isinstance(excinfo.value, ScenarioFailed):
            from openprogram_sim.report import format_verdict

            verdict = excinfo.value.verdict
            path = _relpath(self.config, self.path)
            head = f"scenario failed: {self.scenario.scenario}\n  file: {path}"
            outcome = verdict.outcome
            if outcome.error is not None:
                head += f"\n  exec raised: {outcome.error_text}"
            else:
                head += f"\n  exec returned: {outcome.result!r}"
            return f"{head}\n\n{format_verdict(verdict)}"
        return super().repr_failure(excinfo, style="short")

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, 0, f"scenario: {self.scenario.scenario}"


class InvalidScenarioItem(pytest.Item):
    """A scenario file that could not be loaded: it fails with every ``file:line`` error."""

    def __init__(self, *, error: ScenarioError, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error

    def runtest(self) -> None:
        raise self.error

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str | Any:
        issues = "\n".join(f"  {issue}" for issue in self.error.issues)
        return f"invalid scenario file {_display_path(self.config, self.path)}:\n{issues}"

    def reportinfo(self) -> tuple[Path, int | None, str]:
        line = next((i.line for i in self.error.issues if i.line is not None), 1)
        return self.path, line - 1, f"invalid scenario file: {self.path.name}"


# --------------------------------------------------------------------------- records


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    record = _record_for(item, report)
    if record is not None:
        setattr(report, REPORT_ATTR, record)
    return report


def _record_for(item: pytest.Item, report: pytest.TestReport) -> dict[str, Any] | None:
    if isinstance(item, InvalidScenarioItem):
        if report.when != "call":
            return None
        from openprogram_sim.report import invalid_record

        return invalid_record(item.error, id=item.nodeid, path=_relpath(item.config, item.path))
    if isinstance(item, ScenarioItem):
        return _scenario_item_record(item, report)
    traced = item.stash.get(_RECORD, None)
    if traced is None or not traced.runs:
        return None
    if report.when == "call" or (report.when == "teardown" and report.failed):
        return traced.to_record(item, report)
    return None


def _scenario_item_record(item: ScenarioItem, report: pytest.TestReport) -> dict[str, Any] | None:
    if report.when == "call" and item.record is not None:
        record = dict(item.record)
        record["status"] = _status(report)
        record["duration"] = report.duration
        return record
    if report.when == "setup" and report.skipped:
        return {
            "id": item.nodeid,
            "kind": "scenario",
            "title": item.scenario.scenario,
            "path": _relpath(item.config, item.path),
            "description": item.scenario.description,
            "tags": list(item.scenario.tags),
            "status": "skipped",
            "duration": 0.0,
            "props": {},
            "failure": _skip_reason(report),
            "issues": [],
            "result": None,
            "error": None,
            "runs": [],
        }
    if report.when == "call" and report.failed:  # the harness itself raised
        return {
            "id": item.nodeid,
            "kind": "scenario",
            "title": item.scenario.scenario,
            "path": _relpath(item.config, item.path),
            "description": item.scenario.description,
            "tags": list(item.scenario.tags),
            "status": "error",
            "duration": report.duration,
            "props": {},
            "failure": report.longreprtext,
            "issues": [],
            "result": None,
            "error": None,
            "runs": [],
        }
    return None


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

    def __init__(self, state: _State) -> None:
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


def _write(config: pytest.Config, state: _State, target: str) -> Path:
    from openprogram_sim.report import write_report

    path = config.invocation_params.dir / target
    return write_report(
        path,
        state.records.values(),
        source="pytest",
        wall_time=time.perf_counter() - state.started,
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


class ModelFactory:
    """Makes scripted models (``openprogram_model``). Models it made are remembered so the
    report can show their usage per model call::

        model = openprogram_model([{"tool_calls": [{"add": {"a": 1}}]}, "done"])
        fn = openprogram_model.function(lambda request: "hi")
        auto = openprogram_model.auto()
    """

    def __init__(self) -> None:
        self.models: list[ScriptedModel] = []

    def __call__(self, turns: Iterable[Any] = (), **options: Any) -> ScriptedModel:
        from openprogram_sim.scripted import ScriptedModel

        return self._keep(ScriptedModel(turns, **options))

    def function(self, fn: Callable[..., Any], **options: Any) -> ScriptedModel:
        from openprogram_sim.scripted import FunctionModel

        return self._keep(FunctionModel(fn, **options))

    def auto(self, **options: Any) -> ScriptedModel:
        from openprogram_sim.scripted import AutoModel

        return self._keep(AutoModel(**options))

    def _keep(self, model: ScriptedModel) -> ScriptedModel:
        self.models.append(model)
        return model


@pytest.fixture
def openprogram_model() -> ModelFactory:
    """A factory of scripted models: ``openprogram_model(turns)``, ``.function(fn)``,
    ``.auto()`` (see :mod:`openprogram_sim.scripted`)."""
    return ModelFactory()


@pytest.fixture
def openprogram_trace(request: pytest.FixtureRequest) -> TraceRecorder:
    """A :class:`~openprogram_sim.trace.TraceRecorder`: ``runtime.subscribe(it)``, then
    read ``.trace``. What it records is shown in the report under the test."""
    from openprogram_sim.report import run_entry

    recorder: Any = _usage_recorder_class()()
    _test_record(request).runs.append(
        lambda: run_entry(recorder.trace, label="openprogram_trace", usage=recorder.usage)
    )
    traced: TraceRecorder = recorder
    return traced


@functools.cache
def _usage_recorder_class() -> type[Any]:
    from openprogram_sim.trace import TraceRecorder

    class UsageRecorder(TraceRecorder):
        """A TraceRecorder that also keeps each assistant message's usage (for the report);
        the trace itself is exactly TraceRecorder's."""

        def __init__(self) -> None:
            super().__init__()
            self.usage: list[Any] = []

        def __call__(self, event: Any) -> None:
            super().__call__(event)
            if event.type == "message_end" and getattr(event.message, "role", "") == "assistant":
                self.usage.append(getattr(event.message, "usage", None))

    return UsageRecorder


class ScenarioRunner:
    """Runs a scenario in a Python test (``openprogram_scenario``) and returns its verdict;
    by default a failed verdict raises ``AssertionError`` with the same diff the scenario
    item shows. ``source``: a path, YAML text, a mapping, or a loaded ``Scenario``."""

    def __init__(self, record: _TestRecord, base: Path) -> None:
        self._record = record
        self._base = base

    def __call__(self, source: Any, *, check: bool = True) -> Verdict:
        __tracebackhide__ = True
        from openprogram_sim.check import check_outcome
        from openprogram_sim.report import format_verdict, scenario_record
        from openprogram_sim.runner import run_scenario

        scenario = self.load(source)
        verdict = check_outcome(run_scenario(scenario))
        run = scenario_record(verdict, id="", path="")["runs"][0]
        run["label"] = scenario.scenario
        self._record.runs.append(lambda: run)
        if check and not verdict.passed:
            raise AssertionError(
                f"scenario failed: {scenario.scenario}\n\n{format_verdict(verdict)}"
            )
        return verdict

    def load(self, source: Any) -> Scenario:
        """A Scenario from a path, YAML text, a mapping or a Scenario."""
        from openprogram_sim.scenario import Scenario, load_scenario, parse_scenario

        if isinstance(source, Scenario):
            return source
        if isinstance(source, Path):
            return load_scenario(source if source.is_absolute() else self._base / source)
        if isinstance(source, Mapping):
            import yaml

            return parse_scenario(yaml.safe_dump(dict(source)), "<mapping>")
        if isinstance(source, str) and "\n" not in source and source.endswith(_SUFFIXES):
            return load_scenario(self._base / source)
        if isinstance(source, str):
            return parse_scenario(source, "<string>")
        raise TypeError(
            f"openprogram_scenario takes a path, YAML text, a mapping or a Scenario, "
            f"got {type(source).__name__}"
        )


@pytest.fixture
def openprogram_scenario(request: pytest.FixtureRequest) -> ScenarioRunner:
    """Run a scenario: ``verdict = openprogram_scenario("scenarios/x.yaml")`` (relative
    paths from the invocation directory); a failed verdict raises with its diff."""
    return ScenarioRunner(_test_record(request), request.config.invocation_params.dir)


def assert_events(
    trace: Sequence[Mapping[str, Any]],
    expected: Sequence[Mapping[str, Any]],
    mode: str = "ordered",
) -> None:
    """Assert that ``trace`` holds ``expected`` (``{event_type: {field: matcher}}`` items,
    the matchers of scenario files) ``ordered`` (gaps allowed), ``exact`` or ``unordered``;
    raises ``AssertionError`` with the same diff text a scenario failure shows::

        assert_events(rec.trace, [
            {"tool_execution_end": {"tool_name": "search", "is_error": False}},
            {"agent_end": {"reason": "stop"}},
        ])
    """
    __tracebackhide__ = True
    from openprogram_sim.trace import match_events, render_mismatch

    if mode not in ("ordered", "exact", "unordered"):
        raise ValueError(f"mode must be 'ordered', 'exact' or 'unordered', got {mode!r}")
    _check_expected(expected)
    events = [dict(e) for e in trace]
    wanted = [dict(e) for e in expected]
    mismatch = match_events(wanted, events, mode)
    if mismatch is not None:
        detail = render_mismatch(mismatch, events, total=len(wanted))
        indented = "\n".join(f"  {line}" for line in detail.splitlines())
        raise AssertionError(f"events ({mode}) did not match\n{indented}")


def assert_no_events(
    trace: Sequence[Mapping[str, Any]], unwanted: Sequence[Mapping[str, Any]]
) -> None:
    """Assert that no event of ``trace`` matches any of ``unwanted`` (like ``not_events``)."""
    __tracebackhide__ = True
    from openprogram_sim.matchers import describe
    from openprogram_sim.trace import event_matches, render_entry

    _check_expected(unwanted)
    events = [dict(e) for e in trace]
    for item in unwanted:
        hits = [i for i, e in enumerate(events) if event_matches(item, e)]
        if hits:
            shown = "\n".join(f"  #{i:<3} {render_entry(events[i])}" for i in hits[:5])
            raise AssertionError(
                f"an event that must not occur occurred {len(hits)} time(s): "
                f"{describe(item)}\n{shown}"
            )


def _check_expected(expected: Sequence[Mapping[str, Any]]) -> None:
    from openprogram_sim.matchers import check_matcher
    from openprogram_sim.scenario import EVENT_FIELDS

    for i, item in enumerate(expected):
        if not isinstance(item, Mapping) or len(item) != 1:
            raise ValueError(
                f"expected event {i + 1} must be one {{event_type: {{field: matcher}}}} "
                f"mapping, got {item!r}"
            )
        ((event_type, fields),) = item.items()
        if event_type not in EVENT_FIELDS:
            raise ValueError(
                f"expected event {i + 1}: unknown event {event_type!r}; events are: "
                f"{', '.join(EVENT_FIELDS)}"
            )
        problem = check_matcher(fields or {})
        if problem:
            raise ValueError(f"expected event {i + 1}: {problem}")


@pytest.fixture
def openprogram_assert_events() -> Callable[..., None]:
    """:func:`assert_events` as a fixture (no import needed in conftest-less tests)."""
    return assert_events
