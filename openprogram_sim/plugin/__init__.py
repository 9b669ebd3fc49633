"""The pytest plugin (entry point ``pytest11: openprogram``).

Options (group ``openprogram``)::

    --openprogram-scenarios [PATHS]   collect every scenario file under PATHS (default:
                                      scenarios/) as a test item; tags become markers
    --openprogram-report PATH         write one self-contained HTML report
    --openprogram-trace-out DIR       write each scenario run's trace to DIR (JSON), and
                                      with --openprogram-otel its GenAI spans (OTLP JSON)
    --openprogram-coverage            print which loop behaviours the scenarios exercise
                                      and assert (the catalogue: docs/coverage.md)
    --openprogram-coverage-json PATH  write that coverage as JSON
    --openprogram-coverage-fail-under N, --openprogram-coverage-require ID,...
                                      fail the session below a floor of behaviours
    --openprogram-coverage-source PKG measure your tool code with coverage.py, one
                                      context per scenario (--openprogram-coverage-data)
    --openprogram-record-mode MODE    none (default, and always when CI is set), once,
                                      new_episodes or all, for openprogram_cassette
    --openprogram-eval PROVIDER:MODEL run the scenario items as evals against a real
                                      model, --openprogram-samples N each (10), with
                                      --openprogram-threshold P, --openprogram-confidence C,
                                      --openprogram-base-url URL, --openprogram-eval-out DIR,
                                      --openprogram-eval-timeout S, --openprogram-no-early-stop,
                                      --openprogram-concurrency K, --openprogram-max-retries N,
                                      --openprogram-budget USD, --openprogram-pricing FILE

Each scenario file is one item (``path/to/file.yaml::<title>``); a failing one shows the
verdict's diff, an invalid one its ``file:line`` errors. Scenario items carry JUnit
properties (``model_calls``, ``tool_calls``, ``errors``, ``end_reason``, ``max_depth``,
``rounds``). Under ``--openprogram-eval`` each is an eval item (``_eval``): its verdict the
sequential test's, its properties the rates (``openprogram.eval.*``), and the report the
eval view.

Fixtures for Python tests: ``openprogram_model`` (a scripted-model factory),
``openprogram_trace`` (a trace recorder to subscribe), ``openprogram_scenario`` (runs a
scenario and asserts its verdict), ``openprogram_serve`` (serves a scenario over loopback
HTTP to any client) and ``openprogram_assert_events``. A test that used them appears in
the report with its traces. Records travel to the pytest-xdist controller on the test
reports, so ``-n`` runs write one report.

``openprogram_cassette`` (with the ``openprogram_cassette`` marker naming its file, and the
overridable ``openprogram_cassette_config``) records and replays every ``httpx``/``httpx2``
client of a test (see :mod:`openprogram_sim.cassettes`).

The hooks are here; each part has its module: options (``_options``), scenario items
(``_items``), fixtures (``_fixtures``, their objects in ``_objects``), cassettes
(``_cassettes``), traces out (``_trace_out``), behaviour coverage (``_coverage``), fuzz
chunks (``_fuzz``), evals (``_eval``) and the report's records under xdist (``_xdist``).
Only pytest and the standard library are imported at start-up; the harness is imported
when a scenario or fixture is used.
"""

from __future__ import annotations

import gc
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from openprogram_sim.plugin._cassettes import openprogram_cassette, openprogram_cassette_config
from openprogram_sim.plugin._eval import (
    EVAL_ATTR,
    EVAL_OPTIONS,
    EvalFailed,
    EvalItem,
    eval_options,
    headline,
)
from openprogram_sim.plugin._fixtures import (
    openprogram_assert_events,
    openprogram_model,
    openprogram_scenario,
    openprogram_serve,
    openprogram_trace,
)
from openprogram_sim.plugin._items import (
    STATE,
    SUFFIXES,
    InvalidScenarioItem,
    ScenarioFailed,
    ScenarioFile,
    ScenarioItem,
    State,
    display_path,
)
from openprogram_sim.plugin._trace_out import configure as configure_trace_out
from openprogram_sim.plugin._xdist import COVERAGE, REPORT_ATTR, Collector, record_for

