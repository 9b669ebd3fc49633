"""`openprogram-sim` as a user runs it: its output and exit status, through ``main(argv)``
in-process; the smoke tests at the end run the installed console script as a real process."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _support import ONE_SEARCH, CliResult, run_cli

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
CLI = Path(sys.executable).parent / "openprogram-sim"

PASSING = ONE_SEARCH.replace("scenario: one search\n", "scenario: one search\ntags: [basics]\n")


def run(*args: str, cwd: Path = ROOT) -> CliResult:
    return run_cli(*args, cwd=cwd)


def test_all_passing_exits_zero_with_one_line_per_scenario(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(PASSING)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.yml").write_text(PASSING.replace("one search", "another"))
    result = run("run", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert re.fullmatch(r"PASS  a\.yaml +2 rounds +\d+\.\d ms  one search", lines[0])
    assert re.fullmatch(r"PASS  sub/b\.yml +2 rounds +\d+\.\d ms  another", lines[1])
    assert lines[-1].startswith("2 scenarios: 2 passed in ")


def test_a_failing_scenario_exits_one_and_prints_its_diff() -> None:
    result = run("run", str(DATA / "steering_broken.yaml"))
    assert result.returncode == 1
    out = result.stdout
    assert re.match(r"FAIL  tests/sim/data/steering_broken\.yaml +2 rounds", out)
    assert "FAILED: tests/sim/data/steering_broken.yaml" in out
    assert "expected event 2 of 3 did not match" in out
    assert "    is_error   false        true                                   <- differs" in out
    assert out.rstrip().splitlines()[-1].startswith("1 scenarios: 0 passed, 1 failed in ")


def test_an_invalid_file_exits_two_and_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(PASSING.replace("tools: [search]", "tools: [serch]"))
    (tmp_path / "good.yaml").write_text(PASSING)
    result = run("run", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    assert "ERROR bad.yaml   (could not load: 1 problem(s))" in result.stdout  # padded
    assert (
        "  bad.yaml:5: (exec.tools[0]) exec.tools names tool 'serch', which is "
        "not defined; did you mean 'search'?" in result.stdout  # relative to where it ran
    )
    assert "PASS  good.yaml" in result.stdout


def test_json_output_for_machines(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(PASSING)
    result = run("run", "--json", str(tmp_path / "a.yaml"))
    assert result.returncode == 0
    payload = json.loads(result.stdout)
    assert payload["summary"]["passed"] == 1 and payload["summary"]["total"] == 1
    (scenario,) = payload["scenarios"]
    assert scenario["status"] == "passed" and scenario["result"] == "Found."
    assert scenario["rounds"] == 2 and scenario["model_calls"] == 2
    assert scenario["trace"][-1] == {"type": "agent_end", "depth": 0, "round": 2, "reason": "stop"}


def test_json_output_is_scrubbed_as_a_cassette_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a key in the model's text or a tool's result reaches stdout (a CI log) masked
    shaped = "sk-" + "proj" + "A1b2C3d4E5f6G7h8I9j0K1l2M3"
    secret = "secret-" + "value-from-the-env-42"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    text = (
        PASSING.replace('returns: "hit"', f'returns: "token {shaped}"')
        .replace('text: "Found."', f'text: "Found {secret}."')
        .replace('result: "Found."', f'result: "Found {secret}."')
    )
    (tmp_path / "a.yaml").write_text(text)
    result = run("run", "--json", str(tmp_path / "a.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert shaped not in result.stdout and secret not in result.stdout
    (scenario,) = json.loads(result.stdout)["scenarios"]
    assert scenario["result"] == "Found <redacted>."
    ends = [e for e in scenario["trace"] if e["type"] == "tool_execution_end"]
    assert [e["result"] for e in ends] == ["token <redacted:openai-key>"]


def test_keyword_filter_and_missing_paths(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(PASSING)
    (tmp_path / "b.yaml").write_text(PASSING.replace("one search", "other"))
    result = run("run", "-k", "other", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0 and "1 scenarios: 1 passed" in result.stdout
    missing = run("run", str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert "no such file or directory" in missing.stderr


def test_schema_command_prints_json_schema(tmp_path: Path) -> None:
    result = run("schema")
    assert result.returncode == 0
    assert json.loads(result.stdout)["title"] == "openprogram scenario"
    out = tmp_path / "schema.json"
    assert run("schema", "-o", str(out)).returncode == 0
    assert json.loads(out.read_text())["required"] == ["scenario", "model"]


@pytest.mark.parametrize("args", [[], ["bogus"]])
def test_usage_errors_exit_two(args: list[str]) -> None:
    result = run(*args)
    assert result.returncode == 2 and "usage: openprogram-sim" in result.stderr


def test_tags_filter_and_columns_line_up(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(PASSING)
    (tmp_path / "a_much_longer_name.yaml").write_text(
        PASSING.replace("tags: [basics]", "tags: [slow]").replace("one search", "slow one")
    )
    (tmp_path / "c.yaml").write_text(
        PASSING.replace("tags: [basics]", "tags: [basics, slow]").replace("one search", "both")
    )
    every = run("run", ".", cwd=tmp_path).stdout.splitlines()[:3]
    assert len({line.index(" ms  ") for line in every}) == 1, every  # one column for times
    assert len({line.index("2 rounds") for line in every}) == 1, every
    only = run("run", ".", "-m", "basics", cwd=tmp_path)
    assert [line.split()[1] for line in only.stdout.splitlines()[:2]] == ["a.yaml", "c.yaml"]
    assert only.stdout.splitlines()[-1].startswith("2 scenarios: 2 passed")
    dropped = run("run", ".", "-m", "not slow", cwd=tmp_path)
    assert dropped.stdout.splitlines()[-1].startswith("1 scenarios: 1 passed")
    both = run("run", ".", "-m", "basics", "-m", "slow", cwd=tmp_path)
    assert both.stdout.splitlines()[-1].startswith("3 scenarios: 3 passed")


def smoke(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The console script ``pip install`` put beside this Python, as a real process."""
    assert CLI.exists(), f"the console script is not installed: {CLI}"
    return subprocess.run([str(CLI), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_smoke_the_installed_console_script_runs_a_file(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(PASSING)
    result = smoke("run", "a.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("PASS  a.yaml ")
    assert result.stdout.splitlines()[-1].startswith("1 scenarios: 1 passed in ")


def test_smoke_the_installed_console_script_prints_its_help(tmp_path: Path) -> None:
    result = smoke("--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: openprogram-sim ")
    for command in ("run", "schema", "init", "fuzz", "serve", "record", "distill"):
        assert command in result.stdout
