"""A scenario item's ``location`` (what pytest's reports, warnings and ``-v`` lines give as
the file) is its path relative to the root path, as pytest computes it for any item, for a
valid scenario file and an invalid one."""

from __future__ import annotations

import pytest
from _pytest.pathlib import bestrelpath

SCENARIO = """\
scenario: one answer
exec: {content: "Hi."}
model:
  - text: hello
"""

CONFTEST = """\
from _pytest.pathlib import bestrelpath


def pytest_collection_finish(session):
    for item in session.items:
        path, line, title = item.reportinfo()
        expected = bestrelpath(session.config.rootpath, path)
        print("location:", item.location, item.location == (expected, line, title))
"""


def test_a_scenario_items_location_is_relative_to_the_root(pytester: pytest.Pytester) -> None:
    (pytester.path / "scenarios" / "deep").mkdir(parents=True)
    (pytester.path / "scenarios" / "deep" / "one.yaml").write_text(SCENARIO)
    (pytester.path / "scenarios" / "broken.yaml").write_text("scenario: [\n")
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest_inprocess(
        "--openprogram-scenarios", "-s", "--junitxml=out.xml", "-o", "junit_family=xunit1"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines_random(
        [
            "location: ('scenarios/broken.yaml', *, 'invalid scenario file: broken.yaml') True",
            "location: ('scenarios/deep/one.yaml', 0, 'scenario: one answer') True",
        ]
    )
    xml = (pytester.path / "out.xml").read_text()
    assert 'file="scenarios/deep/one.yaml"' in xml


def test_a_scenario_outside_the_root_keeps_pytests_relative_path(
    pytester: pytest.Pytester,
) -> None:
    inner = pytester.path / "project"
    inner.mkdir()
    (inner / "pytest.ini").write_text("[pytest]\n")
    (pytester.path / "elsewhere").mkdir()
    (pytester.path / "elsewhere" / "one.yaml").write_text(SCENARIO)
    (inner / "conftest.py").write_text(CONFTEST)
    result = pytester.runpytest_inprocess(
        "--openprogram-scenarios", "elsewhere", "-s", "-c", str(inner / "pytest.ini"),
        "--rootdir", str(inner), "-p", "no:cacheprovider",
    )  # fmt: skip
    expected = bestrelpath(inner, pytester.path / "elsewhere" / "one.yaml")
    result.stdout.fnmatch_lines([f"location: ('{expected}', 0, 'scenario: one answer') True"])