if TYPE_CHECKING:
    from openprogram_sim.plugin._objects import ModelFactory, ScenarioRunner

__all__ = [
    "REPORT_ATTR",
    "EvalFailed",
    "EvalItem",
    "InvalidScenarioItem",
    "ModelFactory",
    "ScenarioFailed",
    "ScenarioFile",
    "ScenarioItem",
    "ScenarioRunner",
    "openprogram_assert_events",
    "openprogram_cassette",
    "openprogram_cassette_config",
    "openprogram_model",
    "openprogram_scenario",
    "openprogram_serve",
    "openprogram_trace",
]


def __getattr__(name: str) -> Any:
    # The fixture types load with the harness, not at pytest start-up.
    if name in ("ModelFactory", "ScenarioRunner"):
        from openprogram_sim.plugin import _objects

        return getattr(_objects, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_COLLECTOR = pytest.StashKey[Collector]()


# --------------------------------------------------------------------------- options


def pytest_addoption(parser: pytest.Parser) -> None:
    from openprogram_sim.plugin._options import add_options

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


def pytest_configure(config: pytest.Config) -> None:
    state = State(config)
    config.stash[STATE] = state
    collector = config.stash[_COLLECTOR] = Collector(state)
    config.pluginmanager.register(collector, "openprogram-collector")
    configure_trace_out(config)
    config.addinivalue_line(
        "markers", "openprogram_scenario: a test item collected from a scenario file"
    )
    config.addinivalue_line(
        "markers",
        "openprogram_cassette(path=None, **options): the openprogram_cassette fixture's "
        "file (relative to the test file) and Cassette options",
    )
    if any(_given(config.getoption(name, None)) for name in _COVERAGE_OPTIONS):
        from openprogram_sim.plugin._coverage import CoverageHooks

        hooks = config.stash[COVERAGE] = CoverageHooks(config)
        config.pluginmanager.register(hooks, "openprogram-coverage")
        hooks.start()
    if config.getoption("openprogram_fuzz", None) is not None:
        config.addinivalue_line("markers", "openprogram_fuzz: a chunk of a fuzz campaign")
        from openprogram_sim.plugin._fuzz import FuzzHooks

        config.pluginmanager.register(FuzzHooks(config), "openprogram-fuzz")
    paths = config.getoption("openprogram_scenarios", None)
    options = eval_options(config)
    if options is not None:
        config.stash[EVAL_OPTIONS] = options
        state.item_class = EvalItem
        if paths is None:  # an eval runs the scenario items: scenarios/ unless told
            paths = []
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
    if real == file_path:  # most files: keep one path object a file, not two
        real = file_path
    if real in state.collected or not state.owns(real):
        return None
    state.collected.add(real)
    if real not in state.roots:  # a file named explicitly is taken as given
        from openprogram_sim.scenario import not_a_scenario

        reason = not_a_scenario(file_path)  # a cassette beside its scenarios: left alone
        if reason is not None:
            state.skipped.append((file_path, reason))
            return None
    state.resolved[file_path] = real
    file: ScenarioFile = ScenarioFile.from_parent(parent, path=file_path)
    return file


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, object, object]:
    """With scenario paths, no garbage collection while the files are collected: loading
    them (and the harness, with the first) builds a large heap that stays alive, and every
    collection while it grew scanned what it had added again (each young collection the
    objects it held, which all survived; each full one all of it: six in a 1,200-item
    session, about 0.5 s; the young ones about 0.1 s more). Loading a scenario file leaves
    no cycles behind (the objects it drops are freed as they are dropped), so what the
    collector would have found meanwhile is only what other collectors leave (a Python test
    module's import): kept until the session is unconfigured, when the heap is unfrozen
    (below) and pytest's collection there frees it."""
    state = session.config.stash.get(STATE, None)
    if state is None or not state.roots or not gc.isenabled():
        return (yield)
    _import_hypothesis(session.config)
    gc.disable()
    try:
        return (yield)
    finally:
        # What collection built (the harness, the items) lives while the items run: frozen,
        # the collections that come meanwhile do not scan it again (each full one scanned
        # it all), the summary's included. Unfrozen as the session is unconfigured (see
        # _unfreeze), so pytest's collections for unraisable exceptions see the whole heap,
        # as without the freeze. Frozen before the collector is on again, so no young
        # collection scans it either.
        gc.freeze()
        state.frozen = True
        gc.enable()


