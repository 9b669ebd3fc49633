"""While scenario files are collected, the garbage collector makes no full collection (the
heap collection builds stays alive); its thresholds are as before once collection ends, and
a session without scenario paths never sees them changed."""

from __future__ import annotations

import gc

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
    print("running:", gc.get_threshold())
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "scenarios").mkdir()
    (pytester.path / "scenarios" / "one.yaml").write_text(SCENARIO)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_plain=TEST)
    return pytester


def test_no_full_collection_while_scenarios_are_collected(project: pytest.Pytester) -> None:
    before = gc.get_threshold()
    result = project.runpytest_inprocess("--openprogram-scenarios", "-s")
    result.assert_outcomes(passed=2)
    young = f"({before[0]}, {before[1]}, {1 << 30}) True"
    result.stdout.fnmatch_lines([f"*running: {before}", f"while collecting: {young}"])
    result.stdout.fnmatch_lines([f"after: {before}"])
    assert gc.get_threshold() == before


def test_a_session_without_scenario_paths_keeps_the_thresholds(
    project: pytest.Pytester,
) -> None:
    before = gc.get_threshold()
    result = project.runpytest_inprocess("-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*running: {before}", f"while collecting: {before} True"])
    assert gc.get_threshold() == before
