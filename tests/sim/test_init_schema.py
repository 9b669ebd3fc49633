"""``openprogram-sim init``: the starter's ``# yaml-language-server: $schema=`` line points at a
file that exists in the user's project. The YAML language server reads a relative ``$schema``
from the folder of the YAML file, so ``init -o FILE`` writes the JSON Schema (the text
``openprogram-sim schema`` prints) into the project and points the line at it from FILE."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from _support import run_cli

TOOLS = '''\
from openprogram import function


@function
def search_notes(query: str) -> str:
    """Search the notes.

    Args:
        query: Words to look for.
    """
    return "a note"
'''

SCHEMA = "schema/scenario.schema.json"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "notes_tools.py").write_text(TOOLS)
    return tmp_path


def modeline(path: Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    prefix = "# yaml-language-server: $schema="
    assert first.startswith(prefix), first
    return first.removeprefix(prefix)


def test_init_writes_the_schema_its_first_line_points_at(project: Path) -> None:
    result = run_cli("init", "notes_tools", "-o", "scenarios/starter.yaml", cwd=project)
    assert result.returncode == 0, result.stderr
    starter = project / "scenarios" / "starter.yaml"
    assert modeline(starter) == "../schema/scenario.schema.json"
    resolved = (starter.parent / modeline(starter)).resolve()
    assert resolved == (project / SCHEMA).resolve() and resolved.is_file()
    assert resolved.read_text(encoding="utf-8") == run_cli("schema").stdout
    assert result.stderr.splitlines() == [
        "openprogram-sim init: wrote scenarios/starter.yaml",
        f"openprogram-sim init: wrote {SCHEMA}, the JSON Schema your editor reads (the first "
        "line of scenarios/starter.yaml points at it)",
    ]
    schema = json.loads(resolved.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(yaml.safe_load(starter.read_text()))
    assert run_cli("run", "scenarios", cwd=project).returncode == 0


def test_a_deeper_file_points_further_up_and_the_schema_is_written_once(project: Path) -> None:
    run_cli("init", "notes_tools", "-o", "scenarios/starter.yaml", cwd=project)
    again = run_cli("init", "notes_tools", "-o", "scenarios/notes/deep.yaml", cwd=project)
    assert again.returncode == 0, again.stderr
    assert modeline(project / "scenarios/notes/deep.yaml") == "../../schema/scenario.schema.json"
    assert again.stderr.splitlines() == ["openprogram-sim init: wrote scenarios/notes/deep.yaml"]


def test_an_outdated_schema_is_updated_and_another_file_is_kept(project: Path) -> None:
    (project / "schema").mkdir()
    (project / SCHEMA).write_text('{"title": "openprogram scenario", "properties": {}}\n')
    updated = run_cli("init", "notes_tools", "-o", "a.yaml", cwd=project)
    assert updated.returncode == 0
    assert f"openprogram-sim init: updated {SCHEMA}" in updated.stderr
    assert modeline(project / "a.yaml") == SCHEMA
    assert (project / SCHEMA).read_text() == run_cli("schema").stdout

    (project / "mine.json").write_text('{"title": "something of mine"}\n')
    kept = run_cli("init", "notes_tools", "-o", "b.yaml", "--schema", "mine.json", cwd=project)
    assert kept.returncode == 2
    assert kept.stderr == (
        "openprogram-sim init: mine.json exists and is not the JSON Schema of scenario files; "
        "pass --schema PATH to put the schema elsewhere\n"
    )
    assert (project / "mine.json").read_text() == '{"title": "something of mine"}\n'
    assert not (project / "b.yaml").exists()


def test_a_url_is_used_as_given_and_nothing_else_is_written(project: Path) -> None:
    url = "https://example.org/scenario.schema.json"
    result = run_cli("init", "notes_tools", "-o", "s/a.yaml", "--schema", url, cwd=project)
    assert result.returncode == 0
    assert modeline(project / "s/a.yaml") == url
    assert not (project / "schema").exists()


def test_printed_to_stdout_it_says_where_the_line_expects_the_schema(project: Path) -> None:
    result = run_cli("init", "notes_tools", cwd=project)
    assert result.returncode == 0
    assert result.stdout.splitlines()[0] == f"# yaml-language-server: $schema={SCHEMA}"
    assert result.stderr == (
        "openprogram-sim init: the $schema line is right for a file saved in the current "
        f"directory, with {SCHEMA} written by `openprogram-sim schema -o {SCHEMA}`; with -o "
        "FILE, init writes both\n"
    )
    assert not (project / "schema").exists()
