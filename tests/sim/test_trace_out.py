"""``openprogram-sim run --trace-out DIR``: each run's trace in a file of its own, named
after the scenario file and title, scrubbed of secrets, and read back by ``check`` with
the scenario's verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _support import run_cli

from openprogram_sim.report._trace_out import trace_file_stem

SCENARIO = """\
scenario: two searches, one fetch
tools:
  search: {returns: "hit"}
  fetch: {returns: "page"}
exec: {content: "Find it.", tools: [search, fetch]}
model:
  - tool_calls: [{search: {q: weather in Paris}}, {fetch: {url: "http://a"}}]
  - tool_calls: [{search: {q: weather in Lyon}}]
  - text: "Found."
expect:
  properties:
    - ends_with: {reason: stop}
    - at_most: {tool: search, times: 1}
"""

RULES = """\
properties:
  - ends_with: {reason: stop}
  - at_most: {tool: search, times: 1}
"""

HELD = """\
scenario: one search
tools:
  search: {returns: "hit"}
exec: {content: "Find it.", tools: [search]}
model:
  - tool_calls: [{search: {q: tides}}]
  - text: "Found."
"""

SEARCH_FILE = "scenarios__search--two-searches-one-fetch.trace.json"
HELD_FILE = "scenarios__held--one-search.trace.json"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "search.yaml").write_text(SCENARIO)
    (tmp_path / "scenarios" / "held.yaml").write_text(HELD)
    (tmp_path / "rules.yaml").write_text(RULES)
    return tmp_path


def test_each_run_is_written_as_the_trace_run_json_holds(project: Path) -> None:
    result = run_cli("run", "scenarios", "--trace-out", "traces", cwd=project)
    assert result.returncode == 1  # search.yaml breaks its at_most rule
    assert "openprogram-sim: 2 trace file(s) written to traces\n" in result.stderr
    assert sorted(p.name for p in (project / "traces").iterdir()) == [HELD_FILE, SEARCH_FILE]
    ran = json.loads(run_cli("run", "--json", "scenarios", cwd=project).stdout)
    for scenario, name in zip(ran["scenarios"], [HELD_FILE, SEARCH_FILE], strict=True):
        written = json.loads((project / "traces" / name).read_text())
        assert written == {
            "path": scenario["path"],
            "title": scenario["title"],
            "trace": scenario["trace"],
        }


def test_check_reads_a_written_trace_with_the_scenarios_verdict(project: Path) -> None:
    ran = run_cli("run", "scenarios/search.yaml", "--trace-out", "traces", cwd=project)
    broken = (
        "    search was called 2 times, at most 1 allowed: #6, #18 (beyond the limit: #18)\n"
        '      #18  tool_execution_start   d0 r2 search({"q": "weather in Lyon"})\n'
    )
    assert "".join(line[2:] + "\n" for line in broken.splitlines()) in ran.stdout
    checked = run_cli("check", f"traces/{SEARCH_FILE}", "--properties", "rules.yaml", cwd=project)
    assert (checked.returncode, checked.stderr) == (1, "")
    assert checked.stdout == (
        f"FAIL  traces/{SEARCH_FILE}\n"
        '  - property 2 (at_most) does not hold: at_most: {"tool": "search", "times": 1}\n'
        "    at rules.yaml:3\n"
        f"{broken}"
        "\n1 trace(s) checked against 2 properties: 0 held, 1 failed\n"
    )
    run_cli("run", "scenarios/held.yaml", "--trace-out", "traces", cwd=project)
    held = run_cli("check", f"traces/{HELD_FILE}", "--properties", "rules.yaml", cwd=project)
    assert (held.returncode, held.stdout) == (
        0,
        f"PASS  traces/{HELD_FILE}\n\n1 trace(s) checked against 2 properties: 1 held, 0 failed\n",
    )


def test_secrets_in_the_trace_are_scrubbed(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "env-secret-value-0123456789"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    key = "sk-proj-" + "T3stK3yOpenAI0123456789abcdefXYZ" * 2
    (project / "scenarios" / "leak.yaml").write_text(
        "scenario: a tool that echoes keys\n"
        f'tools:\n  env: {{returns: "key {secret} and {key}"}}\n'
        'exec: {content: "Show.", tools: [env]}\n'
        "model:\n  - tool_calls: [{env: {}}]\n  - text: done\n"
    )
    result = run_cli("run", "scenarios/leak.yaml", "--trace-out", "out", cwd=project)
    assert result.returncode == 0, result.stdout
    (written,) = (project / "out").iterdir()
    text = written.read_text()
    assert secret not in text and key not in text
    ends = [e for e in json.loads(text)["trace"] if e["type"] == "tool_execution_end"]
    assert [e["result"] for e in ends] == ["key <redacted> and <redacted:openai-key>"]


def test_file_names_are_safe_and_long_ones_end_with_a_hash() -> None:
    assert trace_file_stem("scenarios/basics/one_pick.yaml", "one pick") == (
        "scenarios__basics__one_pick--one-pick"
    )
    assert trace_file_stem("../up/x.yml", 'a/b\\c: "q"\n..') == "up__x--a-b-c-q"
    assert trace_file_stem("/abs/x.yaml", "...") == "abs__x--scenario"
    long = trace_file_stem("s/x.yaml", "word " * 60)
    assert len(long) == 150
    assert long.startswith("s__x--word-word-") and long[-11] == "-"
    assert long != trace_file_stem("s/x.yaml", "word " * 61)  # the hash tells them apart


def test_otel_without_trace_out_is_refused(project: Path) -> None:
    result = run_cli("run", "scenarios", "--otel", cwd=project)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "openprogram-sim: --otel writes spans beside the traces: give --trace-out DIR too\n"
    )


def test_a_folder_that_cannot_be_written_is_named(project: Path) -> None:
    (project / "taken").write_text("a file, not a folder")
    result = run_cli("run", "scenarios/held.yaml", "--trace-out", "taken/traces", cwd=project)
    assert result.returncode == 2
    assert result.stderr.startswith("openprogram-sim: --trace-out taken/traces: cannot write: ")


def test_a_file_that_does_not_load_writes_no_trace(project: Path) -> None:
    (project / "scenarios" / "bad.yaml").write_text("scenario: bad\nexec: {contnt: x}\n")
    result = run_cli("run", "scenarios", "--trace-out", "traces", cwd=project)
    assert result.returncode == 2
    assert sorted(p.name for p in (project / "traces").iterdir()) == [HELD_FILE, SEARCH_FILE]
