"""``fixtures:`` under pytest: a scenario item requests the fixtures it names like any test
(set up before the run, torn down after, their values given to ``setup:`` parameters of the
same names), and ``setup:`` failures read as the scenario's."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

NOTES = '''
from openprogram import ToolRegistry, function

registry = ToolRegistry()
NOTES: dict[str, str] = {}
LOG: list[str] = []


def seed(fresh_notes) -> None:
    LOG.append(f"seed with {sorted(fresh_notes)}")
    NOTES.update(fresh_notes)


def broken() -> None:
    raise RuntimeError("database is locked")


@function(registry=registry)
def save_note(title: str) -> str:
    """Save a note."""
    if title in NOTES:
        return f"{title!r} exists already"
    NOTES[title] = ""
    return f"saved {title!r}"
'''

CONFTEST = """
import pytest

import scenario_notes


@pytest.fixture
def fresh_notes():
    scenario_notes.LOG.append("fixture set up")
    scenario_notes.NOTES.clear()
    yield {"eggs": ""}
    scenario_notes.LOG.append(f"fixture torn down after {sorted(scenario_notes.NOTES)}")
"""

SAVE = (Path(__file__).parent / "data" / "save_note_with_fixture.yaml").read_text(encoding="utf-8")
"""A scenario (titled ``TITLE``) that saves a note with the fixture ``fresh_notes``."""


@pytest.fixture
def notes_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(scenario_notes=NOTES)
    pytester.makeconftest(CONFTEST)
    pytester.syspathinsert()
    (pytester.path / "scenarios").mkdir()
    for title in ("first", "second"):
        (pytester.path / "scenarios" / f"{title}.yaml").write_text(SAVE.replace("TITLE", title))
    return pytester


def test_each_scenario_requests_its_fixtures_so_module_state_is_fresh_per_item(
    notes_project: pytest.Pytester,
) -> None:
    notes_project.makepyfile(
        test_log=textwrap.dedent(
            """\
            import scenario_notes

            def test_zz_log():
                assert scenario_notes.LOG == [
                    "fixture set up", "fixture torn down after ['milk']",
                    "fixture set up", "fixture torn down after ['milk']",
                ]
            """
        )
    )
    result = notes_project.runpytest_inprocess(
        "--openprogram-scenarios", "scenarios", "test_log.py", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=3)


def test_without_the_fixture_the_second_scenario_fails(notes_project: pytest.Pytester) -> None:
    for title in ("first", "second"):
        path = notes_project.path / "scenarios" / f"{title}.yaml"
        path.write_text(path.read_text().replace("fixtures: [fresh_notes]\n", ""))
    result = notes_project.runpytest_inprocess("--openprogram-scenarios", "scenarios")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*-> ok: \"'milk' exists already\"*"])


def test_a_setup_parameter_named_like_a_fixture_gets_its_value(
    notes_project: pytest.Pytester,
) -> None:
    path = notes_project.path / "scenarios" / "first.yaml"
    path.write_text(
        'setup: "scenario_notes:seed"\n'
        + SAVE.replace("TITLE", "first")
        .replace("Save milk.", "Save eggs.")
        .replace("title: milk", "title: eggs")
        .replace("\"saved 'milk'\"", "\"'eggs' exists already\"")
    )
    result = notes_project.runpytest_inprocess("--openprogram-scenarios", "scenarios/first.yaml")
    result.assert_outcomes(passed=1)


def test_an_unknown_fixture_is_pytest_s_fixture_error(notes_project: pytest.Pytester) -> None:
    path = notes_project.path / "scenarios" / "first.yaml"
    path.write_text(path.read_text().replace("[fresh_notes]", "[fresh_notez]"))
    result = notes_project.runpytest_inprocess("--openprogram-scenarios", "scenarios/first.yaml")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "scenarios/first.yaml:2: (fixtures[0]) no fixture 'fresh_notez' is visible here; "
            "did you mean 'fresh_notes'? (`pytest --fixtures` lists them)"
        ]
    )
    assert "source code not available" not in result.stdout.str()


def test_a_setup_failure_is_the_scenario_s_failure_with_the_user_s_traceback(
    notes_project: pytest.Pytester,
) -> None:
    path = notes_project.path / "scenarios" / "first.yaml"
    path.write_text('setup: "scenario_notes:broken"\n' + SAVE.replace("TITLE", "first"))
    result = notes_project.runpytest_inprocess("--openprogram-scenarios", "scenarios/first.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "scenario failed: first",
            "  file: scenarios/first.yaml",
            "  the run did not start: its setup failed",
            "- setup 'scenario_notes:broken' raised RuntimeError: database is locked",
            "  at scenarios/first.yaml:1",
            "  Traceback (most recent call last):",
            '    File "*scenario_notes.py", line 14, in broken',
            "  RuntimeError: database is locked",
        ]
    )
    # no frame of ours in the traceback (pytest may still name the package in a warning
    # that it was imported before the inner session could rewrite it)
    assert "openprogram_sim/" not in result.stdout.str()


FOLDER_CONFTEST = """
import pytest


@pytest.fixture(autouse=True)
def {name}_autouse(request):
    print("autouse {name} for", request.node.name)


@pytest.fixture
def {name}_value():
    print("value {name}")
    return 1
"""

PLAIN = """\
scenario: {title}
exec: {{content: "Hi."}}
model:
  - text: hello
"""


def test_each_item_gets_the_fixtures_of_its_own_folder_and_its_own_list(
    pytester: pytest.Pytester,
) -> None:
    """Items of one folder that name the same fixtures share their closure; one that names
    another, or sits in another folder (with its own autouse fixture), gets its own."""
    for folder in ("a", "b"):
        (pytester.path / "scenarios" / folder).mkdir(parents=True)
        (pytester.path / "scenarios" / folder / "conftest.py").write_text(
            FOLDER_CONFTEST.format(name=folder)
        )
    a = pytester.path / "scenarios" / "a"
    (a / "one.yaml").write_text(PLAIN.format(title="a one"))
    (a / "two.yaml").write_text(PLAIN.format(title="a two"))
    (a / "three.yaml").write_text(PLAIN.format(title="a three") + "fixtures: [a_value]\n")
    (pytester.path / "scenarios" / "b" / "four.yaml").write_text(PLAIN.format(title="b four"))
    (pytester.path / "scenarios" / "b" / "five.yaml").write_text(
        PLAIN.format(title="b five") + "fixtures: [a_value]\n"
    )
    result = pytester.runpytest_inprocess("--openprogram-scenarios", "-s", "-p", "no:randomly")
    result.assert_outcomes(passed=4, errors=1)
    out = result.stdout.str()
    for title in ("a one", "a two", "a three"):
        assert f"autouse a for {title}" in out
        assert f"autouse b for {title}" not in out
    assert "autouse b for b four" in out and "autouse a for b four" not in out
    assert out.count("value a") == 1  # a three's, not a one's or a two's
    result.stdout.fnmatch_lines(["*no fixture 'a_value' is visible here*"])  # b five's