def _import_hypothesis(config: pytest.Config) -> None:
    """Hypothesis, imported as scenario files start to be collected when its pytest plugin
    is on (its summary imports it in every session) and nothing imported it yet. Its import
    runs a full garbage collection (``register_random``'s check for a referrer, for each
    random it registers) and looks for referrers among the objects the collector sees
    (not the frozen ones): at the summary that scanned the whole heap of the session's
    items (about 0.15 ms an item of a 1,200-item session), and would have missed the frozen
    heap's referrers (a false ``HypothesisWarning``); here it scans what pytest's
    start-up built, and the summary imports nothing."""
    import contextlib
    import sys

    if "hypothesis.internal.observability" in sys.modules:
        return
    if not config.pluginmanager.has_plugin("hypothesispytest"):
        return
    # an installation that fails to import is the summary's to report, as before
    with contextlib.suppress(Exception):
        import hypothesis.internal.observability  # noqa: F401  (what the summary imports)


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    """Under ``-v``, the files under the scenario paths left alone (cassettes)."""
    state = config.stash.get(STATE, None)
    if state is None or not state.skipped or config.option.verbose < 1:
        return []
    count = len(state.skipped)
    lines = [f"openprogram: left alone {count} file{'s' if count != 1 else ''} under the "
             "scenario paths that are not scenarios:"]  # fmt: skip
    lines += [f"  {display_path(config, path)}: {reason}" for path, reason in state.skipped]
    return lines


# --------------------------------------------------------------------------- records


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    if item.config.getoption("openprogram_report", None):
        record = record_for(item, report)  # records only feed the HTML report
        if record is not None:
            setattr(report, REPORT_ATTR, record)
    if report.when == "call" and isinstance(item, EvalItem):
        said = headline(item)
        if said is not None:
            setattr(report, EVAL_ATTR, said)
    if report.when == "call" and isinstance(item, ScenarioItem):
        # reported: the scenario and its run need not stay alive to the session's end (a
        # large heap makes every later full garbage collection, and pytest's at exit, slow)
        item.verdict = None
        item.scenario = None
        if isinstance(item, EvalItem):
            item.result = None
    return report


def _unfreeze(config: pytest.Config) -> None:
    """The heap frozen after collection goes back to the collector as the session is
    unconfigured (this plugin's ``pytest_unconfigure`` runs first), before pytest's own
    full collection for unraisable exceptions there and the one at its cleanup: those see
    every object, free what became garbage and report its unraisable exceptions, as without
    the freeze. Until then (the summary included) no collection scans the frozen heap: the
    one that importing Hypothesis for its summary set off scanned all of it (about 0.1 ms
    an item of a 1,200-item session)."""
    state = config.stash.get(STATE, None)
    if state is not None and state.frozen:
        gc.unfreeze()
        state.frozen = False


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    _unfreeze(config)
    collector = config.stash.get(_COLLECTOR, None)
    if collector is not None:
        config.pluginmanager.unregister(collector)
    coverage = config.stash.get(COVERAGE, None)
    if coverage is not None:
        config.pluginmanager.unregister(coverage)


for _cls in (EvalFailed, EvalItem, InvalidScenarioItem, ScenarioFailed, ScenarioFile, ScenarioItem):
    _cls.__module__ = __name__  # the public module users see in reprs
del _cls
