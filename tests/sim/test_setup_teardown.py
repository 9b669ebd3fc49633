"""``setup:``/``teardown:``: the user's callables around each run (sync or async, teardown
even when the run fails), imported when the run starts, their failures the scenario's with
the traceback trimmed to the user's frames; ``fixtures:`` outside pytest fails, named."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support import run_cli

from openprogram_sim import ScenarioError, check_outcome, load_scenario, run_scenario

NOTES = '''
from openprogram import ToolRegistry, function

registry = ToolRegistry()
NOTES: dict[str, str] = {}
CALLS: list[str] = []


def reset() -> None:
    CALLS.append("reset")
    NOTES.clear()


async def areset() -> None:
    CALLS.append("areset")
    NOTES.clear()


def record_end() -> None:
    CALLS.append("teardown")


def broken() -> None:
    helper()


def helper() -> None:
    raise RuntimeError("database is locked")


def needs_db(db) -> None:
    pass


@function(registry=registry)
def save_note(title: str) -> str:
    """Save a note."""
    CALLS.append(f"save {title}")
    if title in NOTES:
        return f"{title!r} exists already"
    NOTES[title] = ""
    return f"saved {title!r}"
'''

SAVE = """\
scenario: SAVE
tools:
  save_note: {python: "MOD:save_note"}
exec: {content: "Save milk."}
model:
  - tool_calls: [{save_note: {title: milk}}]
  - text: "Saved."
expect:
  events:
    - tool_execution_end: {tool_name: save_note, result: "saved 'milk'"}
