"""``openprogram-sim distill CASSETTE --scenario FILE`` on a session that ran the user's real
tools (a ``registry:`` and a ``python:`` entry): they come out stubbed with what they
returned in the session (``returns:``, their spec and gates still from the code), so the
file runs as the session went whatever the code does now; an ``@agentic_function`` stays
real (its nested turns are in the cassette); ``--real-tools`` leaves every tool running."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml
from cassette_support import MODELS, set_secrets, with_cassette

from openprogram_sim.cli import main
from openprogram_sim.play import check_outcome, run_scenario, serve_scenario
from openprogram_sim.scenario import load_scenario

TOOLS = '''
from openprogram import Runtime, ToolRegistry, agentic_function, function

registry = ToolRegistry()
NOTES: list[str] = []


@function(registry=registry)
def add_note(text: str) -> str:
    """Save a note.

    Args:
        text: The note.
    """
    NOTES.append(text)
    return f"saved note {len(NOTES)}"


@agentic_function(registry=registry)
def research(topic: str, runtime: Runtime) -> str:
    """Look a topic up: a nested run.

    Args:
        topic: What to look into.
    """
    return str(runtime.exec(f"Look into {topic}.", tools=[]))


@function(registry=ToolRegistry())  # not in the scenario's registry: named by python:
def word_count(text: str) -> int:
    """Count the words of a text.

    Args:
        text: The text.
    """
    return len(text.split())
'''

SCENARIO = """\
scenario: a note, a count and a nested look-up
registry: "{module}:registry"
tools:
  word_count: {{python: "{module}:word_count"}}
exec: {{content: "Note 'buy stamps', count its words, research stamps."}}
model:
  - tool_calls: [{{add_note: {{text: buy stamps}}}}, {{word_count: {{text: buy stamps}}}}]
  - tool_calls: [{{research: {{topic: stamps}}}}]
  - text: "Stamps are sold at the post office."
  - text: "Saved note 1 (2 words); stamps are sold at the post office."
expect:
  result: "Saved note 1 (2 words); stamps are sold at the post office."
  events:
    - tool_execution_end: {{tool_name: add_note, result: saved note 1}}
"""


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, str]:
    """A session with the real tools recorded through Anthropic's adapter: the scenario
    file that names the cassette, the cassette, and the tools' module name."""
    set_secrets(monkeypatch)
    module = f"notes_tools_{uuid.uuid4().hex[:8]}"  # its NOTES start empty in each test
    (tmp_path / f"{module}.py").write_text(TOOLS)
    scripted = tmp_path / "scripted.yaml"
    scripted.write_text(SCENARIO.format(module=module))
    replay = tmp_path / "notes.yaml"
    replay.write_text(
        with_cassette("cassettes/notes.yaml", MODELS["anthropic"], scripted.read_text())
    )
    with serve_scenario(load_scenario(scripted)) as server:
        code = main(["record", str(replay), "--base-url", server.base_url("anthropic")])
    assert code == 0
    return replay, tmp_path / "cassettes" / "notes.yaml", module


def _distill(cassette: Path, scenario: Path, out: Path, *extra: str) -> dict:
    assert (
        main(["distill", str(cassette), "--scenario", str(scenario), "-o", str(out), *extra]) == 0
    )
    return yaml.safe_load(out.read_text())


def test_real_tools_come_out_stubbed_with_what_they_returned(recorded, tmp_path) -> None:
    replay, cassette, module = recorded
    out = tmp_path / "distilled.yaml"
    doc = _distill(cassette, replay, out)
    assert doc["registry"] == f"{module}:registry"
    assert doc["tools"]["word_count"] == {"python": f"{module}:word_count", "returns": "2"}
    assert doc["tools"]["add_note"] == {"python": f"{module}:add_note", "returns": "saved note 1"}
    assert "research" not in doc["tools"]  # agentic: runs its nested turn from the cassette
    header = out.read_text().splitlines()[3]
    assert header == "# Your tools word_count, add_note return what they returned in the session"

    # the note store is no longer empty (the recording added one): a real add_note would now
    # say "saved note 2"; the distilled file still runs as the session went
    distilled = load_scenario(out)
    again = run_scenario(distilled)
    assert check_outcome(again).passed, check_outcome(again).report()
    replayed = run_scenario(load_scenario(replay))
    assert "saved note 2" in str(replayed.error)  # the replay ran the real add_note again
    scripted = run_scenario(load_scenario(tmp_path / "scripted.yaml"))
    assert [r["tools"] for r in again.requests] == [r["tools"] for r in scripted.requests]


def test_real_tools_flag_leaves_them_running(recorded, tmp_path) -> None:
    replay, cassette, module = recorded
    out = tmp_path / "distilled.yaml"
    doc = _distill(cassette, replay, out, "--real-tools")
    assert doc["tools"] == {"word_count": {"python": f"{module}:word_count"}}
    assert "Your tools" not in out.read_text()
    again = run_scenario(load_scenario(out))
    assert again.error is None, again.error
    ends = [e for e in again.trace if e["type"] == "tool_execution_end"]
    assert ends[0]["result"] == "saved note 2"  # the real tool ran again


def test_a_tool_already_stubbed_keeps_its_stub(recorded, tmp_path) -> None:
    replay, cassette, module = recorded
    text = replay.read_text().replace(
        f'word_count: {{python: "{module}:word_count"}}',
        f'word_count: {{python: "{module}:word_count", outcomes: [{{returns: 2}}]}}',
    )
    replay.write_text(text)
    doc = _distill(cassette, replay, tmp_path / "distilled.yaml")
    assert doc["tools"]["word_count"] == {
        "python": f"{module}:word_count",
        "outcomes": [{"returns": 2}],
    }
    assert check_outcome(run_scenario(load_scenario(tmp_path / "distilled.yaml"))).passed


def test_distill_imports_through_the_run_so_stdlib_callables_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``distill --scenario`` imports the scenario's tools as a run does: a tool whose body is
    a standard-library callable is refused with the setting that allows it."""
    from openprogram_sim.cassettes._distill import _real_tools
    from openprogram_sim.errors import ScenarioError

    module = f"shelltools_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        "from subprocess import getoutput\n"
        "shell = {'spec': {'name': 'shell', 'description': 'Run a command.',\n"
        "          'parameters': {'type': 'object', 'properties': {'cmd': {'type': 'string'}}}},\n"
        "         'execute': getoutput}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "shell.yaml"
    path.write_text(
        "scenario: a shell as a tool\n"
        "exec: {content: Hi}\n"
        "tools:\n"
        f'  shell: {{python: "{module}:shell"}}\n'
        "model: [{text: Hello}]\n"
        "expect: {result: Hello}\n"
    )
    with pytest.raises(ScenarioError) as raised:
        _real_tools(load_scenario(path))
    text = str(raised.value)
    assert "subprocess.getoutput" in text
    assert "allow-stdlib-callables" in text
