"""Scenario files that name the user's own Python: where it is imported from (when the run
starts: loading imports nothing), what a bad reference says, and that a run neither leaks
environment nor changes the user's registry."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from openprogram_sim import ScenarioError, check_outcome, load_scenario, run_scenario
from openprogram_sim.scenario import resolve_python

PACKAGE = '''
from openprogram import ToolRegistry, function

registry = ToolRegistry()


@function(registry=registry, toolset="maths")
def double(n: int) -> int:
    """Double a number."""
    return n * 2


@function(registry=registry, requires_env="SECRET_SWITCH")
def switch() -> str:
    """Only offered with SECRET_SWITCH set."""
    import os

    return os.environ["SECRET_SWITCH"]


def broken_import():
    raise RuntimeError("never")
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project whose code lives under src/, named by its pyproject's [tool.openprogram]."""
    name = f"userpkg_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / "src" / name).mkdir(parents=True)
    (tmp_path / "src" / name / "__init__.py").write_text("")
    (tmp_path / "src" / name / "tools.py").write_text(PACKAGE)
    (tmp_path / "src" / name / "bad.py").write_text("import not_a_module_anywhere\n")
    (tmp_path / "pyproject.toml").write_text('[tool.openprogram]\npythonpath = ["src"]\n')
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "NAME").write_text(name)
    yield tmp_path
    for module in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[module]


def scenario(project: Path, body: str) -> Path:
    name = (project / "NAME").read_text()
    path = project / "scenarios" / "case.yaml"
    path.write_text(textwrap.dedent(body).replace("PKG", name))
    return path


def test_real_tools_and_a_registry_copy_per_run(project: Path) -> None:
    path = scenario(
        project,
        """\
        scenario: real
        registry: "PKG.tools:registry"
        env: {SECRET_SWITCH: "on"}
        tools:
          extra: {returns: "simulated"}
        exec: {content: "Go."}
        model:
          - tool_calls: [{double: {n: "21"}}, {switch: {}}, {extra: {}}]
          - text: "Done."
        expect:
          result: "Done."
          events:
            - tool_execution_end: {tool_name: double, result: "42", is_error: false}
            - tool_execution_end: {tool_name: switch, result: "on"}
            - tool_execution_end: {tool_name: extra, result: "simulated"}
          requests:
            - {round: 1, tools: [double, switch, extra]}
        """,
    )
    loaded = load_scenario(path)
    user_registry = resolve_python(loaded)[loaded.registry]
    before = user_registry.names()
    verdict = check_outcome(run_scenario(loaded))
    assert verdict.passed, verdict.report()
    assert user_registry.names() == before == ["double", "switch"]  # not changed by the run
    assert "SECRET_SWITCH" not in os.environ  # restored after the run
    verdict = check_outcome(run_scenario(loaded))  # and the same again
    assert verdict.passed, verdict.report()