"""


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    name = f"notes_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(NOTES)
    yield tmp_path, name
    sys.modules.pop(name, None)


def write(project: tuple[Path, str], file: str, text: str) -> Path:
    folder, name = project
    path = folder / file
    path.write_text(textwrap.dedent(text).replace("MOD", name))
    return path


def module(project: tuple[Path, str]) -> object:
    return sys.modules[project[1]]


def test_module_state_leaks_between_runs_and_setup_resets_it(project: tuple[Path, str]) -> None:
    leaky = load_scenario(write(project, "leaky.yaml", SAVE))
    assert check_outcome(run_scenario(leaky)).passed
    second = check_outcome(run_scenario(leaky))  # the note is still in the module's dict
    assert [f.title for f in second.failures] == ["events (ordered) did not match"]

    fixed = load_scenario(
        write(project, "fixed.yaml", 'setup: ["MOD:reset", "MOD:areset"]\n' + SAVE)
    )
    for _ in range(2):
        verdict = check_outcome(run_scenario(fixed))
        assert verdict.passed, verdict.report()
    calls = module(project).CALLS  # type: ignore[attr-defined]
    assert calls[-6:] == ["reset", "areset", "save milk", "reset", "areset", "save milk"]


def test_teardown_runs_after_a_run_that_fails(project: tuple[Path, str]) -> None:
    text = 'setup: "MOD:reset"\nteardown: "MOD:record_end"\n' + SAVE.replace(
        "saved 'milk'", "something else"
    )
    verdict = check_outcome(run_scenario(load_scenario(write(project, "t.yaml", text))))
    assert [f.title for f in verdict.failures] == ["events (ordered) did not match"]
    calls = module(project).CALLS  # type: ignore[attr-defined]
    assert calls == ["reset", "save milk", "teardown"]


def test_a_setup_that_raises_fails_the_scenario_with_the_user_s_frames_only(
    project: tuple[Path, str],
) -> None:
    path = write(project, "s.yaml", 'setup: "MOD:broken"\nteardown: "MOD:record_end"\n' + SAVE)
    outcome = run_scenario(load_scenario(path))
    assert outcome.trace == [] and outcome.model_calls == 0 and not outcome.started
    verdict = check_outcome(outcome)
    (failure,) = verdict.failures  # the run never started: nothing else is checked
    folder, name = project
    assert failure.title == f"setup '{name}:broken' raised RuntimeError: database is locked"
    assert failure.where == f"{path}:1"
    lines = NOTES.splitlines()
    call, raise_ = (
        lines.index("    helper()") + 1,
        lines.index('    raise RuntimeError("database is locked")') + 1,
    )
    assert failure.detail == (
        "Traceback (most recent call last):\n"
        f'  File "{folder / name}.py", line {call}, in broken\n'
        "    helper()\n"
        f'  File "{folder / name}.py", line {raise_}, in helper\n'
        '    raise RuntimeError("database is locked")\n'
        "RuntimeError: database is locked"
    )
    assert module(project).CALLS == []  # type: ignore[attr-defined]  # no teardown either


def test_teardown_failures_are_each_reported_with_their_line(project: tuple[Path, str]) -> None:
    text = 'teardown: ["MOD:nope", "MOD:NOTES", "MOD:needs_db", "MOD:record_end"]\n' + SAVE
    path = write(project, "t.yaml", text)
    verdict = check_outcome(run_scenario(load_scenario(path)))
    _, name = project
    assert [(f.title, f.where) for f in verdict.failures] == [
        (
            f"teardown '{name}:nope' could not be imported: module '{name}' has no attribute "
            f"'nope' (for '{name}:nope')",
            f"{path}:1",
        ),
        (f"teardown '{name}:NOTES' is a dict, not a callable", f"{path}:1"),
        (
            f"teardown '{name}:needs_db' takes a parameter 'db' that no fixture of the scenario "
            "provides (fixtures: none); name a fixture it needs in fixtures: (under pytest), or "
            "give the parameter a default",
            f"{path}:1",
        ),
    ]
    assert module(project).CALLS[-1] == "teardown"  # type: ignore[attr-defined]


def test_setup_is_imported_when_the_run_starts_not_when_the_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        'scenario: s\nsetup: "no_such_module_anywhere:reset"\nexec: {content: go}\n'
        "model: [{text: hi}]\n"
    )
    scenario = load_scenario(path)  # loads: nothing is imported yet
    (failure,) = check_outcome(run_scenario(scenario)).failures
    assert failure.title.startswith(
        "setup 'no_such_module_anywhere:reset' could not be imported: cannot import module "
        "'no_such_module_anywhere'"
    )
    assert failure.where == f"{path}:2"


def test_references_and_fixture_names_are_checked_at_load() -> None:
    from openprogram_sim import parse_scenario

    with pytest.raises(ScenarioError) as info:
        parse_scenario(
            'scenario: s\nsetup: "reset"\nteardown: ["a.b:c", "not a ref"]\n'
            'fixtures: [fresh_notes, "bad-name"]\nexec: {content: go}\nmodel: [{text: hi}]\n',
            "bad.yaml",
        )
    assert [str(i) for i in info.value.issues] == [
        "bad.yaml:2: (setup) 'reset' is not an import path; write it as 'package.module:name'",
        "bad.yaml:3: (teardown[1]) 'not a ref' is not an import path; write it as "
        "'package.module:name'",
        "bad.yaml:4: (fixtures[1]) 'bad-name' is not a fixture name (a Python identifier)",
    ]


def test_fixtures_outside_pytest_fail_the_scenario_saying_so(project: tuple[Path, str]) -> None:
    path = write(project, "f.yaml", 'fixtures: [fresh_notes]\nsetup: "MOD:reset"\n' + SAVE)
    outcome = run_scenario(load_scenario(path))
    assert not outcome.started and module(project).CALLS == []  # type: ignore[attr-defined]
    (failure,) = check_outcome(outcome).failures
    assert failure.title == (
        "fixtures: [fresh_notes] are pytest fixtures; run this scenario under pytest (pytest "
        "--openprogram-scenarios PATH), or drop fixtures: and reset state in setup:"
    )
    assert failure.where == f"{path}:1"


def test_the_cli_runs_setup_and_reports_its_failure(project: tuple[Path, str]) -> None:
    folder, name = project
    write(project, "good.yaml", 'setup: "MOD:reset"\n' + SAVE.replace("SAVE", "good"))
    write(project, "again.yaml", 'setup: "MOD:reset"\n' + SAVE.replace("SAVE", "again"))
    write(project, "bad.yaml", 'setup: "MOD:broken"\n' + SAVE.replace("SAVE", "bad"))
    result = run_cli("run", str(folder))
    assert result.returncode == 1
    out = result.stdout
    assert "3 scenarios: 2 passed, 1 error" in out  # a setup's failure is an error, as in pytest
    assert "ERROR " in out and "bad.yaml" in out
    assert f"- setup '{name}:broken' raised RuntimeError: database is locked" in out
    assert "openprogram_sim" not in out.split("ERROR: ")[1]  # the traceback is the user's
