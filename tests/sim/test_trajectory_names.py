"""A trajectory or a property that names a tool the scenario does not have is a typo that
would never match: refused with file:line and a did-you-mean, at load for a file's
``tools:``, when the run imports it for a ``registry:``."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from openprogram_sim import ScenarioError, check_outcome, load_scenario, run_scenario

TYPOS = """\
scenario: typos in a trajectory and its rules
tools:
  search: {returns: "3 results"}
  fetch: {returns: "page"}
exec: {content: "Find.", tools: [search, fetch]}
model:
  - tool_calls: [{search: {q: a}}, {fetch: {url: b}}]
  - text: done
expect:
  trajectory:
    mode: in_order
    calls:
      - serach: {q: a}
      - [fetch, fecth]
  properties:
    - at_most: {tool: serch, times: 1}
    - never: {tool: {$in: [fetch, fetsh]}, after: sarch}
    - same_round: [search, fettch]
    - before: {first: search, then: {tool: fech}}
    - no_repeat: sreach
    - ends_with: {reason: stop, tool: fetc}
"""


def _write(tmp_path: Path, text: str, name: str = "case.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _issues(path: Path) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, shown_as=path.name)
    return [str(i) for i in info.value.issues]


def test_each_unknown_name_is_refused_at_load_with_its_line(tmp_path: Path) -> None:
    assert _issues(_write(tmp_path, TYPOS)) == [
        "case.yaml:13: (expect.trajectory.calls[0]) the trajectory names tool 'serach', "
        "which is not defined; did you mean 'search'?",
        "case.yaml:14: (expect.trajectory.calls[1][1]) the trajectory names tool 'fecth', "
        "which is not defined; did you mean 'fetch'?",
        "case.yaml:16: (expect.properties[0].at_most.tool) property 1 (at_most) names tool "
        "'serch', which is not defined; did you mean 'search'?",
        "case.yaml:17: (expect.properties[1].never.tool.$in[1]) property 2 (never) names tool "
        "'fetsh', which is not defined; did you mean 'fetch'?",
        "case.yaml:17: (expect.properties[1].never.after) property 2 (never) names tool "
        "'sarch', which is not defined; did you mean 'search'?",
        "case.yaml:18: (expect.properties[2].same_round[1]) property 3 (same_round) names tool "
        "'fettch', which is not defined; did you mean 'fetch'?",
        "case.yaml:19: (expect.properties[3].before.then.tool) property 4 (before) names tool "
        "'fech', which is not defined; did you mean 'fetch'?",
        "case.yaml:20: (expect.properties[4].no_repeat) property 5 (no_repeat) names tool "
        "'sreach', which is not defined; did you mean 'search'?",
        "case.yaml:21: (expect.properties[5].ends_with.tool) property 6 (ends_with) names tool "
        "'fetc', which is not defined; did you mean 'fetch'?",
    ]


def test_a_conversations_execs_are_checked_too(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """\
        scenario: a typo in an exec's rule
        tools:
          search: {returns: "3 results"}
        conversation:
          - exec: {content: "One.", tools: [search]}
            expect:
              properties: [{at_least: {tool: serch, times: 1}}]
        model: [{tool_calls: [{search: {q: a}}]}, {text: "one"}]
        """,
    )
    assert _issues(path) == [
        "case.yaml:7: (conversation[0].expect.properties[0].at_least.tool) property 1 "
        "(at_least) names tool 'serch', which is not defined; did you mean 'search'?"
    ]


def test_a_tool_the_script_calls_and_matchers_are_not_typos(tmp_path: Path) -> None:
    """A scenario may test a call of a tool that does not exist; a matcher is no name."""
    path = _write(
        tmp_path,
        """\
        scenario: the model calls a tool that does not exist
        tools:
          search: {returns: "3 results"}
        exec: {content: "Find.", tools: [search]}
        model:
          - tool_calls: [{name: nope, arguments: {}}]
          - text: done
        expect:
          trajectory: {mode: exact, calls: [nope]}
          properties:
            - at_most: {tool: nope, times: 1}
            - never: {tool: {$regex: "^sear"}}
            - ends_with: {reason: stop}
        """,
    )
    verdict = check_outcome(run_scenario(load_scenario(path)))
    assert verdict.passed, verdict.report()


def test_a_tool_called_in_one_option_of_a_one_of_turn_is_known(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """\
        scenario: one option calls a tool that does not exist
        seed: 7
        tools:
          search: {returns: "3 results"}
        exec: {content: "Find.", tools: [search]}
        model:
          - one_of:
              - {weight: 1, tool_calls: [{search: {q: a}}]}
              - {weight: 1, tool_calls: [{made_up: {}}]}
          - text: done
        expect:
          properties: [{at_most: {tool: made_up, times: 1}}, {at_most: {tool: serch, times: 1}}]
        """,
    )
    assert _issues(path) == [
        "case.yaml:12: (expect.properties[1].at_most.tool) property 2 (at_most) names tool "
        "'serch', which is not defined; did you mean 'search'?"
    ]


def test_with_call_the_users_function_may_bring_its_own_tools(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """\
        scenario: an entry point
        call: "somewhere:main"
        model: [{text: "Done."}]
        expect:
          properties: [{never: own_tool}]
        """,
    )
    load_scenario(path)  # nothing refused: the function's tools are its own


REGISTRY = '''
from openprogram import ToolRegistry, function

registry = ToolRegistry()


@function(registry=registry)
def double(n: int) -> int:
    """Double a number."""
    return n * 2
'''


@pytest.fixture
def package(tmp_path: Path) -> str:
    name = f"trajnames_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / "src" / name).mkdir(parents=True)
    (tmp_path / "src" / name / "__init__.py").write_text("")
    (tmp_path / "src" / name / "tools.py").write_text(REGISTRY)
    (tmp_path / "pyproject.toml").write_text('[tool.openprogram]\npythonpath = ["src"]\n')
    yield name
    for module in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[module]


def test_a_registrys_names_are_checked_when_the_run_starts(tmp_path: Path, package: str) -> None:
    text = f"""\
        scenario: a registry's tool misspelt
        registry: "{package}.tools:registry"
        exec: {{content: "Go.", tools: [double]}}
        model:
          - tool_calls: [{{double: {{n: 2}}}}]
          - text: "4"
        expect:
          trajectory: {{mode: exact, calls: [double]}}
          properties: [{{at_most: {{tool: dobule, times: 1}}}}]
        """
    loaded = load_scenario(_write(tmp_path, text), shown_as="case.yaml")  # nothing imported
    with pytest.raises(ScenarioError) as info:
        run_scenario(loaded)
    assert [str(i) for i in info.value.issues] == [
        "case.yaml:9: (expect.properties[0].at_most.tool) property 1 (at_most) names tool "
        "'dobule', which is not defined; did you mean 'double'?"
    ]
    fixed = _write(tmp_path, text.replace("dobule", "double"))
    verdict = check_outcome(run_scenario(load_scenario(fixed)))
    assert verdict.passed, verdict.report()