def test_a_stubbed_python_tool_keeps_its_spec(project: Path) -> None:
    path = scenario(
        project,
        """\
        scenario: stub
        tools:
          double: {python: "PKG.tools:double", returns: 7}
        exec: {content: "Go.", tools: [double]}
        model:
          - tool_calls: [{double: {n: "x"}}, {double: {n: 2}}]
          - text: "Done."
        expect:
          events:
            - tool_execution_end: {tool_name: double, is_error: true, result: {$regex: "^Valid"}}
            - tool_execution_end: {tool_name: double, is_error: false, result: "7"}
        """,
    )
    verdict = check_outcome(run_scenario(load_scenario(path)))
    assert verdict.passed, verdict.report()


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("PKG.tool:double", "cannot import module 'PKG.tool' for 'PKG.tool:double': "
                            "ModuleNotFoundError: No module named 'PKG.tool'"),
        ("PKG.bad:x", "cannot import module 'PKG.bad' for 'PKG.bad:x': ModuleNotFoundError: "
                      "No module named 'not_a_module_anywhere'"),
        ("PKG.tools:tripple", "module 'PKG.tools' has no attribute 'tripple'"),
        ("PKG.tools:switch", "'PKG.tools:switch' is the tool 'switch'; name it 'switch'"),
        ("PKG.tools", "'PKG.tools' is not a reference: write it as 'package.module:name'"),
        ("PKG.tools:registry", "'PKG.tools:registry' is a ToolRegistry, not a tool: name it "
                               "with `registry:`"),
    ],
)  # fmt: skip
def test_a_bad_reference_names_the_file_line_and_cause(
    project: Path, ref: str, message: str
) -> None:
    name = (project / "NAME").read_text()
    path = scenario(
        project,
        f"""\
        scenario: bad
        tools:
          double: {{python: "{ref}"}}
        exec: {{content: "Go.", tools: [double]}}
        model: [{{text: "Done."}}]
        """,
    )
    with pytest.raises(ScenarioError) as info:
        # how it is written is checked at load; what it names when the run imports it
        run_scenario(load_scenario(path, shown_as="case.yaml"))
    (issue,) = info.value.issues
    assert str(issue).startswith("case.yaml:3: (tools.double.python) ")
    assert message.replace("PKG", name) in str(issue)


def test_names_from_the_registry_are_checked_when_the_run_imports_it(project: Path) -> None:
    path = scenario(
        project,
        """\
        scenario: names
        registry: "PKG.tools:registry"
        exec: {content: "Go.", tools: [double, dubble]}
        model: [{text: "Done."}]
        """,
    )
    loaded = load_scenario(path, shown_as="case.yaml")  # the registry is not imported yet
    with pytest.raises(ScenarioError) as info:
        run_scenario(loaded)
    assert [str(i) for i in info.value.issues] == [
        "case.yaml:3: (exec.tools[1]) exec.tools names tool 'dubble', which is not defined; "
        "did you mean 'double'?"
    ]


def test_without_the_pythonpath_the_import_fails_and_with_it_works(project: Path) -> None:
    (project / "pyproject.toml").unlink()
    path = scenario(
        project,
        """\
        scenario: path
        tools:
          double: {python: "PKG.tools:double"}
        exec: {content: "Go.", tools: [double]}
        model: [{text: "Done."}]
        """,
    )
    with pytest.raises(ScenarioError, match="No module named"):
        run_scenario(load_scenario(path))
    verdict = check_outcome(run_scenario(load_scenario(path, pythonpath=[project / "src"])))
    assert verdict.passed, verdict.report()


def test_call_runs_the_users_entry_point(project: Path) -> None:
    name = (project / "NAME").read_text()
    (project / "src" / name / "app.py").write_text(
        "from openprogram import Runtime\n\n"
        "def main(topic: str, runtime: Runtime) -> str:\n"
        "    return 'app: ' + str(runtime.exec(f'About {topic}.', toolset='maths'))\n"
    )
    path = scenario(
        project,
        """\
        scenario: entry point
        registry: "PKG.tools:registry"
        call: "PKG.app:main"
        args: {topic: numbers}
        model:
          - tool_calls: [{double: {n: 4}}]
          - text: "eight"
        expect:
          result: "app: eight"
          events:
            - message_end: {role: user, text: "About numbers."}
            - tool_execution_end: {tool_name: double, result: "8"}
          requests:
            - {round: 1, tools: [double]}
        """,
    )
    verdict = check_outcome(run_scenario(load_scenario(path)))
    assert verdict.passed, verdict.report()


def test_exec_and_call_together_are_refused(project: Path) -> None:
    path = scenario(
        project,
        """\
        scenario: both
        exec: {content: "Go."}
        call: "PKG.tools:double"
        model: [{text: "x"}]
        """,
    )
    with pytest.raises(ScenarioError, match="give exec: or call:, not both"):
        load_scenario(path)
