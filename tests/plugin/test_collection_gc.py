"""While scenario files are collected, the garbage collector makes no collection (the heap
collection builds stays alive, and loading a scenario file leaves no cycles behind); it is
on again, with its thresholds as before, once collection ends, and a session without
scenario paths never sees it off."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

SCENARIO = """\
scenario: one answer
exec: {content: "Hi."}
model:
  - text: hello
"""

CONFTEST = """\
import gc

SEEN = {}


def pytest_collection_finish(session):
    SEEN["collecting"] = gc.get_threshold()
    SEEN["enabled"] = gc.isenabled()


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"while collecting: {SEEN['collecting']} {SEEN['enabled']}")
    terminalreporter.write_line(f"after: {gc.get_threshold()}")
"""

TEST = """\
import gc


def test_thresholds_while_running():
    print("running:", gc.get_threshold(), gc.isenabled())
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "scenarios").mkdir()
    (pytester.path / "scenarios" / "one.yaml").write_text(SCENARIO)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_plain=TEST)
    return pytester


def test_no_collection_while_scenarios_are_collected(project: pytest.Pytester) -> None:
    before = gc.get_threshold()
    result = project.runpytest_inprocess("--openprogram-scenarios", "-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"*running: {before} True", f"while collecting: {before} False"])
    result.stdout.fnmatch_lines([f"after: {before}"])
    assert gc.get_threshold() == before
    assert gc.isenabled()


def test_a_collection_that_fails_turns_the_collector_back_on(project: pytest.Pytester) -> None:
    project.makepyfile(test_broken="raise ImportError('no such thing')")
    result = project.runpytest_inprocess("--openprogram-scenarios")
    result.stdout.fnmatch_lines(["*ImportError*no such thing*"])
    assert gc.isenabled()


def test_loading_a_scenario_file_leaves_no_cycles(tmp_path: Path) -> None:
    from openprogram_sim.scenario import load_scenario

    path = tmp_path / "one.yaml"
    path.write_text(SCENARIO)
    load_scenario(path)  # the harness imported, its caches filled
    gc.collect()
    gc.disable()
    try:
        load_scenario(path)
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_a_session_without_scenario_paths_keeps_the_thresholds(
    project: pytest.Pytester,
) -> None:
    before = gc.get_threshold()
    result = project.runpytest_inprocess("-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*running: {before} True", f"while collecting: {before} True"])
    assert gc.get_threshold() == before
