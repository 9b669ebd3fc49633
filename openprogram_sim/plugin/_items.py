"""The pytest plugin's scenario items: a scenario file is a collector of one item, run on
the simulator and checked against its ``expect:`` (or an item that reports why the file
does not load). Only pytest and the standard library are imported at start-up; the harness
is imported when a scenario is loaded or run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from openprogram_sim.plugin._trace_out import TRACE_OUT, write_trace

if TYPE_CHECKING:
    from openprogram_sim.errors import ScenarioError
    from openprogram_sim.play import Verdict
    from openprogram_sim.scenario import Scenario

__all__ = [
    "InvalidScenarioItem",
    "ScenarioFailed",
    "ScenarioFile",
    "ScenarioItem",
    "ScenarioNotRun",
    "State",
    "display_path",
    "relpath",
    "status_of",
]

STATE = pytest.StashKey["State"]()
SUFFIXES = (".yaml", ".yml")


class State:
    """Per-session plugin state (kept on the config, so nested pytester runs are isolated)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.roots: list[Path] = []
        self.collected: set[Path] = set()
        """Scenario files already collected, resolved: a folder reached again through a
        link (a link loop) does not collect its files twice."""
        self.resolved: dict[Path, Path] = {}
        """Each collected scenario file's path, resolved once (as pytest gave it → real)."""
        self.skipped: list[tuple[Path, str]] = []
        """Files under the roots left alone, with why (a cassette), for ``-v``."""
        self.base = config.invocation_params.dir.resolve()
        self.tags: dict[str, Any] = {}
        """Scenario tags already registered as markers (and the plugin's marker), each
        with its ``pytest.mark`` decorator."""
        self.records: dict[str, dict[str, Any]] = {}
        self.started = time.perf_counter()
        self.written: Path | None = None
        self.item_class: type[ScenarioItem] = ScenarioItem
        """What a scenario file's item is (an eval's item under ``--openprogram-eval``)."""
        self.evals: dict[str, str] = {}
        """Each eval item's one-line summary, by node id (the controller's, under xdist)."""
        self.fixture_infos: dict[tuple[Any, tuple[str, ...]], Any] = {}
        """The fixture closure of the scenario items, by folder node and fixture names."""
        self.frozen = False
        """Whether the heap collection built is frozen (``gc.freeze``) until the session
        ends (see the plugin's ``pytest_collection``)."""

    def owns(self, resolved: Path) -> bool:
        """Whether ``resolved`` (a resolved path) is under one of the scenario roots."""
        return any(resolved == r or r in resolved.parents for r in self.roots)


def _node_name(title: str) -> str:
    """A scenario title as a node name: one line, no ``::`` (which would split the id)."""
    name = " ".join(title.split()).replace("::", ":")
    return name or "scenario"


class ScenarioFile(pytest.File):
    """A scenario file: one item, or an :class:`InvalidScenarioItem` when it does not load."""

    def collect(self) -> Iterable[pytest.Item]:
        from openprogram_sim.errors import ScenarioError
        from openprogram_sim.scenario import load_scenario

        try:
            scenario = load_scenario(self.path, shown_as=display_path(self.config, self.path))
        except ScenarioError as exc:
            yield InvalidScenarioItem.from_parent(self, name="invalid", error=exc)
            return
        state = self.config.stash.get(STATE, None)
        kind = state.item_class if state is not None else ScenarioItem
        item = kind.from_parent(self, name=_node_name(scenario.scenario), scenario=scenario)
        for tag in scenario.tags:
            item.add_marker(_register_marker(self.config, tag))
        item.add_marker(_register_marker(self.config, "openprogram_scenario", tag=False))
        yield item


