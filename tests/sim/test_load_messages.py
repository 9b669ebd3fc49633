"""Load-time messages a new user meets first: each names the file, the line and the fix.

A tab in indentation says "tab"; a file over the size cap says its real size and the cap in
MiB; an empty file says it is empty and shows a minimal scenario (which runs); a request
expectation naming a tool the file does not define is caught at load with a did-you-mean."""

from __future__ import annotations

from pathlib import Path

import pytest
from _support import run_cli

from openprogram_sim.errors import ScenarioError
from openprogram_sim.play import run_scenario
from openprogram_sim.scenario import load_scenario, parse_scenario
from openprogram_sim.scenario._loader import MINIMAL
from openprogram_sim.scenario._yaml import MAX_BYTES

GOOD = """\
scenario: one search
tools:
  search_notes: {returns: "a note"}
exec: {content: "Find my note."}
model:
  - tool_calls: [{search_notes: {}}]
  - text: "Found."
expect:
  result: "Found."
"""


def issues(text: str, path: str = "notes.yaml") -> list[str]:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, path)
    return [str(issue) for issue in info.value.issues]


# --------------------------------------------------------------------------- tabs


def test_a_tab_in_indentation_says_tab_with_its_line_and_the_fix() -> None:
    text = GOOD.replace("  search_notes:", "\tsearch_notes:")
    assert issues(text) == [
        "notes.yaml:3: line 3 is indented with a tab; YAML allows only spaces for indentation: "
        "replace the tab with spaces (editors: 'convert indentation to spaces')"
    ]


def test_a_tab_indented_file_names_the_first_line_and_counts_the_others() -> None:
    text = "scenario: tabs\nexec:\n\tcontent: hi\n\ttools: []\nmodel:\n\t- text: hi\n"
    assert issues(text, "tabs.yaml") == [
        "tabs.yaml:3: line 3 is indented with a tab, and so are 2 other lines; YAML allows only "
        "spaces for indentation: replace the tabs with spaces (editors: 'convert indentation "
        "to spaces')"
    ]


def test_a_tab_after_spaces_is_named_too_and_a_tab_inside_a_value_is_fine() -> None:
    text = GOOD.replace("  - text:", "  \t- text:")
    assert issues(text) == [
        "notes.yaml:7: line 7 is indented with a tab; YAML allows only spaces for indentation: "
        "replace the tab with spaces (editors: 'convert indentation to spaces')"
    ]
    assert parse_scenario(GOOD.replace('"Found."', '"Fou\tnd."'), "ok.yaml").scenario


def test_other_syntax_errors_keep_their_own_message() -> None:
    (issue,) = issues(GOOD.replace("expect:", "expect: ["))
    assert "not valid YAML" in issue and "tab" not in issue


# --------------------------------------------------------------------------- size


def test_a_file_over_the_cap_says_its_real_size_and_the_cap_in_mib(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as handle:
        handle.write(GOOD.encode())
        handle.truncate(50 * 2**20)  # 50 MiB, most of it a hole: nothing is written
    result = run_cli("run", "big.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert (
        "  big.yaml: the file is 50 MiB (52,428,800 bytes); scenario files are limited to "
        "10 MiB, a fixed limit (a scenario is a few KiB): split it into several scenarios, or "
        "keep large data out of it (a recorded session belongs in a cassette: "
        "`model: {cassette: ...}`)"
    ) in result.stdout.splitlines()
    assert "10,485,761" not in result.stdout


def test_a_file_just_over_the_cap_says_its_size_to_the_tenth(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_BYTES + 2**20 // 2))
    with pytest.raises(ScenarioError) as info:
        load_scenario(big, shown_as="big.yaml")
    assert str(info.value.issues[0]).startswith(
        "big.yaml: the file is 10.5 MiB (11,010,048 bytes); scenario files are limited to 10 MiB"
    )


# --------------------------------------------------------------------------- empty


@pytest.mark.parametrize("text", ["", "\n\n   \n", "# a comment\n# another\n", "---\n"])
def test_an_empty_file_says_it_is_empty_and_shows_a_minimal_scenario(text: str) -> None:
    assert issues(text, "empty.yaml") == [
        "empty.yaml:1: the file is empty (no YAML in it, only blank lines or comments); a "
        'minimal scenario is {scenario: hello, exec: {content: "Hi"}, model: [{text: "Hello"}], '
        'expect: {result: "Hello"}}, or run `openprogram-sim init MODULE` for a starter over '
        "your tools"
    ]


def test_the_minimal_scenario_it_shows_runs_and_passes(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("")
    shown = run_cli("run", "empty.yaml", cwd=tmp_path)
    assert shown.returncode == 2 and MINIMAL in shown.stdout
    (tmp_path / "minimal.yaml").write_text(MINIMAL + "\n")
    result = run_cli("run", "minimal.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert "PASS  minimal.yaml" in result.stdout


def test_a_document_that_is_not_a_mapping_is_still_named_so() -> None:
    assert issues("~\n", "null.yaml") == [
        "null.yaml:1: a scenario file is a mapping with `scenario:`, `exec:`, `model:` and "
        "`expect:` keys"
    ]


# --------------------------------------------------------------------------- expect.requests


def test_a_misspelt_tool_in_expect_requests_is_caught_at_load_with_did_you_mean() -> None:
    text = GOOD + "  requests:\n    - {round: 1, tools: [search_note]}\n"
    assert issues(text) == [
        "notes.yaml:11: (expect.requests[0].tools[0]) expect.requests[0].tools names tool "
        "'search_note', which is not defined; did you mean 'search_notes'?"
    ]


def test_request_tools_may_name_the_loops_own_tool_search_and_use_matchers() -> None:
    text = GOOD + (
        "  requests:\n"
        "    - {round: 1, tools: [search_notes, tool_search]}\n"
        "    - {round: 2, tools: {$contains: search_notes}}\n"
    )
    assert parse_scenario(text, "ok.yaml").expect.requests[0].tools == [
        "search_notes",
        "tool_search",
    ]


def test_request_tools_are_not_checked_when_user_code_can_add_tools() -> None:
    # `call:` runs the user's function, which may exec with tools of its own; the registry
    # that cannot be imported is reported once (when the run imports it), not every name it
    # would have defined
    called = (
        'scenario: entry point\ncall: "no_such_module_xyz:answer"\nmodel: [{text: "hi"}]\n'
        "expect:\n  requests:\n    - {round: 1, tools: [whatever]}\n"
    )
    found = run_issues(called, "call.yaml")
    assert len(found) == 1 and "no_such_module_xyz" in found[0] and "whatever" not in found[0]
    registry = GOOD.replace("tools:\n", 'registry: "no_such_module_xyz:registry"\ntools:\n')
    found = run_issues(registry + "  requests:\n    - {tools: [from_the_registry]}\n", "reg.yaml")
    assert len(found) == 1 and "from_the_registry" not in found[0]


def run_issues(text: str, path: str) -> list[str]:
    """The issues of a file that loads (it imports nothing) but whose run cannot start."""
    scenario = parse_scenario(text, path)
    with pytest.raises(ScenarioError) as info:
        run_scenario(scenario)
    return [str(i) for i in info.value.issues]


def test_the_library_and_the_example_still_load() -> None:
    result = run_cli("run", "scenarios/toolsets", "scenarios/deferred", "scenarios/nested")
    assert result.returncode == 0, result.stdout
