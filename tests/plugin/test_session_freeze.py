"""What collecting scenario files built is frozen (``gc.freeze``) while the items run, so no
full collection scans it again (the summary's included), and unfrozen as the session is
unconfigured (pytest's collections for unraisable exceptions see every object, as without
it, garbage left at collection too): afterwards the process's collector is as it was, and a
session without scenario paths never freezes anything. Hypothesis, when its plugin is on,
is imported before the freeze (its check for a referrer sees every object)."""

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


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"frozen at the summary: {gc.get_freeze_count() > 0}")
"""

TEST = """\
import gc


def test_frozen_while_running():
    print("frozen while running:", gc.get_freeze_count() > 0)
"""

LEAK = """\
import gc


class Boom:
    def __del__(self):
        raise RuntimeError("boom in __del__")


def test_leaves_a_cycle():
    a = Boom()
    a.self = a  # garbage once the test returns, freed by a collection
    del a
"""


LEAK_AT_IMPORT = """\
class Boom:
    def __del__(self):
        raise RuntimeError("boom in __del__ at import")


a = Boom()
a.self = a  # garbage from collection on (the module's import): frozen with the heap
del a


def test_nothing():
    pass
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "scenarios").mkdir()
    (pytester.path / "scenarios" / "one.yaml").write_text(SCENARIO)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_plain=TEST)
    return pytester


def test_the_collected_heap_is_frozen_until_the_session_ends(project: pytest.Pytester) -> None:
    before = gc.get_freeze_count()
    result = project.runpytest_inprocess("--openprogram-scenarios", "-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*frozen while running: True*", "frozen at the summary: True"])
    assert gc.get_freeze_count() == before == 0


def test_a_session_without_scenario_paths_freezes_nothing(project: pytest.Pytester) -> None:
    result = project.runpytest_inprocess("-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*frozen while running: False*", "frozen at the summary: False"])
    assert gc.get_freeze_count() == 0


def test_an_unraisable_exception_of_a_test_is_still_reported(project: pytest.Pytester) -> None:
    project.makepyfile(test_leak=LEAK)
    for args in ((), ("--openprogram-scenarios",)):  # as in a session without the freeze
        result = project.runpytest_subprocess(*args)
        said = result.stdout.str() + result.stderr.str()
        assert "PytestUnraisableExceptionWarning" in said and "boom in __del__" in said, said
        assert "HypothesisWarning" not in said  # its check for a referrer sees every object


def test_an_unraisable_exception_of_garbage_left_at_collection_is_still_reported(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_leak_at_import=LEAK_AT_IMPORT)
    for args in ((), ("--openprogram-scenarios",)):  # as in a session without the freeze
        result = project.runpytest_subprocess(*args)
        said = result.stdout.str() + result.stderr.str()
        assert "PytestUnraisableExceptionWarning" in said, said
        assert "boom in __del__ at import" in said, said