def _register_marker(config: pytest.Config, name: str, *, tag: bool = True) -> Any:
    """The marker ``name`` (a ``pytest.mark`` decorator, made once a session and then
    reused), a scenario tag registered first: tags are only known once a file is read, and
    registering each before it is applied is what lets --strict-markers accept them (pytest
    re-reads the marker list on lookup)."""
    state = config.stash.get(STATE, None)
    if state is not None:
        mark = state.tags.get(name)
        if mark is not None:
            return mark
    if tag:
        known = {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
        if name not in known:
            config.addinivalue_line("markers", f"{name}: scenario tag")
    mark = getattr(pytest.mark, name)
    if state is not None:
        state.tags[name] = mark
    return mark


def display_path(config: pytest.Config, path: Path) -> str:
    """``path`` as the user typed it: relative to where pytest was started, when below it."""
    state = config.stash.get(STATE, None)
    base = state.base if state is not None else config.invocation_params.dir.resolve()
    try:
        real = state.resolved.get(path) if state is not None else None
        return (real or path.resolve()).relative_to(base).as_posix()
    except (ValueError, OSError, RuntimeError):
        return str(path)


def _location(item: pytest.Item) -> tuple[str, int | None, str]:
    """``item.location`` as pytest computes it (the path relative to the root path), by text
    when the file is below the root: pytest's general relative path costs about 0.07 ms an
    item and keeps every file's path and answer in a cache for the whole session."""
    path, line, title = item.reportinfo()
    text = os.path.abspath(path)
    root = str(item.config.rootpath)
    if len(text) > len(root) + 1 and text.startswith(root) and text[len(root)] == os.sep:
        return text[len(root) + 1 :], line, title
    return item.session._node_location_to_relpath(Path(text)), line, title


def relpath(config: pytest.Config, path: Path) -> str:
    try:
        return path.resolve().relative_to(config.rootpath).as_posix()
    except (ValueError, OSError, RuntimeError):
        return str(path)


class ScenarioFailed(AssertionError):
    """A scenario's verdict has failures; ``repr_failure`` prints them, not a traceback."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(f"{len(verdict.failures)} expectation(s) failed")
        self.verdict = verdict


class ScenarioNotRun(Exception):
    """The Python a scenario names could not be imported, or was refused, as its run was
    built; ``repr_failure`` prints the file's ``file:line`` errors."""

    def __init__(self, error: ScenarioError) -> None:
        super().__init__(str(error))
        self.error = error


def _fixture_info(item: ScenarioItem) -> Any:
    """pytest's fixture closure for ``item``: what the fixtures it names and the autouse
    ones visible from its folder need. Scenario files of one folder that name the same
    fixtures share it (as a parametrized test's items share their function's): it depends
    only on the folder's chain of nodes and those names, and computing it cost each item."""
    manager = item.session._fixturemanager
    state = item.config.stash.get(STATE, None)
    file = item.parent
    if state is None or file is None or file.parent is None or file.own_markers:
        return manager.getfixtureinfo(node=item, func=None, cls=None)
    key = (file.parent, tuple(item.wanted))
    info = state.fixture_infos.get(key)
    if info is None:
        info = state.fixture_infos[key] = manager.getfixtureinfo(node=item, func=None, cls=None)
    return info


class ScenarioItem(pytest.Item):
    """One scenario file, run on the simulator and checked against its ``expect:``."""

    def __init__(self, *, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario: Scenario | None = scenario
        self.title = scenario.scenario
        self.verdict: Verdict | None = None
        # the title is a keyword too, so -k matches any word of it
        self.extra_keyword_matches.add(scenario.scenario)
        self.wanted = list(scenario.fixtures)
        self._request_fixtures()

    def _request_fixtures(self) -> None:
        """Request the scenario's ``fixtures:`` as a test requests them (and the autouse
        ones in scope), the way pytest's doctest items do: pytest sets them up before
        :meth:`runtest` and tears them down after."""
        from _pytest.fixtures import TopRequest

        if self.wanted:
            self.add_marker(pytest.mark.usefixtures(*self.wanted))
        self.nofuncargs = True  # no function to read parameters from: the marker names them
        self.obj = None  # what pytest's fixture errors show the source of (there is none)
        info = _fixture_info(self)
        self._fixtureinfo = info
        self.fixturenames = info.names_closure
        self.funcargs: dict[str, Any] = {}
        self._request = TopRequest(self, _ispytest=True)  # type: ignore[arg-type]

    def setup(self) -> None:
        self._check_fixture_names()
        self._request._fillfixtures()

    def _check_fixture_names(self) -> None:
        """A fixture the scenario names that pytest does not know fails the item with the
        file's line and a did-you-mean, not pytest's error about a function's source."""
        known = self._fixtureinfo.name2fixturedefs
        for i, name in enumerate(self.wanted):
            if name in known:
                continue
            import difflib

            # only for the error: every fixture visible here (walking them costs each item)
            manager = self.session._fixturemanager
            visible = getattr(manager, "_get_all_fixture_defs_for_node", None)  # internals
            every = sorted({d.argname for d in visible(self)} if visible is not None else known)
            close = difflib.get_close_matches(name, every, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            where = self.scenario.where("fixtures", i) if self.scenario is not None else ""
            pytest.fail(
                f"{where}: (fixtures[{i}]) no fixture {name!r} is visible here{hint} "
                "(`pytest --fixtures` lists them)",
                pytrace=False,
            )

    def runtest(self) -> None:
        from openprogram_sim.errors import ScenarioError
        from openprogram_sim.play import check_outcome, run_scenario
        from openprogram_sim.report import expectation_checks, junit_properties, scenario_props

        assert self.scenario is not None, "a scenario item runs once"
        values = {name: self.funcargs[name] for name in self.wanted}
        try:  # the file's Python is imported now, as its run is built (not at collection)
            outcome = run_scenario(self.scenario, fixtures=values)
        except ScenarioError as exc:
            raise ScenarioNotRun(exc) from None
        self.verdict = verdict = check_outcome(outcome)
        if TRACE_OUT in self.config.stash:  # the path as shown only when a trace is written
            write_trace(self.config, display_path(self.config, self.path), outcome)
        for key, value in scenario_props(verdict).items():
            self.user_properties.append((key, value))
        # the trajectory's score and each rule's verdict, passed or not (JUnit <property>)
        self.user_properties += junit_properties(expectation_checks(verdict))
        if not verdict.passed:
            raise ScenarioFailed(verdict)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str | Any:
        if isinstance(excinfo.value, ScenarioNotRun):
            issues = "\n".join(f"  {issue}" for issue in excinfo.value.error.issues)
            return f"invalid scenario file {display_path(self.config, self.path)}:\n{issues}"
        if isinstance(excinfo.value, ScenarioFailed):
            from openprogram_sim.report import format_verdict

            verdict = excinfo.value.verdict
            path = relpath(self.config, self.path)
            outcome = verdict.outcome
            # a run that crashed (a BaseException left exec) is the scenario's error
            head = f"scenario {'error' if outcome.crashed else 'failed'}: {self.title}"
            head += f"\n  file: {path}"
            if outcome.crash is not None:
                head += f"\n  the run crashed: {outcome.crash}"
            if outcome.error is not None:
                head += f"\n  exec raised: {outcome.error_text}"
            elif not outcome.started:
                head += "\n  the run did not start: its setup failed"
            else:
                head += f"\n  exec returned: {outcome.result!r}"
            return f"{head}\n\n{format_verdict(verdict)}"
        return super().repr_failure(excinfo, style="short")

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, 0, f"scenario: {self.title}"

    @cached_property
    def location(self) -> tuple[str, int | None, str]:
        return _location(self)


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
        return f"invalid scenario file {display_path(self.config, self.path)}:\n{issues}"

    def reportinfo(self) -> tuple[Path, int | None, str]:
        line = next((i.line for i in self.error.issues if i.line is not None), 1)
        return self.path, line - 1, f"invalid scenario file: {self.path.name}"

    @cached_property
    def location(self) -> tuple[str, int | None, str]:
        return _location(self)


def status_of(report: pytest.TestReport) -> str:
    """A test report's outcome as the HTML report names it."""
    if report.skipped:
        return "skipped"
    return "passed" if report.passed else "failed"
